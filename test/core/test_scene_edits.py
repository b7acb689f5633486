"""Live scene edits: the running device swapped onto a recompiled model (device.swap).

Deterministic: the bench arm paused at rtf 0, advanced with step(n), every pose read from
the snapshots the device publishes.
"""

import types

from conftest import model_file
import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.motion.move import action_for
from mujoco_hal_ros.world import snapshots as world_snapshots

HALF = 0.02
BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       f'<geom type="box" size="{HALF} {HALF} {HALF}" mass="0.1"/></body></worldbody></mujoco>')
TABLE_TOP = 0.0          # the bench scene's table top is the world's z = 0


def _body_z(dev, name):
    bid = mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_BODY, name)
    assert bid >= 0, name
    snap = dev.snapshot
    assert snap.generation == dev.generation
    return float(snap.xpos[bid][2])


def _site_at(dev, qpos, site):
    """Where ``site`` is at joint positions ``qpos`` (forward kinematics, own MjData)."""
    d = mujoco.MjData(dev.model)
    d.qpos[:] = qpos
    mujoco.mj_kinematics(dev.model, d)
    return d.site_xpos[mujoco.mj_name2id(dev.model, mujoco.mjtObj.mjOBJ_SITE, site)].copy()


def test_a_spawned_box_falls_and_rests_on_the_table_then_is_deleted(bench):
    nbody, gen = bench.model.nbody, bench.generation
    out = bench.scene.spawn(BOX, 'box1', position=[0.25, -0.15, 0.15])
    assert out['name'] == 'box1' and out['bodies'] == ['box1/box']
    assert bench.model.nbody == nbody + 1 and bench.generation == gen + 1
    assert 'box1' in bench.scene.names()
    assert _body_z(bench, 'box1/box') == pytest.approx(0.15, abs=1e-6)
    bench.step(1500)
    assert _body_z(bench, 'box1/box') == pytest.approx(TABLE_TOP + HALF, abs=2e-3)
    bench.scene.delete('box1')
    assert bench.model.nbody == nbody and bench.scene.names() == []
    assert mujoco.mj_name2id(bench.model, mujoco.mjtObj.mjOBJ_BODY, 'box1/box') == -1
    bench.step(10)


def test_a_move_started_before_a_spawn_ends_done_at_its_target(bench):
    act = action_for(bench.layout, None)
    target = np.array([0.18, 0.05, 0.06])
    move = bench.move_to(point=target, wait=False)
    bench.step(50)
    assert not move.done()
    assert bench.scene.spawn(BOX, 'box2', position=[-0.3, 0.3, 0.2])['code'] == errors.DONE
    for _ in range(200):
        if move.done():
            break
        bench.step(100)
    assert move.result['code'] == errors.DONE, move.result
    site = _site_at(bench, bench.snapshot.qpos, act.site)
    assert np.linalg.norm(site - target) <= bench.params['tolerance'] + 1e-9


def test_goals_and_names_follow_a_spawn(bench):
    goals = bench.goals()
    reads = sorted(bench.read())
    bench.scene.spawn(BOX, 'box3', position=[0.3, 0.3, 0.1], namespace='/props')
    assert 'props/box3' in bench.scene.names()
    assert bench.goals() == pytest.approx(goals)
    assert set(reads) <= set(bench.read())
    assert bench.describe()['model'] == bench.model_path


def test_cameras_draw_the_new_scene(bench):
    before = bench.cameras.render('overhead')
    old = bench.cameras.renderer('overhead')
    bench.scene.spawn(BOX, 'box5', position=[0.0, 0.0, 0.1])
    assert bench.cameras.render('overhead').shape == before.shape
    bench.scene.spawn(BOX, 'box6', position=[0.1, 0.0, 0.1])
    assert old.closed                       # two generations old: its GL context is freed
    assert not bench.cameras.renderer('overhead').closed
    with pytest.raises(errors.DeviceError) as err:
        bench.cameras.render_data(types.SimpleNamespace(generation=0))
    assert err.value.code == world_snapshots.STALE_SNAPSHOT


def test_a_snapshot_saved_before_a_spawn_is_stale(bench):
    bench.physics.save_state('before')
    bench.scene.spawn(BOX, 'box4', position=[0.3, 0.0, 0.1])
    with pytest.raises(errors.DeviceError) as err:
        bench.physics.load_state('before')
    assert err.value.code == world_snapshots.STALE_SNAPSHOT
    bench.physics.save_state('after')
    bench.physics.load_state('after')


def test_a_bad_edit_changes_nothing(bench):
    bench.physics.set_joint_state(['pan'], [0.3])
    bench.step(5)
    nbody, gen, qpos = bench.model.nbody, bench.generation, bench.snapshot.qpos.copy()
    model = bench.model
    for args in (('<mujoco><worldbody><body', 'x'), (BOX, 'bad name'),
                 (BOX, 'b', [0, 0, float('nan')]), ('/no/such/file.xml', 'b'),
                 ('<mujoco><worldbody><body name="q"><geom type="mesh" mesh="missing"/>'
                  '</body></worldbody></mujoco>', 'c')):
        with pytest.raises(errors.DeviceError):
            bench.scene.spawn(*args)
    for name in ('nope', 'hand', ''):        # unknown; carries the wrist actuator; empty
        with pytest.raises(errors.DeviceError):
            bench.scene.delete(name)
    with pytest.raises(errors.InvalidArgument):      # a spawn or delete keeps every actuator
        bench.swap.replace_model(mujoco.MjModel.from_xml_string(BOX))
    with pytest.raises(errors.InvalidArgument):
        bench.swap.replace_model('not a model')
    assert bench.model is model and bench.model.nbody == nbody
    assert bench.generation == gen
    np.testing.assert_array_equal(bench.snapshot.qpos, qpos)


def test_load_world_and_back(bench):
    names = list(bench.layout.actuators)
    bench.scene.load_world(model_file('torque_arm'))
    assert bench.layout.zero_config and bench.layout.actuators != names
    bench.step(20)
    assert bench.snapshot.qpos.shape == (bench.model.nq,)
    assert bench.cameras.render_data().qpos.shape == (bench.model.nq,)
    bench.scene.unload_world()
    assert list(bench.layout.actuators) == names and not bench.layout.zero_config
    bench.step(20)
    assert bench.move_to(point=[0.18, 0.05, 0.06], wait=False) is not None


def test_a_spawned_robot_brings_goals_that_go_with_it(open_device):
    from conftest import BENCH_XML
    dev = open_device(model=model_file('torque_arm'), start_paused=True)
    own = sorted(dev.layout.goals)
    dev.scene.spawn(BENCH_XML, 'bench', position=[0.6, 0.6, 0.0])
    assert 'bench/pan_goal' in dev.layout.goals and set(own) < set(dev.layout.goals)
    target = dev.goals()[own[0]] + 0.1
    dev.set_goals({'bench/pan_goal': dev.goals()['bench/pan_goal'] + 0.1, own[0]: target})
    dev.step(20)
    dev.scene.delete('bench')
    assert sorted(dev.layout.goals) == own and dev.scene.names() == []
    dev.step(500)
    assert dev.goals()[own[0]] == pytest.approx(target)
    assert dev.health()['errors'] == 0


def test_concurrent_spawns_all_land(bench):
    import threading
    nbody = bench.model.nbody
    errors_seen = []

    def spawn(i):
        try:
            bench.scene.spawn(BOX, f'c{i}', position=[0.05 * i, 0.3, 0.1])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors_seen.append(exc)
    threads = [threading.Thread(target=spawn, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60.0)
    assert not errors_seen
    assert bench.scene.names() == ['c0', 'c1', 'c2', 'c3']
    assert bench.model.nbody == nbody + 4
