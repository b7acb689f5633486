"""Height-field sampling on known fields, checked against MuJoCo's own ray casts.

A planar ramp makes bilinear interpolation exact everywhere and a bumpy field makes it exact
at grid vertices, so both can be compared with ``mj_ray`` against the real hfield geom; the
bumpy field is asymmetric so a swapped row/column order would fail.
"""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.errors import InvalidArgument, UnknownName
from mujoco_hal_ros.pool import EnvPool

RAMP = ' '.join(['0 1 2 3 4'] * 3)
BUMPS = '0 3 1 2  5 0 4 1  2 2 0 6'

XML = f"""
<mujoco>
  <asset>
    <hfield name="ramp" nrow="3" ncol="5" size="2 1 0.5 0.1" elevation="{RAMP}"/>
    <hfield name="bumps" nrow="3" ncol="4" size="1.5 1 0.3 0.1" elevation="{BUMPS}"/>
    <hfield name="unused" nrow="2" ncol="2" size="1 1 1 0.1" elevation="0 0 0 0"/>
  </asset>
  <worldbody>
    <geom name="ramp_geom" type="hfield" hfield="ramp" pos="1 -0.5 0.2" euler="0 0 30"/>
    <geom name="bumps_geom" type="hfield" hfield="bumps" pos="10 0 -0.1"/>
    <body name="robot" pos="0 0 3">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
</mujoco>
"""

YAW = math.radians(30)


@pytest.fixture(scope='module')
def model():
    return mujoco.MjModel.from_xml_string(XML)


def ramp_height(x, y):
    """Analytic surface: 0.5 m rise over the 4 m local x extent, geom yawed 30 degrees."""
    dx, dy = x - 1.0, y + 0.5
    lx = math.cos(YAW) * dx + math.sin(YAW) * dy
    return 0.2 + 0.5 * (lx + 2.0) / 4.0


def ray_height(model, data, x, y):
    geomid = np.zeros(1, dtype=np.int32)
    robot = model.body('robot').id
    dist = mujoco.mj_ray(model, data, np.array([x, y, 5.0]), np.array([0, 0, -1.0]), None, 1,
                         robot, geomid)
    assert dist >= 0, f'ray at ({x}, {y}) missed'
    return 5.0 - dist


def pose_state(pool, pos, quat):
    state = pool.get_state([0])[0]
    state[1:4] = pos
    state[4:8] = quat
    return state


def quat_yaw_pitch(yaw, pitch):
    qy = np.array([math.cos(yaw / 2), 0, 0, math.sin(yaw / 2)])
    qp = np.array([math.cos(pitch / 2), 0, math.sin(pitch / 2), 0])
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, qy, qp)
    return out


def test_world_frame_on_a_ramp_matches_analytic_and_mj_ray(model):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    rng = np.random.default_rng(0)
    pts = np.column_stack([rng.uniform(0.0, 2.0, 20), rng.uniform(-1.0, 0.0, 20)])
    with EnvPool(model, 2) as pool:
        heights = pool.hfield_heights('ramp', pts)
    assert heights.shape == (2, 20)
    for k, (x, y) in enumerate(pts):
        assert heights[0, k] == pytest.approx(ramp_height(x, y), abs=1e-12)
        assert heights[1, k] == heights[0, k]
        assert heights[0, k] == pytest.approx(ray_height(model, data, x, y), abs=1e-9)


def test_grid_vertices_of_a_bumpy_field_match_data_and_mj_ray(model):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    hid = model.hfield('bumps').id
    nrow, ncol = model.hfield_nrow[hid], model.hfield_ncol[hid]
    sx, sy, sz, _ = model.hfield_size[hid]
    grid = model.hfield_data[model.hfield_adr[hid]:][:nrow * ncol].reshape(nrow, ncol)
    pts, expect = [], []
    for r in range(nrow):
        for c in range(ncol):
            pts.append([10 - sx + 2 * sx * c / (ncol - 1), -sy + 2 * sy * r / (nrow - 1)])
            expect.append(-0.1 + sz * grid[r, c])
    # a cell centre is the mean of its four corners
    pts.append([10 - sx + sx / (ncol - 1), -sy + sy / (nrow - 1)])
    expect.append(-0.1 + sz * grid[:2, :2].mean())
    with EnvPool(model, 1) as pool:
        heights = pool.hfield_heights(1, np.array(pts))[0]
    np.testing.assert_allclose(heights, expect, rtol=0, atol=1e-12)
    for k, (x, y) in enumerate(pts[:-1]):
        # nudge inside the field so the ray does not graze the outer edge
        x = min(max(x, 10 - sx + 1e-9), 10 + sx - 1e-9)
        y = min(max(y, -sy + 1e-9), sy - 1e-9)
        assert heights[k] == pytest.approx(ray_height(model, data, x, y), abs=1e-6)
    assert np.ptp(heights) > 0.2


def test_body_and_yaw_frames_follow_each_env_pose(model):
    yaw, pitch = math.radians(40), math.radians(20)
    offsets = np.array([[0.3, 0.1, 0.0], [-0.2, 0.25, 0.05], [0.0, 0.0, 0.0]])
    with EnvPool(model, 2) as pool:
        states = np.stack([pose_state(pool, [0.8, -0.4, 1.0], quat_yaw_pitch(yaw, pitch)),
                           pose_state(pool, [1.2, -0.6, 1.5], [1, 0, 0, 0])])
        pool.set_state(states)
        body = pool.hfield_heights('ramp', offsets, frame='body', body='robot')
        heading = pool.hfield_heights('ramp', offsets[:, :2], frame='yaw', body='robot')
        with_z = pool.hfield_heights('ramp', offsets, frame='yaw', body='robot')
    quat = quat_yaw_pitch(yaw, pitch)
    for k, off in enumerate(offsets):
        rotated = np.zeros(3)
        mujoco.mju_rotVecQuat(rotated, off, quat)
        world = np.array([0.8, -0.4, 1.0]) + rotated
        assert body[0, k] == pytest.approx(ramp_height(world[0], world[1]), abs=1e-12)
        wx = 0.8 + math.cos(yaw) * off[0] - math.sin(yaw) * off[1]
        wy = -0.4 + math.sin(yaw) * off[0] + math.cos(yaw) * off[1]
        assert heading[0, k] == pytest.approx(ramp_height(wx, wy), abs=1e-12)
        assert body[1, k] == pytest.approx(ramp_height(1.2 + off[0], -0.6 + off[1]), abs=1e-12)
        assert heading[1, k] == body[1, k]
    np.testing.assert_array_equal(with_z, heading)  # z offsets do not matter for heading
    assert abs(body[0, 0] - heading[0, 0]) > 1e-3  # pitch moves the body-frame point


def test_points_off_the_field_are_nan(model):
    with EnvPool(model, 1) as pool:
        heights = pool.hfield_heights('ramp', [[1.0, -0.5], [50.0, 0.0]])
    assert np.isfinite(heights[0, 0]) and np.isnan(heights[0, 1])


@pytest.mark.parametrize('call,kind', [
    (lambda p: p.hfield_heights('nope', [[0, 0]]), UnknownName),
    (lambda p: p.hfield_heights('unused', [[0, 0]]), InvalidArgument),
    (lambda p: p.hfield_heights('ramp', [[0, 0]], frame='map'), InvalidArgument),
    (lambda p: p.hfield_heights('ramp', [[0, 0]], frame='body'), InvalidArgument),
    (lambda p: p.hfield_heights('ramp', [[0, 0]], frame='yaw', body='ghost'), UnknownName),
    (lambda p: p.hfield_heights('ramp', [[0, 0, 0, 0]]), InvalidArgument),
    (lambda p: p.hfield_heights('ramp', [[0, np.nan]]), InvalidArgument),
    (lambda p: p.hfield_heights('ramp', [[True, 0.0]]), InvalidArgument),
    (lambda p: p.hfield_heights('ramp', [[0, 0]], env_ids=[3]), InvalidArgument),
])
def test_bad_hfield_queries_are_refused(model, call, kind):
    with EnvPool(model, 2) as pool:
        before = pool.get_state(full=True)
        with pytest.raises(kind):
            call(pool)
        np.testing.assert_array_equal(pool.get_state(full=True), before)


def test_tilted_field_is_refused():
    xml = XML.replace('euler="0 0 30"', 'euler="10 0 30"')
    with EnvPool(mujoco.MjModel.from_xml_string(xml), 1) as pool:
        with pytest.raises(InvalidArgument, match='tilted'):
            pool.hfield_heights('ramp', [[1.0, -0.5]])
