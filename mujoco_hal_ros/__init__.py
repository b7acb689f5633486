"""mujoco_hal_ros: any MuJoCo model as a simulated device on ROS 2.

The core (device, kernel, IK, pool) imports without rclpy; ``mujoco_hal_ros.ros`` holds the
nodes. Generated interfaces live beside it as ``mujoco_hal_ros.msg``/``srv``/``action``.
"""

__version__ = '0.1.0'
