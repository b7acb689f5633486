"""Strategies and invariant checks shared by the adversarial tier's tests."""

import array
import math
import os

from hypothesis import strategies as st
import numpy as np

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.errors import DeviceError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
BENCH_YAML = os.path.join(ROOT, 'config', 'bench_arm.yaml')
BENCH_ENV = {'OPENHAL_BENCH_ARM': menagerie.bench_arm_path()}
JOINTS = ['pan', 'lift', 'elbow', 'wrist']

FREE_BODY = """
<mujoco>
  <worldbody>
    <body name="box" pos="0 0 0.5"><freejoint/><geom type="box" size=".05 .05 .05"/>
      <site name="corner" pos=".05 .05 .05"/></body>
    <body name="target" mocap="true" pos="1 0 0"><geom type="sphere" size=".02"
      contype="0" conaffinity="0"/></body>
    <body name="arm"><joint name="hinge" axis="0 0 1"/>
      <geom type="capsule" size=".02" fromto="0 0 0 .2 0 0"/></body>
  </worldbody>
  <actuator><motor name="push" joint="hinge" ctrlrange="-1 1"/></actuator>
  <keyframe><key name="start" qpos="0 0 .5 1 0 0 0 0"/></keyframe>
</mujoco>
"""

# --- strategies ------------------------------------------------------------------------------
HUGE = [1e308, -1e308, 1.7976931348623157e308, 1e200, 1e16, -1e16, 5e-324]
NON_FINITE = [math.nan, math.inf, -math.inf]


def hostile_scalars():
    """Anything a caller may put where a number belongs."""
    return st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(HUGE + NON_FINITE),
        st.integers(min_value=-(10 ** 400), max_value=10 ** 400),
        st.booleans(), st.sampled_from([np.bool_(True), np.bool_(False)]),
        st.sampled_from([np.float32(np.nan), np.float64(1e308), np.int64(2 ** 62),
                         np.array(1.0), np.array([1.0, 2.0])]),
        st.none(), st.text(max_size=8), st.just('1.0'), st.just([]), st.just({}),
        st.just(b'\x00'), st.just(object()))


def small_floats(lo=-1e3, hi=1e3):
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


def hostile_vectors(n):
    """Vectors of the right length with hostile entries, and wrong shapes and types."""
    return st.one_of(
        st.lists(hostile_scalars(), min_size=n, max_size=n),
        st.lists(st.one_of(small_floats(), hostile_scalars()), min_size=0, max_size=n + 2),
        st.lists(st.sampled_from(HUGE + NON_FINITE), min_size=n, max_size=n).map(
            lambda v: array.array('d', v)),
        st.lists(st.sampled_from(HUGE + NON_FINITE + [0.0]), min_size=n, max_size=n).map(
            np.array),
        st.just(np.ones((n, 1))), st.just(np.ones(n, dtype=bool)), st.just('a' * n),
        hostile_scalars())


def huge_name():
    """A megabyte-long name, built when drawn (so a failure report does not print it)."""
    return st.builds(lambda: 'a' * (1 << 20))


def names(known=(), hashable=False):
    """Names: known ones, unknown, empty, huge, non-strings (``hashable``: dict keys)."""
    out = [st.sampled_from(list(known) or ['x']), st.text(max_size=12), st.just(''),
           huge_name(), st.just('\x00'), st.integers(), st.none(), st.just(b'pan'),
           st.just(('pan',))]
    if not hashable:
        out.append(st.just(['pan']))
    return st.one_of(*out)


# --- helpers ---------------------------------------------------------------------------------
def is_refusal(exc):
    """An exception a hostile input may raise: a DeviceError with a code, message bounded."""
    assert isinstance(exc, DeviceError), f'not a DeviceError: {type(exc).__name__}: {exc!r}'
    assert isinstance(exc.code, str) and exc.code, repr(exc)
    assert len(str(exc)) < 5000, 'a refusal echoes its input in full'
    return True


def refused(call):
    """Run ``call``; a refusal must be a DeviceError with a code. Returns it or None."""
    try:
        call()
    except DeviceError as err:
        assert isinstance(err.code, str) and err.code, repr(err)
        assert len(str(err)) < 5000, 'a refusal echoes its input in full'
        return err
    return None


def settle(dev):
    """Back to the keyframe, settled, so the next example starts from the same state."""
    dev.reset()
    dev.step(2000)


def state_of(dev):
    snap = dev.snapshot
    return snap.setpoint.copy(), snap.qpos.copy(), len(dev.stepper.plans)


def unchanged(dev, before, steps=5):
    """After a refusal and ``steps`` more steps nothing moved: setpoints, plans, pose."""
    dev.step(steps)
    setpoint, qpos, plans = state_of(dev)
    assert np.array_equal(setpoint, before[0]), 'a refused request changed a setpoint'
    assert plans == before[2] == 0, 'a refused request left a plan'
    assert np.allclose(qpos, before[1], atol=1e-6), 'a refused request moved the arm'


def run_to_end(dev, move, steps=500, rounds=60):
    """Step a paused device until an accepted move ends; returns its result dict."""
    for _ in range(rounds):
        if move.done():
            break
        dev.step(steps)
    assert move.done(), f'an accepted move_to did not end within {steps * rounds} steps'
    return move.result


def accepted_move(dev, move, point=None):
    """What an accepted move_to must do: a Move to a finite target (the point asked, when
    one was), run to an end the device reports: DONE with the point within the move's
    tolerance, or MISSED saying how far it stayed; then back to the keyframe."""
    from mujoco_hal_ros import errors
    assert hasattr(move, 'target') and hasattr(move, 'done'), f'not a Move: {move!r}'
    assert move.target.shape == (3,) and np.isfinite(move.target).all(), move.target
    if point is not None:
        assert np.allclose(move.target, np.asarray(point, dtype=float).reshape(3)), (
            move.target, point)
    result = run_to_end(dev, move)
    assert result['code'] in (errors.DONE, errors.MISSED), result
    assert result['success'] == (result['code'] == errors.DONE), result
    assert np.allclose(result['target'], move.target), result
    if result['code'] == errors.DONE:
        assert result['miss'] <= move.tolerance + 1e-9, result
    else:
        assert result['miss'] > 0 and result['message'], result
    settle(dev)
    return result


def accepted_goals(dev, goals, natives, before):
    """What an accepted set_goals must do: every named channel's goal becomes the value
    asked (in its unit), the others keep theirs, and the paths get there."""
    layout = dev.layout
    now = dev.goals()
    for name, value in now.items():
        want = (layout.goals[name].to_unit(natives[name]) if name in natives
                else before[name])
        assert np.isclose(value, want, rtol=1e-9, atol=1e-9), (name, value, want)
    for _ in range(40):
        if all(np.isclose(dev.goals(setpoint=True)[n], now[n], atol=1e-6) for n in natives):
            break
        dev.step(500)
    setpoint = dev.goals(setpoint=True)
    assert all(np.isclose(setpoint[n], now[n], atol=1e-6) for n in natives), (setpoint, now)
    settle(dev)
