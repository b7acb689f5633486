"""Image size from the MJCF camera ``resolution``, and intrinsics that match its pixels.

A camera given as a real sensor (``focal``, ``sensorsize``, ``resolution``: ALOHA's
1280x720 wrist cameras) renders with square pixels only at the size its numbers are for;
at the old 640x480 default the same camera came out with fx 317, fy 433. The zero-config
image channel now takes that size, and a small bright sphere pushed through K lands on the
pixels that show it.
"""

import mujoco  # noqa: E402 - after camera.py chose the GL backend
import numpy as np
import pytest

from mujoco_hal_ros.config.channels import camera_size
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.render.camera import CameraRenderer
from mujoco_hal_ros.sim.device import Device

GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')

SPHERE = (0.06, -0.04, 0.0)
SCENE = f"""
<mujoco model="resolution rig">
  <statistic extent="1" center="0 0 0"/>
  <visual><headlight ambient="0 0 0" diffuse="0 0 0" specular="0 0 0"/></visual>
  <worldbody>
    <camera name="sensor" pos="0 0 0.5" focal="0.004 0.004" sensorsize="0.0064 0.0036"
            principal="0.0003 -0.0002" resolution="320 180"/>
    <camera name="fovy" pos="0 0 0.5" fovy="50" resolution="400 160"/>
    <camera name="plain" pos="0 0 0.5" fovy="45"/>
    <body name="marker" pos="{SPHERE[0]} {SPHERE[1]} {SPHERE[2]}">
      <geom type="sphere" size="0.004" rgba="1 1 1 1" material="glow"/>
    </body>
  </worldbody>
  <asset><material name="glow" emission="1" rgba="1 1 1 1"/></asset>
</mujoco>
"""


@pytest.fixture(scope='module')
def model():
    return mujoco.MjModel.from_xml_string(SCENE)


def test_default_size_is_the_mjcf_resolution(model, tmp_path):
    ids = {n: mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, n)
           for n in ('sensor', 'fovy', 'plain')}
    assert camera_size(model, ids['sensor']) == (320, 180)
    assert camera_size(model, ids['fovy']) == (400, 160)
    assert camera_size(model, ids['plain']) == (640, 480)     # none given
    path = tmp_path / 'rig.xml'
    path.write_text(SCENE)
    dev = Device(None, model=str(path), start_paused=True)
    try:
        sizes = {i.camera: (i.width, i.height) for i in dev.layout.images}
    finally:
        dev.close()
    assert sizes == {'sensor': (320, 180), 'fovy': (400, 160), 'plain': (640, 480)}


def _project(renderer, data, point):
    fx, fy, cx, cy = renderer.intrinsics()
    pos, rot = renderer.optical_pose(data)
    p = rot.T @ (np.asarray(point, float) - pos)
    return fx * p[0] / p[2] + cx, fy * p[1] / p[2] + cy


@needs_gl
@pytest.mark.parametrize('camera', ['sensor', 'fovy'])
def test_sphere_projects_within_a_pixel_at_the_mjcf_size(model, camera):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    width, height = camera_size(model, cid)
    with CameraRenderer(model, camera, width, height) as renderer:
        fx, fy, _, _ = renderer.intrinsics()
        assert fx == pytest.approx(fy, rel=1e-6), 'square pixels at the MJCF size'
        rgb = renderer.render_rgb(data)
        u, v = _project(renderer, data, SPHERE)
    weight = rgb.astype(float).sum(axis=2)
    ys, xs = np.nonzero(weight > 0.5 * weight.max())
    assert len(xs) > 3, 'the marker is not in the picture'
    assert abs(u - xs.mean()) < 1.0 and abs(v - ys.mean()) < 1.0, (u, v, xs.mean(), ys.mean())
