"""CameraRenderer against real frames of the bench arm, rendered headless.

Geometry is checked against the picture itself: a world point pushed through K and the
camera pose must land on the pixels that show it, so a wrong sign, a half-pixel offset or a
swapped axis in the intrinsics fails here rather than in a downstream detector.
"""

import math
import os
import subprocess
import sys
import threading

import cv2  # noqa: E402 - after camera.py chose the GL backend
import mujoco  # noqa: E402
import numpy as np
import pytest

from mujoco_hal_ros.errors import ClosedError, DeviceError, InvalidArgument, UnknownName
from mujoco_hal_ros.menagerie import bench_arm_path
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.render.camera import (
    camera_names,
    CameraRenderer,
    encode_png,
    list_cameras,
    MAX_SIZE,
    OPTICAL_FROM_MUJOCO,
)

W, H = 640, 480
CAMERA_HEIGHT = 0.55    # overhead camera z above the table plane (z = 0)
BLOCK_HALF = 0.015

GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')


@pytest.fixture(scope='module')
def model():
    return mujoco.MjModel.from_xml_path(bench_arm_path())


@pytest.fixture
def data(model):
    d = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, d, 0)
    mujoco.mj_forward(model, d)
    return d


@pytest.fixture(scope='module')
def cam(model):
    if GL_PROBLEM is not None:
        pytest.skip(f'no headless GL: {GL_PROBLEM}')
    with CameraRenderer(model, 'overhead', W, H, depth=True) as renderer:
        yield renderer


def project(renderer, data, point):
    """World point -> (u, v) pixel through the renderer's K and optical pose."""
    fx, fy, cx, cy = renderer.intrinsics()
    pos, rot = renderer.optical_pose(data)
    p = rot.T @ (np.asarray(point, float) - pos)
    assert p[2] > 0, 'point behind the camera'
    return fx * p[0] / p[2] + cx, fy * p[1] / p[2] + cy


def green_mask(rgb):
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    return (g > r + 40) & (g > b + 40)


def orange_mask(rgb):
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    return (r > b + 80) & (r > g + 20)


def block_top_center(model, data):
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, 'block')
    return data.xpos[bid] + [0.0, 0.0, BLOCK_HALF], data.xpos[bid].copy()


# -- images ---------------------------------------------------------------------------------

@needs_gl
def test_rgb_shape_dtype_and_content(cam, data):
    rgb = cam.render_rgb(data)
    assert rgb.shape == (H, W, 3) and rgb.dtype == np.uint8
    assert rgb.std() > 10, 'blank frame'
    assert green_mask(rgb).sum() > 200, 'the green block is not visible'
    assert orange_mask(rgb).sum() > 200, 'the arm is not visible'


@needs_gl
def test_arm_moves_in_image(cam, model, data):
    before = cam.render_rgb(data)
    data.qpos[model.joint('pan').qposadr[0]] = 1.2
    mujoco.mj_forward(model, data)
    after = cam.render_rgb(data)
    changed = np.any(before != after, axis=2)
    assert changed.sum() > 500
    ys0, xs0 = np.nonzero(orange_mask(before))
    ys1, xs1 = np.nonzero(orange_mask(after))
    shift = math.hypot(xs1.mean() - xs0.mean(), ys1.mean() - ys0.mean())
    assert shift > 20, f'arm centroid moved only {shift:.1f} px'
    # The block did not move, so its pixels did not change.
    assert not changed[green_mask(before) & green_mask(after)].any()


@needs_gl
def test_depth_in_metres_matches_geometry(cam, model, data):
    depth = cam.render_depth(data)
    assert depth.shape == (H, W) and depth.dtype == np.float32
    # A table point far from the arm (at the origin) and the block (at +x, +y).
    u, v = project(cam, data, [0.30, -0.12, 0.0])
    assert depth[round(v), round(u)] == pytest.approx(CAMERA_HEIGHT, abs=2e-3)
    assert depth[3, 3] == pytest.approx(CAMERA_HEIGHT, abs=2e-3)  # camera looks straight down
    top, _ = block_top_center(model, data)
    u, v = project(cam, data, top)
    assert depth[round(v), round(u)] == pytest.approx(CAMERA_HEIGHT - top[2], abs=2e-3)


@needs_gl
def test_rgbd_pair_is_one_frame(cam, data):
    rgb, depth = cam.render_rgbd(data)
    assert np.array_equal(rgb, cam.render_rgb(data))
    assert np.allclose(depth, cam.render_depth(data))


@needs_gl
def test_png_is_lossless(cam, data):
    rgb = cam.render_rgb(data)
    png = cam.render_png(data)
    assert png[:8] == b'\x89PNG\r\n\x1a\n'
    decoded = cv2.cvtColor(cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR),
                           cv2.COLOR_BGR2RGB)
    assert np.array_equal(decoded, rgb)
    assert len(png) < rgb.nbytes / 4, 'PNG barely compressed'
    assert encode_png(rgb) == png


# -- geometry -------------------------------------------------------------------------------

@needs_gl
def test_intrinsics_from_fovy(cam, model):
    fovy = math.radians(model.cam_fovy[0])
    fx, fy, cx, cy = cam.intrinsics()
    assert fx == pytest.approx((H / 2) / math.tan(fovy / 2), rel=1e-6)
    assert fy == pytest.approx(fx, rel=1e-9)
    # ROS/OpenCV pixel centres are integers, so the centred axis falls between pixels.
    assert (cx, cy) == pytest.approx(((W - 1) / 2, (H - 1) / 2), abs=1e-6)
    info = cam.camera_info_fields()
    assert info['width'] == W and info['height'] == H
    assert info['distortion_model'] == 'plumb_bob' and info['d'] == [0.0] * 5
    assert info['k'] == pytest.approx([fx, 0, cx, 0, fy, cy, 0, 0, 1])
    assert info['r'] == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    assert info['p'] == pytest.approx([fx, 0, cx, 0, 0, fy, cy, 0, 0, 0, 1, 0])


@needs_gl
def test_block_projects_onto_its_pixels(cam, model, data):
    rgb = cam.render_rgb(data)
    mask = green_mask(rgb)
    ys, xs = np.nonzero(mask)
    top, center = block_top_center(model, data)
    u, v = project(cam, data, center)
    assert mask[round(v), round(u)], 'block centre projects off the block'
    # The camera sees the top face: its centre is the centroid of the green pixels.
    u, v = project(cam, data, top)
    assert abs(u - xs.mean()) < 1.0 and abs(v - ys.mean()) < 1.0, (u, v, xs.mean(), ys.mean())


def test_optical_frame_rotation():
    rot = CameraRenderer.optical_frame_rotation()
    assert np.array_equal(rot, np.diag([1.0, -1.0, -1.0]))
    assert np.array_equal(rot @ rot, np.eye(3)) and np.linalg.det(rot) == 1.0
    forward_mj = np.array([0.0, 0.0, -1.0])        # MuJoCo cameras look along -z
    assert np.array_equal(rot @ forward_mj, [0, 0, 1])
    assert np.array_equal(rot @ np.array([0.0, 1.0, 0.0]), [0, -1, 0])   # up -> y down
    assert OPTICAL_FROM_MUJOCO is not rot


@needs_gl
def test_optical_pose_looks_down(cam, data):
    pos, rot = cam.optical_pose(data)
    assert pos == pytest.approx([0.12, 0.0, CAMERA_HEIGHT])
    assert rot[:, 2] == pytest.approx([0, 0, -1])      # optical z: into the table
    assert np.linalg.det(rot) == pytest.approx(1.0)


@needs_gl
@pytest.mark.parametrize('size', [(320, 480), (640, 240)])
def test_sensor_camera_with_other_aspect(size):
    """Sensor cameras keep the sensor's horizontal extent: non-square pixels, shifted axis."""
    spec = mujoco.MjSpec.from_file(bench_arm_path())
    c = spec.worldbody.add_camera(name='sensor', pos=[0.12, 0, 0.55], xyaxes=[0, -1, 0, 1, 0, 0])
    c.sensor_size = [0.0064, 0.0048]
    c.focal_length = [0.004, 0.004]
    c.principal_length = [0.0006, 0.0004]
    m = spec.compile()
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, 0)
    mujoco.mj_forward(m, d)
    width, height = size
    with CameraRenderer(m, 'sensor', width, height) as renderer:
        fx, fy, cx, cy = renderer.intrinsics()
        assert fx == pytest.approx(width * 0.004 / 0.0064, rel=1e-4)
        assert fy == pytest.approx(height * 0.004 / 0.0048, rel=1e-4)
        rgb = renderer.render_rgb(d)
        ys, xs = np.nonzero(green_mask(rgb))
        u, v = project(renderer, d, block_top_center(m, d)[0])
        assert abs(u - xs.mean()) < 1.0 and abs(v - ys.mean()) < 1.0


# -- validation -----------------------------------------------------------------------------

@pytest.mark.parametrize('bad', [0, -1, 4096, MAX_SIZE + 1, 1.5, True, np.bool_(True), '640',
                                 None, float('nan'), float('inf')])
@pytest.mark.parametrize('side', ['width', 'height'])
def test_bad_sizes_refused(model, side, bad):
    kwargs = {'width': W, 'height': H, side: bad}
    with pytest.raises(InvalidArgument) as err:
        CameraRenderer(model, 'overhead', **kwargs)
    assert err.value.where == side


def test_too_large_message_names_limits(model):
    with pytest.raises(InvalidArgument) as err:
        CameraRenderer(model, 'overhead', 4096, H)
    assert str(MAX_SIZE) in str(err.value) and '1280x960' in str(err.value)


@pytest.mark.parametrize('name', ['nope', '', 0, None])
def test_unknown_camera_refused(model, name):
    with pytest.raises(UnknownName) as err:
        CameraRenderer(model, name)
    assert 'overhead' in str(err.value)


def test_camera_listing(model):
    assert camera_names(model) == ['overhead']
    (desc,) = list_cameras(model)
    assert desc.name == 'overhead' and desc.body == 'world' and desc.fovy == 45.0
    assert not desc.orthographic and not desc.uses_intrinsics


def test_not_a_model_refused():
    with pytest.raises(InvalidArgument):
        CameraRenderer('bench_arm.xml', 'overhead')


@needs_gl
def test_whole_float_size_and_larger_than_buffer(model, data):
    """1600x1200 exceeds the model's 1280x960 buffer: served from a private copy."""
    with CameraRenderer(model, 'overhead', 1600.0, 1200) as big:
        assert big.render_rgb(data).shape == (1200, 1600, 3)
        assert big.intrinsics()[2] == pytest.approx(799.5)
    assert (model.vis.global_.offwidth, model.vis.global_.offheight) == (1280, 960)


@needs_gl
def test_fast_mode_leaves_callers_model_alone():
    spec = mujoco.MjSpec.from_file(bench_arm_path())
    spec.visual.quality.offsamples = 4
    m = spec.compile()
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    with CameraRenderer(m, 'overhead', 160, 120, fast=True) as fast, \
            CameraRenderer(m, 'overhead', 160, 120, fast=False) as nice:
        assert fast.render_rgb(d).shape == nice.render_rgb(d).shape == (120, 160, 3)
    assert m.vis.quality.offsamples == 4


@needs_gl
def test_depth_needs_depth_camera(model, data):
    with CameraRenderer(model, 'overhead', 64, 48) as rgb_only:
        with pytest.raises(InvalidArgument):
            rgb_only.render_depth(data)
        with pytest.raises(InvalidArgument):
            rgb_only.render_rgbd(data)


@needs_gl
def test_data_of_another_model_refused(cam):
    other = mujoco.MjModel.from_xml_string('<mujoco><worldbody/></mujoco>')
    with pytest.raises(InvalidArgument):
        cam.render_rgb(mujoco.MjData(other))
    with pytest.raises(InvalidArgument):
        cam.render_rgb(None)


@needs_gl
def test_calls_after_close_refused(model, data):
    renderer = CameraRenderer(model, 'overhead', 64, 48, depth=True)
    renderer.render_rgb(data)
    renderer.close()
    renderer.close()                      # idempotent
    assert renderer.closed
    for call in (renderer.render_rgb, renderer.render_depth, renderer.render_png,
                 renderer.render_rgbd):
        with pytest.raises(ClosedError) as err:
            call(data)
        assert err.value.code == 'CLOSED'
    with CameraRenderer(model, 'overhead', 64, 48) as ctx:
        pass
    with pytest.raises(ClosedError):
        ctx.render_rgb(data)


# -- threads --------------------------------------------------------------------------------

@needs_gl
def test_render_from_other_threads(cam, data):
    """The GL context lives in the renderer's thread, so any caller thread works."""
    expected = cam.render_rgb(data)
    results, errors = [], []

    def worker():
        try:
            for _ in range(3):
                results.append(cam.render_rgb(data))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors and len(results) == 9
    assert all(np.array_equal(r, expected) for r in results)


@needs_gl
def test_close_from_other_thread_stops_gl_thread(model, data):
    renderer = CameraRenderer(model, 'overhead', 64, 48)
    t = threading.Thread(target=renderer.close)
    t.start()
    t.join(timeout=10)
    assert renderer.closed
    assert not any(th.name == 'camera-gl-overhead' and th is renderer._owned.thread._thread
                   and th.is_alive() for th in threading.enumerate())


def _policy(tid):
    return os.sched_getscheduler(tid)


@needs_gl
@pytest.mark.skipif(not hasattr(os, 'SCHED_IDLE'), reason='SCHED_IDLE: Linux only')
def test_background_rendering_yields_the_cpu(model, data):
    """Background rendering puts Mesa's software rasteriser threads on SCHED_IDLE, so frames
    never push physics or state publishing off the cores; threads that run Python (the GL
    thread, the caller) keep their policy, so none can sit on the GIL while starved."""
    from mujoco_hal_ros.fastpath.raster import rasteriser_threads
    with CameraRenderer(model, 'overhead', 64, 48, background=True) as renderer:
        expected = renderer.render_rgb(data)
        raster = rasteriser_threads()
        if not raster:
            pytest.skip('no software rasteriser threads here (GPU rendering)')
        assert all(_policy(tid) == os.SCHED_IDLE for tid in raster)
        assert _policy(renderer._owned.thread._thread.native_id) == os.SCHED_OTHER
        assert np.array_equal(renderer.render_rgb(data), expected)
    assert _policy(0) == os.SCHED_OTHER
    assert _policy(threading.get_native_id()) == os.SCHED_OTHER


@needs_gl
@pytest.mark.skipif(not hasattr(os, 'SCHED_IDLE'), reason='SCHED_IDLE: Linux only')
def test_rasterisers_move_between_background_and_normal_priority(model, data):
    """What camera_background:=auto does while a camera is watched: down needs no
    privilege; back up needs CAP_SYS_NICE or RLIMIT_NICE, and says False where refused."""
    from mujoco_hal_ros.fastpath.raster import rasteriser_threads, rasterisers_in_background
    with CameraRenderer(model, 'overhead', 64, 48) as renderer:
        expected = renderer.render_rgb(data)
        raster = rasteriser_threads()
        if not raster:
            pytest.skip('no software rasteriser threads here (GPU rendering)')
        assert rasterisers_in_background(True) is True
        assert {_policy(tid) for tid in raster} == {os.SCHED_IDLE}
        if rasterisers_in_background(False):
            assert {_policy(tid) for tid in raster} == {os.SCHED_OTHER}
        else:                                  # refused: still in the background
            assert {_policy(tid) for tid in raster} == {os.SCHED_IDLE}
        assert np.array_equal(renderer.render_rgb(data), expected)
        rasterisers_in_background(False)


@pytest.mark.parametrize('bad', [1, 0, 'yes', None])
def test_background_must_be_a_boolean(model, bad):
    with pytest.raises(InvalidArgument, match='background must be a boolean'):
        CameraRenderer(model, 'overhead', 64, 48, background=bad)


# -- backend choice -------------------------------------------------------------------------

def _run_clean(code, **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ('MUJOCO_GL', 'PYOPENGL_PLATFORM', 'DISPLAY', 'WAYLAND_DISPLAY')}
    full.update(env)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    full['PYTHONPATH'] = os.pathsep.join(p for p in (root, full.get('PYTHONPATH')) if p)
    out = subprocess.run([sys.executable, '-c', code], env=full, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_headless_picks_egl_before_mujoco_import():
    code = ('import os; from mujoco_hal_ros.render import gl; b = gl.ensure_headless_gl(); '
            'import mujoco.rendering.classic.gl_context as g; '
            'print(b, os.environ["MUJOCO_GL"], os.environ["PYOPENGL_PLATFORM"], '
            'g.GLContext.__module__)')
    assert _run_clean(code) == ['egl', 'egl', 'egl', 'mujoco.egl']


def test_user_choice_wins_and_late_call_repairs():
    code = 'from mujoco_hal_ros.render import gl; print(gl.ensure_headless_gl())'
    assert _run_clean(code, MUJOCO_GL='osmesa') == ['osmesa']
    late = ('import mujoco; from mujoco_hal_ros.render import gl; '
            'import mujoco.rendering.classic.gl_context as g; '
            'print(g.GLContext.__module__, gl.ensure_headless_gl(), g.GLContext.__module__)')
    assert _run_clean(late) == ['mujoco.glfw', 'egl', 'mujoco.egl']


def test_failure_message_names_packages():
    text = gl.describe_failure(RuntimeError('no display'), 'egl')
    for package in ('libegl1', 'libegl-mesa0', 'libgl1-mesa-dri', 'osmesa', 'libosmesa6'):
        assert package in text
    assert isinstance(gl.ConfigError('x'), DeviceError)


def test_context_failure_becomes_config_error(model, monkeypatch):
    from mujoco.rendering.classic import gl_context

    class NoGL:
        def __init__(self, *args):
            raise RuntimeError('Cannot initialize a EGL device display')

    monkeypatch.setattr(gl_context, 'GLContext', NoGL)
    monkeypatch.setenv('MUJOCO_GL', 'egl')
    before = threading.active_count()
    with pytest.raises(gl.ConfigError) as err:
        CameraRenderer(model, 'overhead', 64, 48)
    assert 'libegl1' in str(err.value) and 'overhead' in str(err.value)
    assert threading.active_count() == before, 'GL thread left running'


# -- the offscreen target against mujoco.Renderer, and frames in flight ---------------------

def _bare_renderer(model, data, depth):
    """``mujoco.Renderer`` at the fast-mode settings: no multisampling, shadows or
    reflections."""
    private = mujoco.MjModel.from_xml_path(bench_arm_path())
    private.vis.quality.offsamples = 0
    r = mujoco.Renderer(private, H, W)
    try:
        r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        r.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        if depth:
            r.enable_depth_rendering()
        r.update_scene(data, 'overhead')
        return r.render()
    finally:
        r.close()


@needs_gl
def test_same_pixels_and_depth_as_mujoco_renderer(cam, model, data):
    """The node's renderer is compared with mujoco.Renderer in the camera benchmark: it
    must draw the same frame, bit for bit, and read the same metres of depth."""
    mujoco.mj_resetDataKeyframe(model, data, 0)
    data.qpos[:3] += [0.3, -0.2, 0.25]
    mujoco.mj_forward(model, data)
    rgb, depth = cam.render_rgbd(data)
    assert np.array_equal(rgb, _bare_renderer(model, data, depth=False))
    assert np.array_equal(depth, _bare_renderer(model, data, depth=True))


@needs_gl
def test_submitted_frames_show_the_data_at_submission(cam, model, data):
    """Two frames in flight: each shows ``data`` as it was when submitted, although it
    changes right after; rows come bottom-up and flip to what render_rgb returns."""
    mujoco.mj_resetDataKeyframe(model, data, 0)
    mujoco.mj_forward(model, data)
    first_expected = cam.render_rgb(data)
    first = cam.submit(data)
    data.qpos[0] += 0.8
    mujoco.mj_forward(model, data)
    second = cam.submit(data)
    data.qpos[0] += 0.8                  # a third pose, never submitted
    mujoco.mj_forward(model, data)
    third = cam.submit(data, depth=True)  # waits for the first frame's scene
    a, b, c = first.result(10), second.result(10), third.result(10)
    assert a.depth is None and c.depth is not None
    assert np.array_equal(a.rgb[::-1], first_expected)
    assert np.array_equal(a.rgb_top_down(), first_expected)
    assert a.rgb_top_down().flags.c_contiguous
    assert not np.array_equal(a.rgb, b.rgb) and not np.array_equal(b.rgb, c.rgb)
    assert np.array_equal(c.rgb_top_down(), cam.render_rgb(data))
    assert np.array_equal(c.depth_top_down(), cam.render_depth(data))


@needs_gl
def test_submit_checks_like_render(model, data):
    with CameraRenderer(model, 'overhead', 64, 48) as renderer:
        with pytest.raises(InvalidArgument):
            renderer.submit(data, depth=True)          # not a depth camera
        with pytest.raises(InvalidArgument):
            renderer.submit(object())
        job = renderer.submit(data)
    assert job.result(10).rgb.shape == (48, 64, 3)     # queued before close: still drawn
    with pytest.raises(ClosedError):
        renderer.submit(data)
