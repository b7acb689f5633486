"""EnvPool on MuJoCo 3.x with the public mjbatch: run by test_pool_mjbatch.py in the venv
scripts/setup.sh builds for it (mujoco 3.14.0 + mjbatch), which cannot share a process
with the project's MuJoCo 4. Prints one JSON object of what it measured; the test judges.
"""

import json
import sys

import mujoco
import numpy as np

from mujoco_hal_ros.errors import DeviceError
from mujoco_hal_ros.pool import EnvPool, jacobian

ARM = """
<mujoco>
  <size memory="%s"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" axis="0 1 0" range="-2 2" damping="0.5"/>
      <geom type="capsule" size=".04" fromto="0 0 0 .4 0 0" mass="1"/>
      <body name="fore" pos=".4 0 0">
        <joint name="elbow" axis="0 1 0" range="-2 2" damping="0.5"/>
        <geom type="capsule" size=".03" fromto="0 0 0 .3 0 0" mass=".5"/>
        <site name="tip" pos=".3 0 0"/>
      </body>
    </body>
    %s
  </worldbody>
  <actuator>
    <position joint="shoulder" kp="50" ctrlrange="-2 2"/>
    <motor joint="elbow" ctrlrange="-5 5"/>
  </actuator>
  <sensor>
    <jointpos joint="shoulder"/>
    <accelerometer site="tip"/>
    <framepos objtype="site" objname="tip"/>
  </sensor>
  <keyframe><key name="bent" qpos="0.3 -0.6 %s" ctrl="0.3 0"/></keyframe>
</mujoco>
"""
BOXES = 12


def model(memory='10M'):
    boxes = ''.join(f'<body pos="{0.05 * i} 0.5 {0.1 + 0.12 * i}"><freejoint/>'
                    f'<geom type="box" size=".05 .05 .05"/></body>' for i in range(BOXES))
    free = ' '.join(f'{0.05 * i} 0.5 {0.1 + 0.12 * i} 1 0 0 0' for i in range(BOXES))
    return mujoco.MjModel.from_xml_string(ARM % (memory, boxes, free))


def serial(m, rows, ctrls, nstep):
    """A plain mj_step loop from the same rows: the reference both engines must match."""
    d = mujoco.MjData(m)
    out = rows.copy()
    for i in range(len(rows)):
        mujoco.mj_setState(m, d, rows[i], mujoco.mjtState.mjSTATE_INTEGRATION)
        d.ctrl[:] = ctrls[i]
        mujoco.mj_step(m, d, nstep)
        mujoco.mj_getState(m, d, out[i], mujoco.mjtState.mjSTATE_INTEGRATION)
    return out


def main():
    m = model()
    n = 8
    rng = np.random.default_rng(3)
    got = {'mujoco': mujoco.__version__}
    with EnvPool(m, n, nthread=2, keyframe='bent') as lib, \
            EnvPool(m, n, nthread=2, keyframe='bent', engine='threads') as threads:
        got['engine'], got['library'] = lib.engine, lib.engine_library
        start = lib.get_state(full=True)
        ctrl = rng.uniform(-1, 1, (n, m.nu))
        a, b = lib.step(50, ctrl), threads.step(50, ctrl)
        reference = serial(m, start, ctrl, 50)
        got['const_ctrl_equal'] = bool(np.array_equal(lib.get_state(full=True), reference)
                                       and np.array_equal(a.state, b.state))
        per_step = rng.uniform(-1, 1, (n, 5, m.nu))
        lib.step(5, per_step)
        threads.step(5, per_step)
        ids = [6, 1, 4]
        a = lib.step(20, ctrl[ids], env_ids=ids, sensors=True)
        b = threads.step(20, ctrl[ids], env_ids=ids, sensors=True)
        got['subset_sensors_equal'] = bool(
            np.array_equal(a.sensordata, b.sensordata) and np.array_equal(a.state, b.state)
            and np.array_equal(lib.get_state(full=True), threads.get_state(full=True)))
        got['sensors_nonzero'] = bool(np.abs(a.sensordata).sum() > 0)
        mass = m.body_mass[1] * rng.uniform(0.5, 2.0, 3)
        gravity = np.array([[0, 0, -9.81], [0, 0, -5.0], [1.0, 0, -9.81]])
        for pool in (lib, threads):
            pool.reset([0, 3, 5], keyframe='bent',
                       randomization={'body_mass': np.column_stack(
                           [np.repeat(m.body_mass[None, :1], 3, 0), mass,
                            np.repeat(m.body_mass[None, 2:], 3, 0)]),
                           'opt.gravity': gravity})
            pool.step(30, ctrl)
        got['randomized_equal'] = bool(np.array_equal(lib.get_state(full=True),
                                                      threads.get_state(full=True)))
        got['randomization_moved'] = bool(not np.array_equal(lib.get_state()[3],
                                                             lib.get_state()[2]))
        # Jacobians (the compiled loop calling this MuJoCo 3's own functions, where the
        # package was built), against mj_jacSite
        got['jacobian_unavailable'] = jacobian.why_unavailable()
        jacp, jacr = lib.site_jacobians(['tip'], env_ids=[7, 0, 3])
        worst = 0.0
        d = mujoco.MjData(m)
        for k, env in enumerate([7, 0, 3]):
            mujoco.mj_setState(m, d, lib.get_state(full=True)[env],
                               mujoco.mjtState.mjSTATE_INTEGRATION)
            mujoco.mj_forward(m, d)
            ref_p, ref_r = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jacSite(m, d, ref_p, ref_r, 0)
            worst = max(worst, np.abs(jacp[k, 0] - ref_p).max(), np.abs(jacr[k, 0] - ref_r).max())
        got['jacobian_error'] = float(worst)
        got['jacobian_nonzero'] = bool(np.abs(jacp).sum() > 0.1)
        before = lib.get_state(full=True)
        bad = ctrl.copy()
        bad[2, 0] = np.nan
        try:
            lib.step(5, bad)
            got['nan_refused'] = False
        except DeviceError as exc:
            got['nan_refused'] = 'NaN' in str(exc)
        got['nan_changed_nothing'] = bool(np.array_equal(before, lib.get_state(full=True)))
    # a MuJoCo error in one environment (its arena overflows once the boxes touch down):
    # the call changes nothing and names it, as on the thread engine
    small = model('40K')
    errors = {}
    for engine in ('auto', 'threads'):
        with EnvPool(small, 3, nthread=2, engine=engine) as pool:
            before = pool.get_state(full=True)
            try:
                pool.step(400)
                errors[engine] = None
            except DeviceError as exc:
                errors[engine] = {'env_ids': exc.details.get('env_ids'),
                                  'unchanged': bool(np.array_equal(
                                      before, pool.get_state(full=True))),
                                  'message': str(exc)[:300]}
    got['errors'] = errors
    json.dump(got, sys.stdout)
    print()


if __name__ == '__main__':
    main()
