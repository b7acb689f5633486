"""The fixture users import (``mujoco_hal_ros.testing``): a robot up and down, judged by FK
from joint_states and by ground truth, deterministic in simulated time, nothing left
behind."""

import threading

import mujoco
import numpy as np
import pytest

pytest.importorskip('rclpy')

from mujoco_hal_ros.menagerie import bench_arm_path  # noqa: E402
from mujoco_hal_ros.testing import free_domain_id, SimRobot  # noqa: E402

pytest_plugins = ['mujoco_hal_ros.testing.plugin']

JOINTS = ['pan', 'lift', 'elbow', 'wrist']
TARGET = [0.3, 0.2, 0.9, 0.9]
BOX = ('<mujoco><worldbody><body name="box"><freejoint/><geom type="box" '
       'size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')


def fk_hand(q):
    """The bench arm's hand where joint positions ``q`` put it, on a model of our own."""
    model = mujoco.MjModel.from_xml_path(bench_arm_path())
    data = mujoco.MjData(model)
    for name, value in zip(JOINTS, q, strict=True):
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_kinematics(model, data)
    return data.xpos[model.body('hand').id].copy()


def follow(robot):
    t0 = robot.time
    result = robot.follow_trajectory(JOINTS, [TARGET], [1.5])
    robot.step_to(t0 + 2.0)                   # a fixed instant, however long the result took
    robot.step(0.05)                          # joint_states of that instant published
    return result, [float(v) for v in robot.device.snapshot.qpos[:4]]


def test_trajectory_then_the_hand_by_fk_in_simulated_time(sim_robot):
    robot = sim_robot()
    t0 = robot.time
    result, _ = follow(robot)
    q = robot.joint_positions(JOINTS)
    assert result.error_code == 0
    assert np.allclose([q[j] for j in JOINTS], TARGET, atol=2e-3)
    assert np.allclose(robot.link_position('hand'), fk_hand(TARGET), atol=2e-3)
    assert robot.time - t0 == pytest.approx(2.0, abs=0.5)     # stepped, not slept


def test_same_test_same_result():
    """Repeated runs of one trajectory in deterministic mode: bit-identical states."""
    finals = []
    for _ in range(10):
        with SimRobot() as robot:
            _result, q = follow(robot)
            finals.append(q)
    assert all(f == finals[0] for f in finals), finals


def test_spawned_object_falls(sim_robot):
    robot = sim_robot()
    robot.device.scene.spawn(BOX, 'box', position=(0.3, 0.3, 0.5))
    robot.run_until(lambda: robot.body_position('box/box')[2] < 0.05, 3.0,
                    what='the box landing')
    robot.step(0.5)
    assert robot.body_position('box/box')[2] == pytest.approx(0.02, abs=0.005)


def test_a_condition_that_never_holds_names_what(sim_robot):
    robot = sim_robot()
    with pytest.raises(AssertionError, match='the impossible'):
        robot.run_until(lambda: False, 0.2, what='the impossible')


def graph_names(domain, seconds=3.0, until=None):
    """Node names a separate participant on ``domain`` sees (an independent reader), once
    ``until(names)`` holds or after ``seconds``."""
    import time

    import rclpy
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[], domain_id=domain)
    probe = rclpy.create_node('graph_probe', context=ctx)
    names = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        names = set(probe.get_node_names()) - {'graph_probe'}
        if until is not None and until(names):
            break
        time.sleep(0.1)
    probe.destroy_node()
    rclpy.shutdown(context=ctx)
    return names


@pytest.mark.parametrize('process', [False, True])
def test_nothing_left_behind_even_when_the_test_raises(process):
    before = {t.name for t in threading.enumerate()}
    domain = free_domain_id()
    with pytest.raises(RuntimeError, match='the test failed'):
        with SimRobot(model=bench_arm_path(), domain_id=domain, process=process) as robot:
            assert 'sim_node' in graph_names(domain, 15.0, lambda n: 'sim_node' in n)
            raise RuntimeError('the test failed')
    robot.close()                                  # twice is fine
    assert not robot.context.ok()
    assert robot.proc is None or robot.proc.poll() is not None
    left = {t.name for t in threading.enumerate() if t.is_alive()} - before
    assert not [t for t in left if t.startswith('sim_robot') or t.startswith('sim_node')], left
    assert graph_names(domain, seconds=1.0) == set(), 'a participant is left on the domain'


def test_as_a_real_process():
    with SimRobot(model=bench_arm_path(), process=True) as robot:
        assert robot.proc.poll() is None
        q = robot.joint_positions(JOINTS)
        assert set(q) == set(JOINTS)
        pid = robot.proc.pid
    assert robot.proc.poll() is not None, f'sim_node {pid} still running'
