"""Sensors, lidar, point clouds, compression, contacts and pushes against known answers.

Real models: Menagerie's Go1 with an IMU on its ``imu`` site, and ``sensor_rig.xml``
(a 2 kg payload under a force-torque site, a rangefinder 1 m over the floor, a scanner
2 m from a box, a touch pad under a 1.5 kg block, a 1 kg free puck, a camera 1 m over
the floor). Devices run paused at rtf 0 and advance by ``step``.
"""

import os

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros.config import sensor_settings as settings
from mujoco_hal_ros.errors import ConfigError, DeviceError, InvalidArgument, UnknownName
from mujoco_hal_ros.render import gl
from mujoco_hal_ros.sensors import catalog, compress, lidar, noise, pointcloud

G = 9.81
GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')


@pytest.fixture
def rig(open_device, h):
    dev = open_device(model=h.model_file('sensor_rig'), start_paused=True)
    dev.step(500)
    return dev


def group(dev, name, settings_=None):
    groups = catalog.configure(dev.model, settings_) if settings_ else dev.sensing.sensor_groups()
    return next(g for g in groups if g.name == name)


def go1_with_imu(tmp_path, h):
    path = h.menagerie_path('go1')
    spec = mujoco.MjSpec.from_file(path)
    spec.meshdir = os.path.join(os.path.dirname(path), 'assets')
    for name, kind in (('imu_acc', 'ACCELEROMETER'), ('imu_gyro', 'GYRO'),
                       ('imu_quat', 'FRAMEQUAT')):
        spec.add_sensor(name=name, type=getattr(mujoco.mjtSensor, f'mjSENS_{kind}'),
                        objtype=mujoco.mjtObj.mjOBJ_SITE, objname='imu')
    out = tmp_path / 'go1_imu.xml'
    out.write_text(spec.to_xml())
    return str(out)


# --- the catalog and real readings ----------------------------------------------------------
def test_go1_imu_at_rest_reads_gravity_and_no_rotation(open_device, tmp_path, h):
    dev = open_device(model=go1_with_imu(tmp_path, h), keyframe='home', start_paused=True)
    imu = group(dev, 'imu')
    roles = [p.role for p in imu.parts]
    assert imu.kind == 'imu' and roles == ['accel', 'gyro', 'orientation']
    dev.step(1000)                                 # 2 s to settle on its feet
    snap = dev.snapshot
    _t, r = imu.read(snap.sensordata, snap.time)
    rot = snap.site_xmat[imu.site].reshape(3, 3)   # sensor frame -> world
    world_z = rot.T @ np.array([0.0, 0.0, 1.0])    # the world's z in the sensor frame
    assert abs(float(r['accel'] @ world_z) - G) < 0.05
    assert np.linalg.norm(r['accel'] - G * world_z) < 0.05
    assert np.abs(r['gyro']).max() < 0.01
    q = np.empty(4)
    mujoco.mju_mat2Quat(q, snap.site_xmat[imu.site])
    assert abs(abs(float(q @ r['orientation'])) - 1.0) < 1e-6


def test_rig_groups_and_known_readings(rig):
    groups = {g.name: g for g in rig.sensing.sensor_groups()}
    assert {n: g.kind for n, g in groups.items()} == {
        'block_imu': 'imu', 'ft': 'wrench', 'range': 'range', 'pad_touch': 'touch', 'puck': 'pose',
        'puck_vel': 'generic', 'clock': 'generic', 'joint_states': 'joints',
        'actuator_states': 'actuators'}
    snap = rig.snapshot
    _t, ft = groups['ft'].read(snap.sensordata, snap.time)
    assert np.linalg.norm(ft['force']) == pytest.approx(2.0 * G, rel=1e-3)   # the payload
    assert np.allclose(ft['force'][:2], 0, atol=1e-6)
    assert np.allclose(ft['torque'], 0, atol=1e-6)
    _t, rng = groups['range'].read(snap.sensordata, snap.time)
    assert rng['range'][0] == pytest.approx(1.0, abs=1e-6)
    _t, touch = groups['pad_touch'].read(snap.sensordata, snap.time)
    assert touch['force'][0] == pytest.approx(1.5 * G, rel=1e-2)
    t, pose = groups['puck'].read(snap.sensordata, snap.time)
    assert t == snap.time and pose['position'][:2] == pytest.approx([-3.0, -3.0])
    _t, joints = groups['joint_states'].read(snap.sensordata, snap.time)
    assert set(joints) == {('position', 'swing'), ('velocity', 'swing')}
    assert abs(joints[('position', 'swing')][0]) < 1e-6      # hanging straight down
    _t, acts = groups['actuator_states'].read(snap.sensordata, snap.time)
    assert set(acts) == {('effort', 'swing_motor')}


# --- noise ----------------------------------------------------------------------------------
def test_noise_is_off_by_default_and_seeded(rig):
    snap = rig.snapshot
    plain = group(rig, 'range')
    assert plain.parts[0].noise is None
    cfg = settings.parse_sensors({'seed': 7, 'range': {'noise': {'std': 0.01, 'bias': 0.1}}})

    def readings(conf):
        g = group(rig, 'range', conf)
        return np.array([g.read(snap.sensordata, snap.time + i)[1]['range'][0]
                         for i in range(200)])
    a, b = readings(cfg), readings(cfg)
    assert np.array_equal(a, b)                                  # same seed, same stream
    noisy = {'noise': {'std': 0.01, 'bias': 0.1}}
    other = readings(settings.parse_sensors({'seed': 8, 'range': noisy}))
    assert not np.array_equal(a, other)
    assert a.mean() == pytest.approx(1.1, abs=0.003) and a.std() == pytest.approx(0.01,
                                                                                  rel=0.2)
    assert group(rig, 'range', cfg).variances['range'] == pytest.approx(1e-4)


def test_noise_delay_and_dropout():
    delayed = noise.Noise(settings.NoiseSpec(delay=0.05), seed=1, name='x')
    out = [delayed.apply(t, [t]) for t in np.arange(0, 0.2, 0.01)]
    assert all(o is None for o in out[:5])
    assert out[5][0] == pytest.approx(0.0) and out[10][1][0] == pytest.approx(0.05)
    lossy = noise.Noise(settings.NoiseSpec(dropout=0.3), seed=1, name='x')
    kept = sum(lossy.apply(float(i), [1.0]) is not None for i in range(2000))
    assert 0.65 < kept / 2000 < 0.75


def test_sensor_settings_are_strict(rig, h, open_device):
    with pytest.raises(ConfigError, match="sensors.imu: unknown key 'noize'"):
        settings.parse_sensors({'imu': {'noize': {}}})
    with pytest.raises(ConfigError, match=r'sensors.imu.noise.std'):
        settings.parse_sensors({'imu': {'noise': {'std': -1}}})
    with pytest.raises(ConfigError, match='sensors.imu.rate'):
        settings.parse_sensors({'imu': {'rate': True}})
    with pytest.raises(ConfigError, match='lidars.front.site'):
        settings.parse_lidars({'front': {'rays': 10}})
    with pytest.raises(ConfigError, match='no sensor or sensor group') as err:
        catalog.configure(rig.model, settings.parse_sensors({'nope': {'rate': 5}}))
    assert 'pad_touch' in str(err.value)
    doc = {'connect': {'model': h.model_file('sensor_rig')}, 'lidars': {'x': {'site': 'nope'}}}
    with pytest.raises(ConfigError, match='lidar'):
        open_device(doc, start_paused=True)
    doc = {'connect': {'model': h.model_file('sensor_rig')},
           'sensors': {'seed': 3, 'ft': {'rate': 250, 'frame': 'wrist_ft'}},
           'lidars': {'front': {'site': 'lidar', 'rays': 90, 'fov': '180 deg'}}}
    dev = open_device(doc, start_paused=True)
    ft = group(dev, 'ft')
    assert (ft.rate, ft.frame) == (250, 'wrist_ft')
    front = dev.sensing.lidar_settings()['front']
    assert front['rays'] == 90 and front['fov'] == pytest.approx(np.pi)


# --- lidar ----------------------------------------------------------------------------------
def test_lidar_sees_the_box_at_its_distance_and_not_itself(rig):
    cfg = rig.sensing.lidar_settings({'front': {'site': 'lidar'}})['front']
    scanner = rig.sensing.lidar(cfg)
    scan = scanner.scan(rig.snapshot)
    az = scanner.pattern.azimuths
    assert len(scan.ranges) == 360 and scanner.planar
    front, back = np.argmin(np.abs(az)), np.argmin(np.abs(np.abs(az) - np.pi))
    assert scan.ranges[front] == pytest.approx(2.0, abs=1e-6)    # box face at x = 2.0
    assert np.isinf(scan.ranges[back])                           # its own arm excluded
    assert scan.points[front] == pytest.approx([2.0, 0.0, 0.0], abs=1e-6)
    own = rig.sensing.lidar(dict(cfg, exclude_robot=False)).scan(rig.snapshot)
    assert own.ranges[back] == pytest.approx(0.48, abs=1e-6)
    cloud = rig.sensing.lidar(dict(cfg, rays=36, vertical_rays=5,
                                   vertical_fov=0.4)).scan(rig.snapshot)
    assert cloud.points.shape == (180, 3)
    pts = cloud.points[np.isfinite(cloud.ranges)]
    box = pts[(np.abs(pts[:, 1]) < 0.4) & (pts[:, 2] > -0.49) & (pts[:, 0] > 1.0)]
    assert len(box) >= 5 and np.allclose(box[:, 0], 2.0)     # the box face, at every tilt
    floor = pts[pts[:, 2] < -0.49]
    assert len(floor) and np.allclose(floor[:, 2], -0.5)    # the floor, 0.5 m down


def test_lidar_on_a_world_site_sees_the_world(rig):
    cfg = rig.sensing.lidar_settings({'w': {'site': 'world_scan', 'rays': 4,
                                            'vertical_rays': 3,
                                            'vertical_fov': np.pi / 2}})['w']
    scan = rig.sensing.lidar(cfg).scan(rig.snapshot)
    down = scan.ranges[:4]                        # elevation -45 degrees, first row
    assert np.allclose(down, 0.5 * np.sqrt(2), atol=1e-6)      # the floor, 0.5 m below


def test_lidar_pattern_full_turn_has_no_duplicate_ray():
    p = lidar.pattern(4, 2 * np.pi)
    assert np.allclose(p.azimuths, [-np.pi, -np.pi / 2, 0, np.pi / 2])


# --- point clouds and compression -----------------------------------------------------------
@needs_gl
def test_point_cloud_of_the_floor_is_planar_to_a_millimetre(rig):
    r = rig.cameras.renderer('down', 160, 120, depth=True)
    with rig.cameras.render_state() as data:
        depth = r.render_depth(data)
    proj = pointcloud.Projector(160, 120, *r.intrinsics())
    pts = proj.points(depth).reshape(-1, 3)
    assert np.isfinite(pts).all()
    assert np.abs(pts[:, 2] - 1.0).max() < 1e-3             # the floor is 1 m down the axis
    centred = pts - pts.mean(axis=0)
    normal = np.linalg.svd(centred, full_matrices=False)[2][-1]
    assert np.abs(centred @ normal).max() < 1e-3
    data = pointcloud.pack_xyzrgb(proj.points(depth), np.full((120, 160, 3), 7, np.uint8))
    assert len(data) == 160 * 120 * pointcloud.POINT_STEP


def test_compressed_frames_decode_within_the_codec_error():
    y, x = np.mgrid[0:48, 0:64]
    rgb = np.stack([x * 4, y * 5, np.full_like(x, 90)], axis=-1).astype(np.uint8)
    fmt, png = compress.encode(rgb, 'png')
    assert fmt == 'rgb8; png compressed bgr8' and np.array_equal(compress.decode(png), rgb)
    fmt, jpg = compress.encode(rgb, 'jpeg', 95)
    assert fmt == 'rgb8; jpeg compressed bgr8'
    err = compress.decode(jpg).astype(float) - rgb
    assert 10 * np.log10(255.0 ** 2 / np.mean(err ** 2)) > 35.0      # PSNR, dB
    depth = np.full((10, 12), 1.5, np.float32)
    depth[0, 0] = np.inf
    fmt, blob = compress.encode_depth(depth)
    assert fmt == '32FC1; compressedDepth png'
    back = compress.decode_depth(blob)
    assert np.isnan(back[0, 0]) and np.nanmax(np.abs(back - 1.5)) < 1.5 ** 2 / 10000 * 2
    with pytest.raises(InvalidArgument):
        compress.encode(rgb, 'gif')


# --- contacts -------------------------------------------------------------------------------
def test_contacts_only_when_asked_and_carry_the_weight(rig):
    assert rig.snapshot.contacts is None
    rig.sensing.report_contacts(True)
    rig.step(1)
    con = rig.snapshot.contacts
    block = mujoco.mj_name2id(rig.model, mujoco.mjtObj.mjOBJ_BODY, 'block')
    mine = con[(con['body1'] == block) | (con['body2'] == block)]
    assert len(mine) == 4
    assert np.allclose(mine['normal'], [0, 0, 1], atol=1e-6)
    assert mine['force'][:, 2].sum() == pytest.approx(1.5 * G, rel=1e-2)
    rig.sensing.report_contacts(False)
    rig.step(1)
    assert rig.snapshot.contacts is None


# --- pushes ---------------------------------------------------------------------------------
def puck_state(dev):
    s = dev.snapshot
    return s.time, s.qpos[7 + 2], s.qvel[6 + 2]     # after the block's free joint


def test_apply_wrench_lifts_a_free_body_as_newton_says(rig):
    t0, _z0, v0 = puck_state(rig)
    out = rig.sensing.apply_wrench('puck', force=[0, 0, 30.0], duration=0.5)
    assert out['success'] and out['end_time'] == pytest.approx(t0 + 0.5)
    assert [w.body_name for w in rig.sensing.wrenches()] == ['puck']
    rig.step(250)
    t1, _z1, v1 = puck_state(rig)
    assert (v1 - v0) / (t1 - t0) == pytest.approx(30.0 / 1.0 - G, rel=1e-3)
    assert rig.sensing.wrenches() == ()                         # it ended with its duration
    rig.step(100)
    t2, _z2, v2 = puck_state(rig)
    assert (v2 - v1) / (t2 - t1) == pytest.approx(-G, rel=1e-3)


def test_wrenches_latch_add_up_clear_and_reset(rig):
    rig.sensing.apply_wrench('puck', force=[0, 0, G])             # floats: until cleared
    rig.sensing.apply_wrench('block', force=[1, 0, 0], point=[0, 0, 0.1], frame='block')
    assert {w.body_name for w in rig.sensing.wrenches()} == {'puck', 'block'}
    _t, _z, v0 = puck_state(rig)
    rig.step(100)
    assert puck_state(rig)[2] == pytest.approx(v0, abs=1e-9)
    out = rig.sensing.clear_wrenches(['block'])
    assert out['cleared'] == ['block']
    assert [w.body_name for w in rig.sensing.wrenches()] == ['puck']
    rig.reset()
    assert rig.sensing.wrenches() == ()
    rig.sensing.apply_wrench('puck', torque=[0, 0, 1])
    rig.sensing.clear_wrenches()
    assert rig.sensing.wrenches() == ()
    rig.step(2)
    assert not rig.stepper.snapshot.qvel[9:12].any()


@pytest.mark.parametrize('kw, error', [
    ({'force': [0, 0, float('nan')]}, InvalidArgument),
    ({'force': [0, 0, float('inf')]}, InvalidArgument),
    ({'force': [True, 0, 0]}, InvalidArgument),
    ({'force': [np.bool_(True), 0, 0]}, InvalidArgument),
    ({'force': np.array(1.0)}, InvalidArgument),
    ({'force': [1, 2]}, InvalidArgument),
    ({'torque': 'abc'}, InvalidArgument),
    ({'point': [0, 0, 0, 0]}, InvalidArgument),
    ({'duration': True}, InvalidArgument),
    ({'duration': np.bool_(False)}, InvalidArgument),
    ({'duration': float('nan')}, InvalidArgument),
    ({'duration': -1.0}, InvalidArgument),
    ({'frame': 'nowhere'}, UnknownName),
    ({'body': 'nobody'}, UnknownName),
    ({'body': 'world'}, UnknownName),
])
def test_bad_pushes_are_refused_and_change_nothing(rig, kw, error):
    kw = dict({'body': 'puck', 'force': [0, 0, 1.0]}, **kw)
    before = rig.snapshot.time
    with pytest.raises(error) as err:
        rig.sensing.apply_wrench(**kw)
    assert isinstance(err.value, DeviceError)
    assert rig.sensing.wrenches() == () and rig.snapshot.time == before
    if error is UnknownName:
        assert 'puck' in str(err.value)


def test_bad_clears_are_refused_whole(rig):
    rig.sensing.apply_wrench('puck', force=[0, 0, 1.0])
    with pytest.raises(UnknownName, match='block'):
        rig.sensing.clear_wrenches(['puck', 'nobody'])
    with pytest.raises(InvalidArgument):
        rig.sensing.clear_wrenches('puck')
    assert [w.body_name for w in rig.sensing.wrenches()] == ['puck']
