"""The fast paths: every speed measure that bypasses a plain library call, in one place.

Each has a plain equivalent elsewhere in the package; ``mujoco_hal_ros.fastpath.enabled``
decides which one runs (the nodes' ``fast_paths`` parameter), so a test can run the same
scenario both ways and compare what came out byte for byte.
"""
