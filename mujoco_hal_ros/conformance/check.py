"""``check_robot``: the conformance battery on the user's own URDF or MJCF (no ROS needed).

    check_robot my_arm.urdf
    ros2 run mujoco_hal_ros check_robot my_arm.urdf --json
    check_robot scene.xml --kind legged

Before pointing a launch file at the simulated arm, a user wants to know whether their
description will behave there: that it starts, holds its pose, reaches targets by
``move_to`` (judged by forward kinematics on a separate MjData), follows a joint trajectory
to its end, reports effort, answers a setpoint step without chattering, keeps mimic joints
together, and that its gripper channel moves the fingers (their opening measured from the
model's geometry; a gripper bound to a servo horn fails, ``--gripper-joint`` checks the
binding a controllers file makes). These are the checks every model of the zoos passes
(``battery``, ``doc/conformance.md``), run on one more. The URDF is loaded as ``sim_node
robot_description:=`` loads it (``package://`` through ``ROS_PACKAGE_PATH``, relative meshes
beside the file).

One line per check goes to stdout; with ``--json`` the last line is one JSON object
(``model``, ``kind``, ``passed``, ``checks``: each with ``check``, ``result`` (pass, FAIL or
skip), ``detail``; ``sensors``: each sensor found, its kind, topics, frame, rate and whether
one reading came out (``sensors_found``); ``notes``: what the URDF import changed, every
sensor tag it could not follow among them). Exit status: 0 when nothing
failed, 1 when a check failed, 2 when the file could not be read.
"""

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from ..errors import DeviceError
from ..joint_view import FREE, view

if TYPE_CHECKING:
    from .model import ZooModel
    from .sensors_found import SensorFound

KINDS = ('auto', 'arm', 'legged', 'hand', 'other')


def _parser():
    p = argparse.ArgumentParser(
        prog='check_robot', description='Run the conformance battery (start, hold, move_to, '
        'trajectory, effort, step, mimic, gripper) on a URDF or MJCF file.')
    p.add_argument('path', help='a .urdf file (as robot_description) or an MJCF .xml')
    p.add_argument('--kind', choices=KINDS, default='auto',
                   help='arm (move_to and trajectories), legged, hand or other; auto: '
                        'legged when the model has a free joint, else arm (a URDF\'s base is '
                        'fixed: give --kind legged for a quadruped or humanoid URDF)')
    p.add_argument('--gripper-joint', default=None, metavar='JOINT',
                   help='the joint your gripper_controller drives (its joint parameter); '
                        'default: the one zero-config finds. The gripper check fails when '
                        'commanding it does not move the fingers')
    p.add_argument('--json', action='store_true', help='end with one JSON line')
    return p


def _is_urdf(path: str) -> bool:
    from ..description.urdf_in import is_urdf
    if path.lower().endswith('.urdf'):
        return True
    with open(path, encoding='utf-8', errors='replace') as handle:
        return is_urdf(handle.read(4096))


def _kind(zm: 'ZooModel', asked: str) -> str:
    """``asked``, or from the model: a free joint (a floating base) makes it legged, and
    anything else an arm. A URDF's base is fixed to the world (no floating joint), so a
    quadruped or humanoid URDF needs ``--kind legged``: guessing limbs from the tree got
    a third of the MJCF zoo wrong (wheels, fingers, grippers, planar walkers)."""
    if asked != 'auto':
        return asked
    import mujoco

    from .zoo import materialize
    m = mujoco.MjModel.from_xml_path(materialize(zm))
    return 'legged' if view(m).of_kind(FREE) else 'arm'


def _sensors(zm: 'ZooModel') -> 'list[SensorFound]':
    """The sensors of the model (``sensors_found``), each tried once; a model that does
    not load gives none here (the battery says why)."""
    import mujoco

    from .sensors_found import find
    from .zoo import materialize
    try:
        return find(mujoco.MjModel.from_xml_path(materialize(zm)))
    except (ValueError, DeviceError):
        return []


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from . import battery
    from .model import ZooModel
    from .urdf_zoo import SPAN
    path = os.path.abspath(args.path)
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        if not os.path.isfile(path):
            raise FileNotFoundError(f'{args.path}: no such file; give a .urdf or MJCF path')
        urdf = _is_urdf(path)
        # URDF joints are sampled near mid-range, as the URDF zoo's are (urdf_zoo.SPAN)
        zm = ZooModel(name, path, 'arm', urdf=urdf, span=SPAN if urdf else None,
                      gripper_joint=args.gripper_joint)
        zm.kind = _kind(zm, args.kind)
    except (OSError, ValueError, DeviceError) as exc:
        print(f'check_robot: {exc}', file=sys.stderr)
        if args.json:
            print(json.dumps({'model': name, 'error': str(exc)}))
        return 2
    results = battery.run(zm)
    sensors = _sensors(zm)
    failed = [r for r in results if r.mark == 'FAIL'] + [s for s in sensors
                                                         if s.result == 'FAIL']
    print(f'{name} ({"URDF" if urdf else "MJCF"}, {zm.kind}): '
          f'{len(results) + len(sensors) - len(failed)}/{len(results) + len(sensors)} '
          'checks without a failure')
    for r in results:
        print(f'  {r.mark:4s} {r.check:16s} {r.skipped_reason or r.detail}')
    print(f'  sensors found: {len(sensors)}')
    for s in sensors:
        print(f'    {s.line()}')
    for note in zm.notes:
        print(f'  note: {note}')
    if args.json:
        print(json.dumps({
            'model': name, 'kind': zm.kind, 'passed': not failed,
            'checks': [{'check': r.check, 'result': r.mark,
                        'detail': r.skipped_reason or r.detail} for r in results],
            'sensors': [dict(vars(s)) for s in sensors],
            'notes': list(zm.notes)}))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
