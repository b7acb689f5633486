"""EnvPool throughput against the two things a user would otherwise write.

Run: ``python bench/bench_pool.py [--quick] [--nthread N]`` (``--quick`` < 60 s).

Every ratio is measured in the same run on the same machine, interleaving the contenders and
keeping the best of several repetitions, because on a shared box other processes steal CPU
and a single timing says more about the neighbours than about the code. The ``cpu/wall``
column shows how many cores the pool actually got: a ratio short of the goal with cpu/wall
near 1.0 means the second core was busy elsewhere, not that the threads serialised.

Contenders:
  bare     one MjData, Python loop of ``mj_step`` over the same N states (restored and saved
           with mj_setState/mj_getState around each env's 10 steps): the serial baseline
  pool     ``EnvPool.step(10, ctrl)`` over N environments, nthread threads, default engine
           ('auto': ``mujoco.batch.Batch`` on MuJoCo >= 4.0, else the thread engine)
  threads  the same pool forced onto its own worker threads (``engine='threads'``), so the
           engine choice is shown by measurement in the same run (omitted when ``pool``
           already runs on threads)
  rollout  persistent ``mujoco.rollout.Rollout(nthread)`` doing the same 10 steps for N states
           (it also returns all 10 intermediate states and resets the solver warm start)
  reset    ``EnvPool.reset(ids, keyframe)`` vs a loop of ``mj_resetDataKeyframe`` +
           ``mj_getState`` per environment
  jac      ``EnvPool.site_jacobians`` for 1024 envs x 4 sites vs a loop doing
           ``mj_setState`` + ``mj_kinematics`` + ``mj_comPos`` + ``mj_jacSite`` per query
           (and, fairer, per environment)
"""

import importlib.util
import argparse
import os
import sys
import time

import mujoco
import numpy as np
from mujoco import rollout

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.pool import EnvPool  # noqa: E402

INTEG = mujoco.mjtState.mjSTATE_INTEGRATION
FULL = mujoco.mjtState.mjSTATE_FULLPHYSICS
NSTEP = 10
ROUNDS = 5   # interleaved rounds per size; the fastest of each contender counts
BUSY = []  # CPU share the single-threaded baseline got, per measurement


def load(name):
    """Go1 as shipped; Panda plus four sites (Menagerie's scene has none) for Jacobians."""
    path = menagerie.model_path(name)
    if path is None:
        return None, None
    if name == 'go1':
        return mujoco.MjModel.from_xml_path(path), ['FR', 'FL', 'RR', 'RL']
    spec = mujoco.MjSpec.from_file(path)
    sites = []
    for body in ('link3', 'link5', 'link7', 'hand'):
        spec.body(body).add_site(name=f'{body}_site', pos=[0.0, 0.0, 0.05])
        sites.append(f'{body}_site')
    return spec.compile(), sites


def interleaved(contenders, reps):
    """Wall and CPU seconds of each contender's fastest of ``reps`` interleaved rounds.

    Each contender advances its own copy of the same batch along the same trajectory, so
    every round is the same physics for all of them and neighbours' load hits all alike.
    The fastest round, as ``timeit`` advises: on a shared machine a slow round measures the
    neighbours, and each contender gets the same number of chances.
    """
    wall = {k: float('inf') for k in contenders}
    cpu = {k: 0.0 for k in contenders}
    for _ in range(reps):
        for label, fn in contenders.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            w, c = time.perf_counter() - t0, time.process_time() - c0
            if w < wall[label]:
                wall[label], cpu[label] = w, c
    return wall, cpu


def best_ms(fn, reps):
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return min(out)


def bench_model(name, args):
    model, sites = load(name)
    if model is None:
        print(f'{name}: Menagerie model not installed, skipped')
        return [], []
    rows = []
    target = 15_000 if args.quick else 150_000  # env-steps per contender per size
    rng = np.random.default_rng(0)
    for n in args.sizes:
        # near the keyframe controls: Panda holds its pose and Go1 stands on four feet, so
        # the work per step stays the same from round to round
        ctrl = model.key_ctrl[0] + 0.02 * rng.standard_normal((n, model.nu))
        pool = EnvPool(model, n, nthread=args.nthread, keyframe=0)
        pool.step(NSTEP, ctrl=ctrl)
        engine = pool.engine
        threaded = None
        if engine != 'threads':
            threaded = EnvPool(model, n, nthread=args.nthread, keyframe=0, engine='threads')
            threaded.step(NSTEP, ctrl=ctrl)
        calls = max(1, round(target / (n * NSTEP * ROUNDS)))

        def pooled():
            for _ in range(calls):
                pool.step(NSTEP, ctrl=ctrl)

        def pooled_threads():
            for _ in range(calls):
                threaded.step(NSTEP, ctrl=ctrl)

        serial_rows = pool.get_state(full=True)
        serial_rows[:, pool.layout.columns('ctrl')] = ctrl
        scratch = mujoco.MjData(model)

        def bare():
            for _ in range(calls):
                for i in range(n):
                    row = serial_rows[i]
                    mujoco.mj_setState(model, scratch, row, INTEG)
                    for _ in range(NSTEP):
                        mujoco.mj_step(model, scratch)
                    mujoco.mj_getState(model, scratch, row, INTEG)

        runner = rollout.Rollout(nthread=args.nthread)
        rdatas = [mujoco.MjData(model) for _ in range(max(args.nthread, 1))]
        init = pool.get_state()
        control = np.ascontiguousarray(np.repeat(ctrl[:, None, :], NSTEP, axis=1))
        out = np.empty((n, NSTEP, init.shape[1]))
        sens = np.empty((n, NSTEP, model.nsensordata))
        models = [model] * n

        def rolled():
            for _ in range(calls):
                runner.rollout(models, rdatas, init, control, state=out, sensordata=sens,
                               skip_checks=True, nstep=NSTEP)
                init[:] = out[:, -1]

        contenders = {'bare': bare, 'pool': pooled, 'rollout': rolled}
        if threaded is not None:
            contenders['threads'] = pooled_threads
        wall, cpu = interleaved(contenders, ROUNDS)
        if threaded is None:  # the pool is the thread engine: one measurement serves both
            wall['threads'], cpu['threads'] = wall['pool'], cpu['pool']
        work = calls * n * NSTEP                  # per round
        BUSY.append(cpu['bare'] / wall['bare'])
        rows.append((name, n, engine, work / wall['bare'], work / wall['pool'],
                     cpu['pool'] / wall['pool'], work / wall['threads'],
                     work / wall['rollout'], cpu['rollout'] / wall['rollout'],
                     cpu['bare'] / cpu['pool'], cpu['bare'] / cpu['threads'],
                     cpu['rollout'] / cpu['pool']))
        # every contender stepped the same trajectory: both engines must agree bit for bit
        assert np.array_equal(pool.get_state(), serial_rows[:, pool.layout.physics_columns])
        if threaded is not None:
            assert np.array_equal(threaded.get_state(full=True), pool.get_state(full=True))
            threaded.close()
        runner.close()
        pool.close()
    return rows, extra_benches(name, model, sites, args)


def extra_benches(name, model, sites, args):
    n = 1024
    reps = 3 if args.quick else 10
    out = []
    with EnvPool(model, n, nthread=args.nthread, keyframe=0) as pool:
        pool.step(NSTEP)
        scratch = mujoco.MjData(model)
        rows = np.empty((n, pool.full_state_size))
        for frac in (0.1, 1.0):
            ids = np.sort(np.random.default_rng(1).choice(n, int(n * frac), replace=False))

            def loop():
                for i in ids:
                    mujoco.mj_resetDataKeyframe(model, scratch, 0)
                    mujoco.mj_getState(model, scratch, rows[i], INTEG)

            t_pool = best_ms(lambda: pool.reset(ids, keyframe=0), reps)
            t_loop = best_ms(loop, reps)
            out.append((name, f'reset {int(frac * 100)}% of {n}', t_pool, t_loop))

        pool.step(NSTEP, ctrl=model.key_ctrl[0] + 0.1 * np.random.default_rng(2)
                  .standard_normal((n, model.nu)))
        full = pool.get_state(full=True)
        sids = [model.site(s).id for s in sites]
        jacp = np.empty((n, len(sids), 3, model.nv))
        jacr = np.empty_like(jacp)

        def per_query():
            for i in range(n):
                for k, sid in enumerate(sids):
                    mujoco.mj_setState(model, scratch, full[i], INTEG)
                    mujoco.mj_kinematics(model, scratch)
                    mujoco.mj_comPos(model, scratch)
                    mujoco.mj_jacSite(model, scratch, jacp[i, k], jacr[i, k], sid)

        def per_env():
            for i in range(n):
                mujoco.mj_setState(model, scratch, full[i], INTEG)
                mujoco.mj_kinematics(model, scratch)
                mujoco.mj_comPos(model, scratch)
                for k, sid in enumerate(sids):
                    mujoco.mj_jacSite(model, scratch, jacp[i, k], jacr[i, k], sid)

        t_pool = best_ms(lambda: pool.site_jacobians(sites), reps)
        out.append((name, f'jacobians {n}x{len(sids)} vs per-query loop', t_pool,
                    best_ms(per_query, reps)))
        out.append((name, f'jacobians {n}x{len(sids)} vs per-env loop', t_pool,
                    best_ms(per_env, reps)))
        check_p, _ = pool.site_jacobians(sites, env_ids=[n - 1])
        assert np.array_equal(check_p[0], jacp[n - 1]), 'Jacobian mismatch'
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='short run, < 60 s')
    parser.add_argument('--nthread', type=int, default=os.cpu_count() or 1)
    parser.add_argument('--models', default='panda,go1')
    args = parser.parse_args()
    args.sizes = [16, 256, 1024]
    cores = args.nthread
    print(f'EnvPool benchmark: nthread={cores} (os.cpu_count()={os.cpu_count()}), '
          f'{NSTEP} steps per call, load average {os.getloadavg()[0]:.2f}, '
          f'mujoco {mujoco.__version__}{" (quick)" if args.quick else ""}')
    t_start = time.perf_counter()
    step_rows, other_rows = [], []
    for name in args.models.split(','):
        steps, others = bench_model(name, args)
        step_rows += steps
        other_rows += others

    print()
    print(f'{"model":6} {"N":>5} {"engine":>7} {"bare/s":>9} {"pool/s":>9} {"cpu/wall":>8} '
          f'{"threads/s":>9} {"rollout/s":>9} {"cpu/wall":>8} {"pool/bare":>9} '
          f'{"/(0.9*cores)":>12} {"pool/rollout":>12} {"thr/rollout":>11} {"cpu-eff":>7} '
          f'{"thr-eff":>7} {"p/r cpu":>7}')
    for name, n, engine, b, p, p_cpu, t, r, r_cpu, eff, t_eff, r_eff in step_rows:
        print(f'{name:6} {n:5d} {engine:>7} {b:9.0f} {p:9.0f} {p_cpu:8.2f} {t:9.0f} '
              f'{r:9.0f} {r_cpu:8.2f} {p / b:9.2f} {p / b / (0.9 * cores):12.2f} '
              f'{p / r:12.2f} {t / r:11.2f} {eff:7.2f} {t_eff:7.2f} {r_eff:7.2f}')
    print('goals: pool/bare >= 0.9 x cores (the /(0.9*cores) column >= 1.0), '
          'pool/rollout >= 1.0')
    print('engine: what EnvPool chose (engine=\'auto\'); threads/s, thr/rollout and thr-eff are '
          'the same pool on engine=\'threads\', measured in the same interleaved rounds')
    print('cpu-eff: bare CPU seconds / pool CPU seconds for the same work (1.0 = no '
          'threading or bookkeeping overhead; independent of how busy the machine is); p/r cpu: '
          'rollout CPU seconds / pool CPU seconds for the same work, likewise')
    if BUSY and min(BUSY) < 0.9:
        print(f'WARNING: other processes held the CPUs (the 1-thread baseline got as little '
              f'as {min(BUSY):.2f} of a core, load average now {os.getloadavg()[0]:.2f}); '
              f'the throughput ratios above measure that load, cpu-eff does not')
    print()
    print(f'{"model":6} {"operation":40} {"pool ms":>9} {"loop ms":>9} {"speed-up":>9}')
    for name, label, t_pool, t_loop in other_rows:
        print(f'{name:6} {label:40} {t_pool:9.2f} {t_loop:9.2f} {t_loop / t_pool:9.1f}')
    print(f'\ntotal {time.perf_counter() - t_start:.1f} s')


if __name__ == '__main__':
    main()
