"""Issue 14 in the core: faithful physics by default, keyframes, honest move results and a
recovery that keeps the scene.

The bench arm (position servos, a ``rest`` keyframe, a free block) and UR5e (Menagerie)
stand in for the zoo; the conformance tier runs the same ideas over every model.
"""

import math

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.errors import DeviceError


def test_zero_config_starts_at_the_first_keyframe_and_resets_there(open_device, h):
    dev = open_device(model=h.BENCH_XML, start_paused=True)
    key = dev.model.key('rest')
    assert dev.keyframe_name == 'rest'
    assert np.array_equal(dev.snapshot.qpos, key.qpos)
    dev.set_goals({'pan_goal': 0.5})
    dev.step(500)
    dev.reset()
    assert np.array_equal(dev.snapshot.qpos, key.qpos)


def test_gravity_compensation_is_off_by_default_and_effort_shows_the_holding_torque(
        open_device, h):
    path = h.menagerie_path('ur5e')
    dev = open_device(model=path, start_paused=True)
    assert dev.describe()['gravity_compensated'] == []
    assert not dev.model.body_gravcomp.any()
    q0 = dev.snapshot.qpos.copy()
    dev.step(1000)
    snap = dev.snapshot
    assert np.abs(snap.qpos - q0).max() < 1e-4          # held where it started, no sag
    # Effort is the torque that holds the arm: MuJoCo's gravity torque at this pose.
    d = mujoco.MjData(dev.model)
    d.qpos[:] = snap.qpos
    mujoco.mj_forward(dev.model, d)
    assert snap.qfrc_actuator[1] == pytest.approx(d.qfrc_bias[1], rel=1e-2)
    assert abs(snap.qfrc_actuator[1]) > 10


def test_gravity_compensation_opt_in_is_actuator_force(open_device, h):
    dev = open_device(model=h.menagerie_path('ur5e'), start_paused=True,
                      gravity_compensation=True)
    assert 'wrist_3_link' in dev.describe()['gravity_compensated']
    assert dev.model.jnt_actgravcomp[:6].all()
    dev.step(500)
    snap = dev.snapshot
    d = mujoco.MjData(dev.model)
    d.qpos[:] = snap.qpos
    mujoco.mj_forward(dev.model, d)
    assert snap.qfrc_actuator[1] == pytest.approx(d.qfrc_bias[1], rel=1e-2)
    with pytest.raises(DeviceError):
        open_device(model=h.BENCH_XML, gravity_compensation='yes')


def test_a_miss_is_missed_with_its_distance_and_success_agrees(open_device, h):
    dev = open_device(model=h.BENCH_XML, start_paused=True, move_tolerance=1e-3)
    assert dev.params['tolerance'] == 1e-3
    # A point the joints reach but the table is in the way of: the move stops short.
    site = dev.layout.sites[0]
    move = dev.move_to(point=dev.snapshot.site_xpos[0] + [0.05, 0.0, -0.05], site=site,
                       wait=False, tolerance=2e-3)
    assert move.tolerance == 2e-3
    h.run_until(dev, move.done, max_steps=40000, chunk=200)
    r = move.result
    assert r['success'] == (r['code'] == errors.DONE)
    assert r['code'] == errors.MISSED and 'mm from the target' in r['message'], r
    with pytest.raises(DeviceError):
        dev.move_to(point=[0.1, 0, 0.1], site=site, tolerance=0)


def test_done_means_settled(open_device, h):
    dev = open_device(model=h.menagerie_path('ur5e'), start_paused=True)
    site = 'attachment_site'
    start = dev.snapshot.site_xpos[dev.model.site(site).id].copy()
    move = dev.move_to(point=start + [0.05, 0.05, -0.05], site=site, wait=False)
    while not move.done():
        dev.step(100)
    assert move.result['code'] == errors.DONE and move.result['success']
    dofs = move.joints_dof
    assert np.abs(dev.snapshot.qvel[dofs]).max() < 1e-2
    dev.step(1000)
    now = dev.snapshot.site_xpos[dev.model.site(site).id]
    assert np.linalg.norm(now - start - [0.05, 0.05, -0.05]) <= dev.params['tolerance']


def test_divergence_goes_back_to_the_last_good_state(bench):
    bench.set_goals({'pan_goal': 40})
    bench.step(800)
    before = bench.snapshot.qpos.copy()
    assert before[0] == pytest.approx(math.radians(40), abs=1e-2)   # far from the keyframe

    def poison(s):
        s.data.qvel[1] = float('nan')
    bench.stepper.post(poison, wait=True)
    bench.step(2)
    snap = bench.snapshot
    assert bench.health()['unstable_events'] == 1
    assert np.isfinite(snap.qpos).all()
    assert snap.qpos[0] == pytest.approx(before[0], abs=1e-3)     # the scene stays
    assert bench.events()[-1]['recovery'] == 'last good state'
    assert 'last good state' in bench.events()[-1]['message']
