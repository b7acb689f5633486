"""The simulated device (and optionally rviz): `ros2 launch mujoco_hal_ros sim.launch.py`.

Arguments: device_file, model, namespace, real_time_factor, rviz, rviz_image (and
frame_prefix, publish_clock, publish_rate, log_summary, controllers_file). The mapping to
parameters lives in mujoco_hal_ros/ros/launch_args.py, which the tests cover.
"""

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from mujoco_hal_ros.ros import launch_args


def _nodes(context):
    args = {name: LaunchConfiguration(name).perform(context) for name in launch_args.SIM_ARGS}
    share = get_package_share_directory(launch_args.PACKAGE)
    return [Node(**kw) for kw in launch_args.sim_launch(args, share)]


def generate_launch_description():
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=text)
         for name, (default, text) in launch_args.SIM_ARGS.items()]
        + [OpaqueFunction(function=_nodes)])
