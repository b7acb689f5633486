#!/usr/bin/env python3
"""A pool evaluation over ROS: random control sequences sent to a running pool_node's
``evaluate`` action, scored there, the best one kept.

    ros2 run mujoco_hal_ros pool_node --ros-args -p nbatch:=64 -p keyframe:=rest
    python examples/pool_node_evaluate.py            # in another shell, sourced the same way

Arrays travel flat with their shape (``mujoco_hal_ros/FloatArray``); ``pool_info`` says the
pool's sizes. The cost ``qpos_distance`` is computed by the node at the final state.
"""

import sys

import numpy as np
import rclpy
from rclpy.action import ActionClient

from mujoco_hal_ros.action import Evaluate
from mujoco_hal_ros.msg import FloatArray
from mujoco_hal_ros.srv import PoolInfo

STEPS = 100


def main():
    rclpy.init()
    node = rclpy.create_node('pool_evaluate_example')
    try:
        info_client = node.create_client(PoolInfo, 'pool_info')
        if not info_client.wait_for_service(timeout_sec=30.0):
            sys.exit('no pool_info service: is pool_node running, on the same ROS_DOMAIN_ID?')
        future = info_client.call_async(PoolInfo.Request())
        rclpy.spin_until_future_complete(node, future, timeout_sec=30.0)
        info = future.result()
        n, nu, nq = info.nbatch, info.nu, info.nq
        ctrl = np.random.default_rng(0).uniform(-1.0, 1.0, (n, 1, nu)).repeat(STEPS, axis=1)
        target = np.zeros(nq)
        target[:4] = [0.5, 0.3, 0.6, 0.6]            # the bench arm's four joints (rad)
        weights = np.zeros(nq)
        weights[:4] = 1.0                             # only they count
        goal = Evaluate.Goal(ctrl=FloatArray(shape=list(ctrl.shape), data=ctrl.ravel().tolist()),
                             cost='qpos_distance', cost_weights=weights.tolist(),
                             cost_target=FloatArray(shape=[nq], data=target.tolist()))
        client = ActionClient(node, Evaluate, 'evaluate')
        if not client.wait_for_server(timeout_sec=30.0):
            sys.exit('no evaluate action server')
        sent = client.send_goal_async(goal)
        rclpy.spin_until_future_complete(node, sent, timeout_sec=30.0)
        done = sent.result().get_result_async()
        rclpy.spin_until_future_complete(node, done, timeout_sec=120.0)
        res = done.result().result
        if not res.success:
            sys.exit(f'evaluate: {res.code} {res.message}')
        costs = np.asarray(res.costs.data)
        best = int(np.argmin(costs))
        print(f'{len(costs)} rollouts of {res.steps_done} steps ({res.sim_time:.2f} s simulated); '
              f'best #{res.env_ids[best]}: cost {costs[best]:.4f} (median {np.median(costs):.4f})')
        return 0
    finally:
        node.destroy_node()
        rclpy.shutdown()


if __name__ == '__main__':
    sys.exit(main())
