"""Two robots in one world, each a device of its own (``sim.robots``).

The built-in bench arm is the world; a Menagerie Panda is spawned beside it under
``right/`` and made a robot. Every claim is checked from the published snapshots with a
separate MjData (forward kinematics, contacts), not from what the device says it did.
"""

import time

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors, menagerie
from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.sim.device import Device

PANDA_AT = (0.5, 0.0, 0.0)


def _panda():
    try:
        return menagerie.model_path('panda')
    except Exception as exc:  # noqa: BLE001 - the test extra is not installed
        pytest.skip(f'no Menagerie Panda: {exc}')


@pytest.fixture
def world():
    with Device(real_time_factor=0) as dev:
        dev.scene.spawn(_panda(), 'panda', position=PANDA_AT, namespace='right')
        view = dev.robots.add('right', 'right/panda/')
        yield dev, view


def _fk(dev, qpos, body):
    """Where ``body`` is for these joint positions: a fresh MjData, not the device's."""
    data = mujoco.MjData(dev.model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(dev.model, data)
    return data.xpos[mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_BODY, body)].copy()


def _bench_q(dev):
    return dev.snapshot.qpos[[int(dev.model.jnt_qposadr[dev.model.joint(j).id])
                              for j in ('pan', 'lift', 'elbow', 'wrist')]]


def test_a_robot_names_only_its_own_joints_channels_and_tool(world):
    """A robot speaks its own names, as Panda's own driver would (``joint1``, not the world
    model's ``right/panda/joint1``); the rest of the world is not its to name."""
    dev, view = world
    panda = mujoco.MjModel.from_xml_path(_panda())        # the model alone, read here
    own = [panda.joint(j).name for j in range(panda.njnt)
           if int(panda.jnt_type[j]) in (2, 3)]            # its slides and hinges
    assert view.joint_names == own
    assert 'pan' not in view.joint_names
    assert sorted(view.layout.goals) == sorted(f'{panda.actuator(a).name}_goal'
                                               for a in range(panda.nu))
    assert not any(n.startswith('right/') for n in dev.layout.goals)   # the file's device
    assert view.tool() == 'hand'                      # the hand, not a finger
    assert view.world_name('joint1') == 'right/panda/joint1'
    q = dev.snapshot.qpos[dev.model.jnt_qposadr[dev.model.joint('right/panda/joint4').id]]
    assert view.read(['joint4'])['joint4'] == pytest.approx(q)
    desc = view.describe()
    assert desc['namespace'] == 'right' and desc['joints'] == view.joint_names
    assert dev.robots.names() == ['right'] and dev.robots.claimed('right/panda/joint1')
    assert not dev.robots.claimed('pan')


def test_one_robot_moves_while_the_other_holds_still(world):
    dev, view = world
    before = _bench_q(dev)
    target = np.array([0.45, 0.25, 0.45])
    result = view.move_to(point=target, wait=True, timeout=30)
    assert result['code'] == errors.DONE, result
    reached = _fk(dev, dev.snapshot.qpos, 'right/panda/hand')
    assert np.linalg.norm(reached - target) <= dev.params['tolerance'] + 1e-9
    assert np.abs(_bench_q(dev) - before).max() < 1e-3     # the bench arm did not move


def test_two_moves_run_side_by_side_and_each_arrives(world):
    dev, view = world
    tip_target = np.array([0.18, -0.05, 0.08])
    bench = dev.move_to(point=tip_target, wait=False)
    panda = view.move_to(point=(0.45, -0.25, 0.4), wait=False)
    assert bench.wait(30) and panda.wait(30)
    assert bench.result['code'] == errors.DONE, bench.result
    assert panda.result['code'] == errors.DONE, panda.result    # not PREEMPTED by the other
    data = mujoco.MjData(dev.model)
    data.qpos[:] = dev.snapshot.qpos
    mujoco.mj_kinematics(dev.model, data)
    tip = data.site_xpos[mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_SITE, 'tip')]
    assert np.linalg.norm(tip - tip_target) <= dev.params['tolerance'] + 1e-9


def test_a_new_move_preempts_only_its_own_robots(world):
    dev, view = world
    dev.pause()                     # paused: no move can end before the next one starts
    bench = dev.move_to(point=(0.18, 0.05, 0.08), wait=False)
    first = view.move_to(point=(0.45, 0.25, 0.45), wait=False)
    second = view.move_to(point=(0.45, -0.25, 0.45), wait=False)
    dev.pause(False)
    assert first.wait(5) and first.result['code'] == errors.PREEMPTED
    assert second.wait(30) and bench.wait(30)
    assert second.result['code'] == errors.DONE and bench.result['code'] == errors.DONE


def test_hold_on_one_robot_leaves_the_other_moving(world):
    dev, view = world
    dev.pause()                     # paused: neither move can end before the hold
    bench = dev.move_to(point=(0.18, -0.05, 0.08), wait=False)
    panda = view.move_to(point=(0.45, 0.25, 0.45), wait=False)
    view.hold()
    assert panda.done() and panda.result['code'] == errors.STOPPED
    assert not bench.done()
    dev.pause(False)
    assert bench.wait(30) and bench.result['code'] == errors.DONE
    held = dev.snapshot.qpos.copy()
    time.sleep(0.2)
    panda_q = [int(dev.model.jnt_qposadr[dev.model.joint(view.world_name(j)).id])
               for j in view.joint_names[:7]]
    assert np.abs(dev.snapshot.qpos[panda_q] - held[panda_q]).max() < 2e-3
    # the world-wide hold holds every robot
    dev.pause()
    bench = dev.move_to(point=(0.18, 0.05, 0.08), wait=False)
    panda = view.move_to(point=(0.45, -0.25, 0.45), wait=False)
    dev.hold()
    assert bench.result['code'] == errors.STOPPED and panda.result['code'] == errors.STOPPED


def test_requests_for_the_other_robot_are_refused_and_change_nothing(world):
    dev, view = world
    goals = dev.goals()
    with pytest.raises(DeviceError) as err:
        view.set_goals({'pan_goal': 10.0})
    assert err.value.code == errors.UNKNOWN_NAME
    with pytest.raises(DeviceError) as err:
        view.move_to(point=(0.18, 0.0, 0.08), site='tip')
    assert err.value.code == errors.UNKNOWN_NAME
    for bad in (float('nan'), float('inf'), 1e308, True):
        with pytest.raises(DeviceError):
            view.set_goals({'actuator1_goal': bad})
    assert dev.goals() == goals and view.move is None
    with pytest.raises(DeviceError) as err:      # the world model's name is not the robot's
        view.set_goals({'right/panda/actuator1_goal': 0.3})
    assert err.value.code == errors.UNKNOWN_NAME
    assert view.set_goals({'actuator1_goal': 0.3})['code'] == errors.STARTED
    assert view.goals()['actuator1_goal'] == pytest.approx(0.3)
    with pytest.raises(DeviceError):
        view.pause()
    with pytest.raises(DeviceError) as err:
        dev.robots.add('right', 'right/panda/')
    assert err.value.code == errors.INVALID_ARGUMENT
    with pytest.raises(DeviceError):
        dev.robots.add('nobody')
    assert dev.robots.names() == ['right']


def test_the_robots_touch_each_other(world):
    """Contact between the two is simulated: the Panda's hand sent through the bench
    arm's upper arm meets it (contacts from the snapshots, on a separate MjData)."""
    dev, view = world
    move = view.move_to(point=(0.0, 0.0, 0.15), wait=False)
    mine = {b for b in range(dev.model.nbody)
            if dev.model.body(b).name.startswith('right/')}
    touching = 0
    deadline = time.monotonic() + 30
    while not move.done() and time.monotonic() < deadline:
        data = mujoco.MjData(dev.model)
        data.qpos[:] = dev.snapshot.qpos
        mujoco.mj_forward(dev.model, data)
        for c in data.contact[:data.ncon]:
            bodies = {int(dev.model.geom_bodyid[c.geom1]), int(dev.model.geom_bodyid[c.geom2])}
            if len(bodies & mine) == 1 and 0 not in bodies:
                touching += 1
        time.sleep(0.01)
    assert touching > 0


def test_deleting_the_entity_removes_its_robot(world):
    dev, view = world
    dev.pause()                             # the move is still running when it goes
    move = view.move_to(point=(0.45, 0.25, 0.45), wait=False)
    dev.scene.delete('right/panda')
    dev.pause(False)
    assert move.done() and move.result['code'] == errors.PREEMPTED
    assert dev.robots.names() == [] and ('right', 'its actuators left the world') in \
        list(dev.robots.removed)
    assert not any(j.startswith('right/') for j in dev.layout.joints)
    assert dev.move_to(point=(0.18, 0.0, 0.08))['code'] == errors.DONE


@pytest.mark.parametrize('data, words', [
    ({'robots': []}, 'expected a list of robots'),
    ({'robot': []}, "unknown key 'robot'"),
    ([{'namespace': 'left'}], 'give urdf (a .urdf file) or model'),
    ([{'namespace': '2left', 'model': 'x.xml'}], 'is not a robot namespace'),
    ([{'namespace': 'left', 'model': '/no/such.xml'}], 'file not found'),
    ([{'namespace': 'left', 'model': __file__, 'position': [0, 0, float('nan')]}],
     'position'),
    ([{'namespace': 'left', 'model': __file__, 'position': [True, 0, 0]}], 'position'),
    ([{'namespace': 'left', 'model': __file__, 'quaternion': [2, 0, 0, 0]}],
     'not a unit quaternion'),
    ([{'namespace': 'left', 'model': __file__}, {'namespace': 'left', 'model': __file__}],
     'given twice'),
    ([{'namespace': 'left', 'model': __file__, 'pose': [0, 0, 0]}], "unknown key 'pose'"),
    ([{'namespace': f'r{i}', 'model': __file__} for i in range(33)], 'at most 32'),
])
def test_a_bad_robots_file_is_refused_key_by_key(data, words):
    from mujoco_hal_ros.errors import ConfigError
    from mujoco_hal_ros.world import robots_file
    with pytest.raises(ConfigError) as err:
        robots_file.parse(data)
    assert words in str(err.value)


def test_spawning_a_model_with_keyframes_into_a_world_without_says_nothing(
        capfd, recwarn, monkeypatch):
    """A world without keyframes keeps none of the entity's; MuJoCo printed an 'Attach
    conflict' warning into the user's console for each URDF robot (the imported model says
    ``<size nkey="1">``). The robot still starts at its model's home keyframe (the robots
    file puts it there)."""
    from mujoco_hal_ros.conformance import urdf_zoo
    from mujoco_hal_ros.world import robots_file
    urdfs = [p for p in urdf_zoo.urdf_paths() if p.endswith('/ur5_robot.urdf')]
    if not urdfs:
        pytest.skip(urdf_zoo.SHARE_MISSING)
    monkeypatch.setenv('ROS_PACKAGE_PATH', urdf_zoo.share_dir())      # its package:// meshes
    entries = robots_file.parse([{'namespace': 'arm', 'urdf': urdfs[0]}])
    path = robots_file.resource(entries[0])
    with Device(model=menagerie.empty_world_path(), real_time_factor=0,
                start_paused=True) as dev:
        robots_file.add_to(dev, entries)
        home = robots_file.home_pose(path)
        q = dev.snapshot.qpos
        for joint, value in home.items():
            assert q[dev.model.jnt_qposadr[dev.model.joint(f'arm/{joint}').id]] == \
                pytest.approx(value, abs=1e-9)
    assert not [w for w in recwarn if 'Attach conflict' in str(w.message)]
    assert 'Attach conflict' not in capfd.readouterr().err


def _expected_home(path):
    """Where a model alone starts, read from its file here (not through the package): its
    ``home`` keyframe, else its first, else qpos0 clamped into each limited joint's range;
    {joint name: position} of its hinges and slides."""
    m = mujoco.MjModel.from_xml_path(path)
    names = [m.key(k).name for k in range(m.nkey)]
    key = names.index('home') if 'home' in names else (0 if m.nkey else None)
    qpos = m.key_qpos[key] if key is not None else m.qpos0
    out = {}
    for j in range(m.njnt):
        if int(m.jnt_type[j]) not in (int(mujoco.mjtJoint.mjJNT_HINGE),
                                      int(mujoco.mjtJoint.mjJNT_SLIDE)) or not m.joint(j).name:
            continue
        q = float(qpos[m.jnt_qposadr[j]])
        if m.jnt_limited[j]:
            q = min(max(q, m.jnt_range[j, 0]), m.jnt_range[j, 1])
        out[m.joint(j).name] = q
    return out


def _zoo_arms():
    from mujoco_hal_ros.conformance import zoo
    return [z for z in zoo.models(include_variants=False) if z.kind == 'arm']


@pytest.mark.parametrize('zm', _zoo_arms(), ids=lambda z: z.name)
def test_a_spawned_zoo_arm_starts_at_home_with_its_servos_there(zm):
    """A robot spawned under an entity namespace starts where the model alone starts (its
    home keyframe, else qpos0 clamped into its ranges): every joint inside its range, and
    after half a second of physics its servo-driven joints are still there (their
    setpoints are home, not qpos0). Panda's joint4 range excludes 0: at qpos0 it started
    outside it and a later move ended 0.07 rad short."""
    if zm.path is None:
        pytest.skip(zm.missing)
    expected = _expected_home(zm.path)
    with Device(model=menagerie.empty_world_path(), real_time_factor=0,
                start_paused=True) as dev:
        dev.scene.spawn(zm.path, 'arm', position=(0.0, 0.0, 0.0), namespace='second')
        m = dev.model
        q0 = dev.snapshot.qpos.copy()
        for name, value in expected.items():
            j = m.joint(f'second/arm/{name}').id
            q = q0[m.jnt_qposadr[j]]
            assert q == pytest.approx(value, abs=1e-9), name
            if m.jnt_limited[j]:
                assert m.jnt_range[j, 0] - 1e-9 <= q <= m.jnt_range[j, 1] + 1e-9, name
        # the servos hold home: each position servo's setpoint is its joint's home, and on
        # a fixed base (no free joint above) the joints stay there (measured)
        servos = [(a, int(m.actuator_trnid[a, 0])) for a in range(m.nu)
                  if m.actuator(a).name.startswith('second/arm/')
                  and m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                  and m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
                  and m.actuator_gainprm[a, 0] > 0
                  and np.isclose(m.actuator_biasprm[a, 1], -m.actuator_gainprm[a, 0])]
        dev.step(int(round(0.5 / m.opt.timestep)))
        snap = dev.snapshot
        for a, j in servos:
            home = expected[m.joint(j).name[len('second/arm/'):]]
            if m.actuator_ctrllimited[a]:
                home = min(max(home, m.actuator_ctrlrange[a, 0]), m.actuator_ctrlrange[a, 1])
            assert snap.setpoint[a] == pytest.approx(home, abs=1e-9), m.actuator(a).name
            if not _under_free_joint(m, int(m.jnt_bodyid[j])):
                drift = abs(snap.qpos[m.jnt_qposadr[j]] - q0[m.jnt_qposadr[j]])
                assert drift < 0.05, (m.joint(j).name, drift)
        # a reset puts it back at home too, not at the world's qpos0 for its joints
        dev.reset()
        q = dev.snapshot.qpos
        for name, value in expected.items():
            assert q[m.jnt_qposadr[m.joint(f'second/arm/{name}').id]] == \
                pytest.approx(value, abs=1e-9), name


def _under_free_joint(m, body):
    while body > 0:
        adr, n = m.body_jntadr[body], m.body_jntnum[body]
        if any(int(m.jnt_type[k]) == int(mujoco.mjtJoint.mjJNT_FREE)
               for k in range(adr, adr + n)):
            return True
        body = int(m.body_parentid[body])
    return False
