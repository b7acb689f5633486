"""Scene edits: wall time of a spawn or delete recompile through MjSpec (``world.scene``),
and of carrying the state over, on the built-in bench arm and Menagerie's Panda; then the
same edits on a running sim_node during a move.

    python bench/bench_world.py [--quick] [--no-node]

The live part runs sim_node in-process on the bench arm at real-time factor 1, a
subscriber in a Context of its own (its own DDS participant) stamping every joint_states
message with the monotonic clock. During a running move_to a box is spawned, then deleted
during the next one: printed are the wall time of each ``device.scene.spawn`` /
``delete`` call (compile, swap and all) and the longest gap between joint_states
messages around it, in ms and as a ratio to the publish period, and whether the move still
ended DONE.
"""

import argparse
import importlib.util
from itertools import pairwise
import os
import sys
import threading
import time

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from mujoco_hal_ros.menagerie import bench_arm_path, model_path  # noqa: E402
from mujoco_hal_ros.world import scene  # noqa: E402

BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')


def measure(path, rounds):
    s = scene.Scene(path)
    old = s.spec.compile()
    old_data = mujoco.MjData(old)
    mujoco.mj_forward(old, old_data)
    spawn, delete, carry = [], [], []
    for i in range(rounds):
        t0 = time.perf_counter()
        spec, model = s.spawn(BOX, f'box{i}', position=[0.3, 0.0, 0.3])
        spawn.append(time.perf_counter() - t0)
        data = mujoco.MjData(model)
        t0 = time.perf_counter()
        scene.carry_state(old, old_data, model, data)
        carry.append(time.perf_counter() - t0)
        s2 = scene.Scene.__new__(scene.Scene)
        s2.spec = spec
        t0 = time.perf_counter()
        s2.delete(f'box{i}/box')
        delete.append(time.perf_counter() - t0)
    return {k: 1000 * float(np.median(v)) for k, v in
            (('spawn_ms', spawn), ('carry_ms', carry), ('delete_ms', delete))}


def live(rounds, rate=100.0):
    """[(edit, call ms, longest joint_states gap ms, move result code)] on a sim_node."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    ctx, sub_ctx = rclpy.Context(), rclpy.Context()
    rclpy.init(context=ctx, args=[])
    rclpy.init(context=sub_ctx, args=[])
    node = SimNode(context=ctx, parameter_overrides=[Parameter('publish_rate', value=rate)])
    listener = rclpy.create_node('bench_world_listener', context=sub_ctx)
    arrivals = []
    listener.create_subscription(JointState, 'joint_states',
                                 lambda _m: arrivals.append(time.monotonic()), 100)
    ex, sub_ex = MultiThreadedExecutor(4, context=ctx), SingleThreadedExecutor(context=sub_ctx)
    ex.add_node(node)
    sub_ex.add_node(listener)
    stop = threading.Event()
    spinners = [threading.Thread(target=lambda e=e: [e.spin_once(timeout_sec=0.05)
                                                     for _ in iter(stop.is_set, True)],
                                 daemon=True) for e in (ex, sub_ex)]
    for t in spinners:
        t.start()
    out = []
    try:
        dev = node.device
        deadline = time.monotonic() + 10.0
        while len(arrivals) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        points = ([0.18, 0.05, 0.06], [0.16, -0.05, 0.08])
        for i in range(rounds):
            for edit in ('spawn', 'delete'):
                move = dev.move_to(point=points[(2 * i + (edit == 'delete')) % 2], wait=False)
                time.sleep(0.2)
                t0 = time.monotonic()
                if edit == 'spawn':
                    dev.scene.spawn(BOX, f'crate{i}', position=[0.3, 0.3, 0.1])
                else:
                    dev.scene.delete(f'crate{i}')
                t1 = time.monotonic()
                time.sleep(0.3)
                window = [t for t in list(arrivals) if t0 - 0.1 <= t <= t1 + 0.3]
                gap = max((b - a for a, b in pairwise(window)), default=float('nan'))
                move.wait(10.0)
                code = move.result['code'] if move.done() else 'STILL MOVING'
                out.append((edit, 1000 * (t1 - t0), 1000 * gap, code))
    finally:
        stop.set()
        for t in spinners:
            t.join(2.0)
        ex.shutdown(timeout_sec=2.0)
        sub_ex.shutdown(timeout_sec=2.0)
        listener.destroy_node()
        node.destroy_node()
        rclpy.shutdown(context=sub_ctx)
        rclpy.shutdown(context=ctx)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--quick', action='store_true')
    ap.add_argument('--no-node', action='store_true', help='skip the live sim_node part')
    args = ap.parse_args()
    rounds = 3 if args.quick else 10
    models = [('bench arm', bench_arm_path())]
    panda = model_path('panda')
    if panda:
        models.append(('panda', panda))
    else:
        print('panda skipped: its Menagerie wheel is not installed')
    for label, path in models:
        r = measure(path, rounds)
        print(f'{label}: spawn {r["spawn_ms"]:.1f} ms, carry state {r["carry_ms"]:.2f} ms, '
              f'delete {r["delete_ms"]:.1f} ms (median of {rounds})')
    if args.no_node:
        return
    rate = 100.0
    for edit, call_ms, gap_ms, code in live(2 if args.quick else 5, rate):
        print(f'sim_node bench arm, {edit} during a move: call {call_ms:.1f} ms, longest '
              f'joint_states gap {gap_ms:.1f} ms = {gap_ms * rate / 1000:.2f} publish periods '
              f'(goal: at most 3), move {code}')


if __name__ == '__main__':
    main()
