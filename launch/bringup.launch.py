"""The device, simulated or real, under the same topic and action names.

    ros2 launch mujoco_hal_ros bringup.launch.py use_sim:=true
    ros2 launch mujoco_hal_ros bringup.launch.py use_sim:=false \
        driver_package:=my_arm_driver driver_executable:=driver driver_params:=/path/params.yaml

The rest of a stack launches against `namespace` and never needs to know which one runs.
The mapping lives in mujoco_hal_ros/ros/launch_args.py, which the tests cover.
"""

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from mujoco_hal_ros.ros import launch_args


def _nodes(context):
    args = {name: LaunchConfiguration(name).perform(context)
            for name in launch_args.BRINGUP_ARGS}
    share = get_package_share_directory(launch_args.PACKAGE)
    return [Node(**kw) for kw in launch_args.bringup_launch(args, share)]


def generate_launch_description():
    return LaunchDescription(
        [DeclareLaunchArgument(name, default_value=default, description=text)
         for name, (default, text) in launch_args.BRINGUP_ARGS.items()]
        + [OpaqueFunction(function=_nodes)])
