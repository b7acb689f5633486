#!/usr/bin/env python3
"""The core without ROS: open the built-in bench arm, move its tip, hold, read it back.

    python examples/core_move_to.py

Run from a shell where ``. install/setup.bash`` was sourced (or ``pip install -e .``).
"""

from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.sim.device import Device


def main():
    with Device() as arm:                       # config/bench_arm.yaml + models/bench_arm.xml
        print('goal channels:', {k: round(v, 1) for k, v in arm.goals().items()})
        for target in ({'x': 170, 'y': -30, 'z': 60}, {'x': 190, 'y': 40, 'z': 80}):
            result = arm.move_to(target)        # the device file's units: mm
            tip = arm.read(['tip_x', 'tip_y', 'tip_z'])
            print(result['code'], 'tip at', {k: round(v, 1) for k, v in tip.items()}, 'mm')
        arm.hold()                              # every setpoint frozen where it is
        try:
            arm.move_to({'x': 170, 'y': 0, 'z': 5})
        except DeviceError as err:              # refused before anything moved
            print('refused:', err.code, err)


if __name__ == '__main__':
    main()
