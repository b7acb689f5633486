"""The conformance tier's core: a zoo of third-party models and one battery of checks.

The pytest tier (``test/conformance``) and ``bench/conformance.py`` both run the battery
from here, so the table a user reads is the one the tests assert. No rclpy.
"""
