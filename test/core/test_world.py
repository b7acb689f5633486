"""The world at run time on the bench arm: snapshots, teleport, physics options, live-state
queries, pixel-to-world and live randomization."""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.world import snapshots as world_snapshots


def _joint(bench, i=0):
    m = bench.model
    names = [n for j, n in enumerate(bench.layout.joints)
             if n and m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    return names[i]


def test_snapshot_restores_bit_identically(bench):
    bench.step(50)
    bench.physics.save_state('start')
    before = bench.snapshot
    bench.step(30)
    bench.step(20)
    first = bench.snapshot
    bench.physics.load_state('start')
    after = bench.snapshot
    assert np.array_equal(after.qpos, before.qpos)
    assert np.array_equal(after.qvel, before.qvel)
    assert after.time >= first.time          # time keeps going forward
    assert bench.physics.state_names() == ['start']


def test_snapshot_replay_is_deterministic(bench):
    bench.physics.save_state('a')
    bench.step(100)
    one = bench.snapshot.qpos.copy()
    bench.physics.load_state('a')
    bench.step(100)
    assert np.array_equal(bench.snapshot.qpos, one)


def test_stale_snapshot_is_refused(bench):
    bench.physics.save_state('a')
    bench.world.snapshots.scene_changed()
    with pytest.raises(errors.DeviceError) as exc:
        bench.physics.load_state('a')
    assert exc.value.code == world_snapshots.STALE_SNAPSHOT
    bench.physics.save_state('a')
    bench.physics.load_state('a')


def test_snapshot_names_are_checked(bench):
    for bad in ('', None, True, 3, 'x' * 1000):
        with pytest.raises(errors.InvalidArgument):
            bench.physics.save_state(bad)
    with pytest.raises(errors.UnknownName):
        bench.physics.load_state('never')
    with pytest.raises(errors.UnknownName):
        bench.physics.delete_state('never')


def test_teleport_sets_joints_and_holds(bench):
    j = _joint(bench)
    jid = bench.layout.joints.index(j)
    qadr = bench.model.jnt_qposadr[jid]
    r = bench.physics.set_joint_state([j], [0.3], [0.0])
    assert r['code'] == errors.DONE
    snap = bench.snapshot
    assert snap.qpos[qadr] == pytest.approx(0.3)
    bench.step(200)
    assert bench.snapshot.qpos[qadr] == pytest.approx(0.3, abs=2e-2)   # held there


def test_teleport_is_all_or_nothing(bench):
    j0, j1 = _joint(bench, 0), _joint(bench, 1)
    before = bench.snapshot.qpos.copy()
    bad = [([j0, j1], [0.1, float('nan')], None), ([j0, j1], [0.1, True], None),
           ([j0, j1], [0.1, np.bool_(True)], None), ([j0, 'nope'], [0.1, 0.1], None),
           ([j0, j0], [0.1, 0.1], None), ([j0], [0.1, 0.2], None),
           ([j0], [0.1], [0.0, 1.0]), ([j0], [1e6], None), ([], [], None)]
    for names, q, v in bad:
        with pytest.raises(errors.DeviceError):
            bench.physics.set_joint_state(names, q, v)
    assert np.array_equal(bench.snapshot.qpos, before)


def test_teleport_refuses_free_joints(bench):
    free = [n for j, n in enumerate(bench.layout.joints)
            if n and bench.model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if not free:
        pytest.skip('no named free joint')
    with pytest.raises(errors.InvalidArgument):
        bench.physics.set_joint_state(free[:1], [0.0])


def test_teleport_stops_a_running_move(bench):
    move = bench.move_to({'x': 170, 'y': 30, 'z': 60}, wait=False)
    bench.physics.set_joint_state([_joint(bench)], [0.0])
    assert move.done() and move.result['code'] == errors.STOPPED


def test_gravity_and_timestep(bench):
    assert bench.physics.set_gravity([0, 0, -1.62]) == [0.0, 0.0, -1.62]
    assert bench.physics.gravity == [0.0, 0.0, -1.62]
    bench.physics.set_timestep(0.001)
    assert bench.physics.timestep == 0.001
    for bad in ([0, 0], [0, 0, float('inf')], [True, 0, 0], 'abc'):
        with pytest.raises(errors.InvalidArgument):
            bench.physics.set_gravity(bad)
    for bad in (0, -1, 1.0, float('nan'), True, 'x'):
        with pytest.raises(errors.InvalidArgument):
            bench.physics.set_timestep(bad)
    assert bench.physics.timestep == 0.001


def test_mass_matrix_inverse_dynamics_jacobian(bench):
    m = bench.model
    bench.step(10)
    M = bench.physics.mass_matrix()
    assert M.shape == (m.nv, m.nv) and np.allclose(M, M.T)
    assert (np.linalg.eigvalsh(M) > 0).all()
    before = bench.snapshot.qpos.copy()
    tau = bench.physics.inverse_dynamics(np.zeros(m.nv))
    assert tau.shape == (m.nv,) and np.isfinite(tau).all()
    assert np.array_equal(bench.snapshot.qpos, before)     # nothing perturbed
    with pytest.raises(errors.InvalidArgument):
        bench.physics.inverse_dynamics([0.0] * (m.nv - 1))
    with pytest.raises(errors.InvalidArgument):
        bench.physics.inverse_dynamics([True] * m.nv)
    site = next(n for n in bench.layout.sites if n)
    jacp, jacr = bench.physics.jacobian(site)
    assert jacp.shape == (3, m.nv) and jacr.shape == (3, m.nv)
    jp, _ = bench.physics.jacobian('hand', kind='body')
    assert np.abs(jp).sum() > 0
    with pytest.raises(errors.UnknownName):
        bench.physics.jacobian('nope')
    with pytest.raises(errors.InvalidArgument):
        bench.physics.jacobian(site, kind='geom')


def test_pixel_to_world_of_table_centre(bench):
    r = bench.cameras.renderer('overhead', 320, 240, depth=True)
    fx, fy, cx, cy = r.intrinsics()
    # where the world point (0.12, 0, 0) on the table projects: the camera looks straight down
    with bench.cameras.render_state() as d:
        pos, rot = r.optical_pose(d)
    p = rot.T @ (np.array([0.12, 0.0, 0.0]) - pos)
    u, v = fx * p[0] / p[2] + cx, fy * p[1] / p[2] + cy
    pts = bench.physics.pixel_to_world('overhead', [(u, v)], 320, 240)
    assert np.linalg.norm(pts[0] - [0.12, 0.0, 0.0]) < 2e-3


def test_pixel_to_world_refuses_bad_pixels(bench):
    for bad in ([(-1, 0)], [(0, 1e9)], [(float('nan'), 0)], [(True, 0)], [], 'ab', [(1,)]):
        with pytest.raises(errors.InvalidArgument):
            bench.physics.pixel_to_world('overhead', bad, 64, 48)


def test_pixel_to_world_refuses_the_far_plane():
    from mujoco_hal_ros.world import pixels
    depth = np.full((4, 4), 10.0, np.float32)
    with pytest.raises(errors.InvalidArgument):
        pixels.to_world(depth, (2, 2, 1.5, 1.5), np.zeros(3), np.eye(3),
                        np.array([[1.0, 1.0]]), far=10.0)
    depth[1, 1] = np.nan
    with pytest.raises(errors.InvalidArgument):
        pixels.to_world(depth, (2, 2, 1.5, 1.5), np.zeros(3), np.eye(3),
                        np.array([[1.0, 1.0]]), far=100.0)


def test_randomization_is_seeded_and_undone_by_reset(bench):
    m = bench.model
    nominal = {k: np.array(getattr(m, k), copy=True)
               for k in ('body_mass', 'geom_friction', 'geom_rgba', 'dof_M0')}
    spec = {'body_mass': {'scale': [0.5, 1.5]}, 'geom_friction': {'scale': [0.8, 1.2]},
            'geom_rgba': {'scale': [0.5, 1.0]}, 'dof_damping': {'scale': [1.0, 2.0]}}
    a = bench.physics.randomize(spec, seed=7)
    mass_a = np.array(m.body_mass, copy=True)
    assert not np.array_equal(mass_a, nominal['body_mass'])
    assert not np.array_equal(m.dof_M0, nominal['dof_M0'])       # mj_setConst ran
    bench.reset()
    for k, v in nominal.items():
        assert np.array_equal(getattr(m, k), v), k
    b = bench.physics.randomize(spec, seed=7)
    assert a == b and np.array_equal(m.body_mass, mass_a)
    c = bench.physics.randomize(spec, seed=8)
    assert c != a
    bench.reset()
    assert np.array_equal(m.body_mass, nominal['body_mass'])


def test_randomization_is_all_or_nothing(bench):
    m = bench.model
    mass = np.array(m.body_mass, copy=True)
    for bad in ({}, {'nope': {'scale': [1, 2]}}, {'body_mass': {'scale': [2, 1]}},
                {'body_mass': {'scale': [1, 2]}, 'geom_friction': {'scale': [True, 1]}},
                {'body_mass': [1.0]}, {'body_mass': -np.ones(m.nbody)},
                {'body_mass': {'range': [1, 2]}}):
        with pytest.raises(errors.DeviceError):
            bench.physics.randomize(bad, seed=1)
    with pytest.raises(errors.InvalidArgument):
        bench.physics.randomize({'body_mass': {'scale': [1, 2]}}, seed=True)
    assert np.array_equal(m.body_mass, mass)


BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')


def test_spawn_compiles_a_new_model_and_carries_the_state(bench):
    from mujoco_hal_ros.world import scene
    s = scene.Scene(bench.model_path)
    bench.physics.set_joint_state(['pan'], [0.4])
    spec, model = s.spawn(BOX, 'box1', position=[0.2, -0.1, 0.1])
    assert model.nbody == bench.model.nbody + 1
    old = bench.cameras.render_data()
    data = mujoco.MjData(model)
    scene.carry_state(bench.model, old, model, data)
    pan = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, 'pan')
    assert data.qpos[model.jnt_qposadr[pan]] == pytest.approx(0.4)
    box = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, 'box1/box')
    for _ in range(1500):
        mujoco.mj_step(model, data)
    assert data.xpos[box][2] == pytest.approx(0.02, abs=3e-3)     # fell and rests on the table
    s.commit(spec)
    spec2, model2 = s.delete('box1/box')
    assert model2.nbody == bench.model.nbody


def test_scene_edits_that_break_the_model_change_nothing(bench):
    from mujoco_hal_ros.world import scene
    s = scene.Scene(bench.model_path)
    before = s.spec
    for args in (('<mujoco><worldbody><body', 'x'), (BOX, 'bad name'), (BOX, 'b', [0, 0]),
                 (BOX, 'b', [0, 0, float('nan')]), (BOX, 'b', [0, 0, 0], [0, 0, 0, 0]),
                 ('/no/such/file.xml', 'b')):
        with pytest.raises(errors.DeviceError):
            s.spawn(*args)
    spec, _ = s.spawn(BOX, 'b')
    s.commit(spec)
    with pytest.raises(errors.InvalidArgument):
        s.spawn(BOX, 'b')                 # the name is taken
    with pytest.raises(errors.UnknownName):
        s.delete('nope')
    with pytest.raises(errors.InvalidArgument):
        s.delete('hand')                  # carries the wrist actuator
    assert before is not s.spec


def test_object_positions_are_randomized_and_reset(bench):
    free = bench.model.jnt_qposadr[bench.layout.joints.index('block_free')]
    start = bench.snapshot.qpos[free:free + 3].copy()
    a = bench.physics.randomize({'object_positions': [0.05, 0.05, 0.0]}, seed=11)
    moved = bench.snapshot.qpos[free:free + 3].copy()
    assert 0 < np.abs(moved - start).max() <= 0.05 and moved[2] == start[2]
    bench.reset()
    assert np.array_equal(bench.snapshot.qpos[free:free + 3], start)
    assert bench.physics.randomize({'object_positions': [0.05, 0.05, 0.0]}, seed=11) == a
    with pytest.raises(errors.InvalidArgument):
        bench.physics.randomize({'object_positions': [-1, 0, 0]})


def test_a_new_timestep_keeps_holding_and_moving(bench):
    """``set_timestep`` goes through the door's ``Physics.set_timestep``: the drive laws
    are rebuilt for the new step and chunks keep their length, so a hold still holds and
    a move still arrives."""
    bench.step(200)
    held = bench.snapshot.qpos[:4].copy()
    bench.physics.set_timestep(0.001)
    t0 = bench.snapshot.time
    bench.step(1000)
    assert bench.snapshot.time == pytest.approx(t0 + 1.0)
    assert np.allclose(bench.snapshot.qpos[:4], held, atol=1e-3)
    move = bench.move_to({'x': 170, 'y': 0, 'z': 60}, wait=False)
    bench.step(4000)
    assert move.done() and move.result['code'] == errors.DONE, move.result
    health = bench.health()
    assert health['errors'] == 0 and health['unstable_events'] == 0
