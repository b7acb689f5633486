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
