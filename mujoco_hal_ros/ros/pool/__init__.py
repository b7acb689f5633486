"""pool_node: the batched EnvPool over ROS 2, and a client that splits a batch over nodes.
"""
