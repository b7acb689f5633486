#!/usr/bin/env python3
"""Import every interface the nodes need, so a set-up that left one out fails loudly.

A missing stand-in used to show only later, as a node serving no FollowJointTrajectory;
here it stops the set-up with the module's name. Prints nothing when all import.
"""

import importlib
import sys

# module -> names the nodes import from it
NEEDED = {
    'action_msgs.msg': ['GoalStatus'],
    'builtin_interfaces.msg': ['Duration', 'Time'],
    'control_msgs.action': ['FollowJointTrajectory', 'GripperCommand'],
    'control_msgs.msg': ['JointTrajectoryControllerState', 'GripperCommand'],
    'diagnostic_msgs.msg': ['DiagnosticArray', 'DiagnosticStatus', 'KeyValue'],
    'geometry_msgs.msg': ['Point', 'PoseStamped', 'Quaternion', 'TransformStamped',
                          'Vector3'],
    'rosgraph_msgs.msg': ['Clock'],
    'sensor_msgs.msg': ['CameraInfo', 'Image', 'JointState'],
    'simulation_interfaces.action': ['SimulateSteps'],
    'simulation_interfaces.msg': ['Result', 'SimulationState', 'SimulatorFeatures'],
    'std_msgs.msg': ['Float64', 'String'],
    'std_srvs.srv': ['SetBool', 'Trigger'],
    'tf2_msgs.msg': ['TFMessage'],
    'trajectory_msgs.msg': ['JointTrajectory', 'JointTrajectoryPoint'],
    'visualization_msgs.msg': ['Marker', 'MarkerArray'],
    'mujoco_hal_ros.msg': [],
    'mujoco_hal_ros.srv': [],
    'mujoco_hal_ros.action': [],
}


def missing(needed=NEEDED):
    """`module.Name: why` for every interface that does not import."""
    out = []
    for module, names in needed.items():
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure means it is unusable
            out.append(f'{module}: {type(exc).__name__}: {exc}')
            continue
        out.extend(f'{module}.{name}: not in {mod.__file__}'
                   for name in names if not hasattr(mod, name))
    return out


def main():
    bad = missing()
    for line in bad:
        print(f'[setup] missing interface {line}', file=sys.stderr)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
