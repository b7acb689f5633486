"""Test the user's own packages against the simulated robot.

``SimRobot`` brings a robot up (an MJCF, a URDF with its controllers file, or a robots
file), in this process or as a real ``sim_node`` process, on a ROS domain of its own, waits
until it answers, and takes everything down on ``close`` (a context manager), whatever the
test did. By default it is deterministic: the simulation waits, paused, and advances only
when the test steps it (``step``, ``run_until``), in simulated time, so the same test gives
the same result on every run and never sleeps on the wall clock; ``/clock`` is published
for the user's nodes.

The pytest plugin (``pytest -p mujoco_hal_ros.testing.plugin``, or
``pytest_plugins = ['mujoco_hal_ros.testing.plugin']`` in a conftest) gives the
``sim_robot`` fixture: a factory of ``SimRobot`` that closes them after the test and keeps
the recording of a failed test (a rosbag2 folder) under ``MUJOCO_HAL_ROS_ARTIFACTS``.
"""

from .robot import free_domain_id, SimRobot

__all__ = ['SimRobot', 'free_domain_id']
