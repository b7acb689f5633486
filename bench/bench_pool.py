"""EnvPool throughput against the two things a user would otherwise write.

Run: ``python bench/bench_pool.py [--quick] [--nthread N] [--no-ray]`` (``--quick`` ~1-2 min).

Every ratio is measured in the same run on the same machine, interleaving the contenders and
keeping the best of several repetitions, because on a shared box other processes steal CPU
and a single timing says more about the neighbours than about the code. The ``cpu/wall``
column shows how many cores the pool actually got: a ratio short of the goal with cpu/wall
near 1.0 means the second core was busy elsewhere, not that the threads serialised.

Contenders:
  bare     one MjData, Python loop of ``mj_step`` over the same N states (restored and saved
           with mj_setState/mj_getState around each env's 10 steps): the serial baseline
  pool     ``EnvPool.step(10, ctrl)`` over N environments, nthread threads, default engine
           ('auto': ``mujoco.batch.Batch`` on MuJoCo >= 4.0, ``mjbatch`` on the MuJoCo 3.x it
           was built for, else the thread engine)
  threads  the same pool forced onto its own worker threads (``engine='threads'``), so the
           engine choice is shown by measurement in the same run (omitted when ``pool``
           already runs on threads)
  rollout  persistent ``mujoco.rollout.Rollout(nthread)`` doing the same 10 steps for N states
           (it also returns all 10 intermediate states and resets the solver warm start)
  reset    ``EnvPool.reset(ids, keyframe)`` vs a loop of ``mj_resetDataKeyframe`` +
           ``mj_getState`` per environment
  batch    ``mujoco.batch.Batch`` used directly for the same steps (controls written into
           its bound ``ctrl``, ``step``): what the pool's own bookkeeping costs on top
  mjbatch  the public ``mjbatch`` library doing the same, when it is installed for this
           MuJoCo (otherwise the run says why it was skipped); ``make bench-mjbatch`` runs
           this benchmark in a venv with the MuJoCo it pins (3.14.0), where the pool's batch
           engine drives mjbatch: the pool's own bookkeeping on top of it
  reset    ``EnvPool.reset(ids, keyframe)`` vs a loop of ``mj_resetDataKeyframe`` +
           ``mj_getState`` per environment, sparse (10% of 1024) and full (1024, 4096)
  jac      ``EnvPool.site_jacobians`` / ``body_jacobians`` for 1024 and 4096 envs x 4 vs a
           loop doing ``mj_setState`` + ``mj_kinematics`` + ``mj_comPos`` + ``mj_jacSite``
           per query (and, fairer, per environment); the pool runs that same loop compiled
           (the run says whether it was built)
  hfield   ``EnvPool.hfield_heights`` for 4096 Go1s on a height field, 16 points each in the
           trunk's yaw frame, vs a per-environment loop (mj_setState + mj_kinematics + the
           same bilinear lookup for one environment)
  ray      ``RayPool`` on a local two-node ``ray.cluster_utils.Cluster`` (one CPU per node,
           one shard each) vs the in-process EnvPool on the same two cores, 1024 Panda x 100
           steps per call, plus the fixed cost of one call touching both shards
"""

import argparse
import importlib.metadata
import importlib.util
import os
import sys
import time

import mujoco
from mujoco import rollout
import numpy as np

if importlib.util.find_spec('mujoco_hal_ros') is None:   # not installed: the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros import menagerie  # noqa: E402
from mujoco_hal_ros.pool import (
    EnvPool,  # noqa: E402
    hfield as hf,  # noqa: E402
    jacobian,  # noqa: E402
)

try:
    from mujoco import batch as mjb
except ImportError:  # mujoco 3.x
    mjb = None

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
        raw = None
        if mjb is not None:
            raw = mjb.Batch(model, n, args.nthread)
            raw.state[:] = pool.get_state(full=True)
            raw_ctrl = raw.bind('ctrl')

            def raw_batch():
                for _ in range(calls):
                    raw_ctrl[:] = ctrl
                    raw.step(None, NSTEP)
            contenders['batch'] = raw_batch
        mjbatch_run = mjbatch_contender(model, n, args.nthread, pool.get_state(full=True),
                                        ctrl, calls)
        if mjbatch_run is not None:
            contenders['mjbatch'] = mjbatch_run
        wall, cpu = interleaved(contenders, ROUNDS)
        if threaded is None:  # the pool is the thread engine: one measurement serves both
            wall['threads'], cpu['threads'] = wall['pool'], cpu['pool']
        work = calls * n * NSTEP                  # per round
        BUSY.append(cpu['bare'] / wall['bare'])
        rows.append((name, n, engine, work / wall['bare'], work / wall['pool'],
                     cpu['pool'] / wall['pool'], work / wall['threads'],
                     work / wall['rollout'], cpu['rollout'] / wall['rollout'],
                     cpu['bare'] / cpu['pool'], cpu['bare'] / cpu['threads'],
                     cpu['rollout'] / cpu['pool'],
                     wall['batch'] / wall['pool'] if raw is not None else float('nan'),
                     wall['mjbatch'] / wall['pool'] if 'mjbatch' in wall else float('nan')))
        if raw is not None:
            assert np.array_equal(raw.state, pool.get_state(full=True)), 'Batch mismatch'
        if mjbatch_run is not None:
            assert np.array_equal(mjbatch_run.state, pool.get_state(full=True)), \
                'mjbatch mismatch'

        # every contender stepped the same trajectory: both engines must agree bit for bit
        assert np.array_equal(pool.get_state(), serial_rows[:, pool.layout.physics_columns])
        if threaded is not None:
            assert np.array_equal(threaded.get_state(full=True), pool.get_state(full=True))
            threaded.close()
        runner.close()
        pool.close()
    return rows, extra_benches(name, model, sites, args)


MJBATCH_NOTE = 'not measured yet'


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return '?'


def mjbatch_contender(model, n, nthread, rows, ctrl, calls):
    """The public ``mjbatch`` library doing the same steps, or None (``MJBATCH_NOTE`` says
    why): its only release so far pins another MuJoCo than this one."""
    global MJBATCH_NOTE
    try:
        import mjbatch
    except ImportError as exc:
        MJBATCH_NOTE = (f'skipped: not importable here ({exc}); mjbatch 0.1.4, the newest on '
                        f'PyPI, requires mujoco==3.14.0 and this is mujoco {mujoco.__version__}'
                        f', so it cannot run on the same MuJoCo here: `make bench-mjbatch` '
                        f'runs this benchmark on mujoco 3.14.0 with it')
        return None
    try:
        batch = mjbatch.Batch(model, num_sims=n, num_threads=nthread)
        state = batch.bind('state')          # mjSTATE_INTEGRATION rows, as the pool keeps
        state[:] = rows
        bound_ctrl = batch.bind('ctrl')
    except Exception as exc:  # noqa: BLE001 - an API this bench does not know: say so
        MJBATCH_NOTE = f'skipped: mjbatch {_version("mjbatch")} failed: {exc}'
        return None
    MJBATCH_NOTE = (f'mjbatch {_version("mjbatch")} measured on mujoco '
                    f'{mujoco.__version__}, final states compared with the pool bit for bit')

    def run():
        for _ in range(calls):
            bound_ctrl[:] = ctrl
            batch.step(nstep=NSTEP)
    run.state = state
    return run


def extra_benches(name, model, sites, args):
    reps = 3 if args.quick else 10
    out = []
    scratch = mujoco.MjData(model)
    for n in (1024, 4096):
        with EnvPool(model, n, nthread=args.nthread, keyframe=0) as pool:
            pool.step(NSTEP)
            rows = np.empty((n, pool.full_state_size))
            for frac in ((0.1, 1.0) if n == 1024 else (1.0,)):
                ids = np.sort(np.random.default_rng(1).choice(n, int(n * frac), replace=False))

                def loop():
                    for i in ids:
                        mujoco.mj_resetDataKeyframe(model, scratch, 0)
                        mujoco.mj_getState(model, scratch, rows[i], INTEG)

                t_pool = best_ms(lambda: pool.reset(ids, keyframe=0), reps)
                t_loop = best_ms(loop, reps)
                out.append((name, f'reset {int(frac * 100)}% of {n}', t_pool, t_loop))
            out += jacobian_benches(name, model, sites, pool, n, reps)
    return out


def jacobian_benches(name, model, sites, pool, n, reps):
    scratch = mujoco.MjData(model)
    pool.step(NSTEP, ctrl=model.key_ctrl[0] + 0.1 * np.random.default_rng(2)
              .standard_normal((n, model.nu)))
    full = pool.get_state(full=True)
    sids = [model.site(s).id for s in sites]
    bodies = [int(model.site_bodyid[s]) for s in sids]
    jacp = np.empty((n, len(sids), 3, model.nv))
    jacr = np.empty_like(jacp)
    out = []

    def per_query():
        for i in range(n):
            for k, sid in enumerate(sids):
                mujoco.mj_setState(model, scratch, full[i], INTEG)
                mujoco.mj_kinematics(model, scratch)
                mujoco.mj_comPos(model, scratch)
                mujoco.mj_jacSite(model, scratch, jacp[i, k], jacr[i, k], sid)

    def per_env(jac_fn, objs):
        def run():
            for i in range(n):
                mujoco.mj_setState(model, scratch, full[i], INTEG)
                mujoco.mj_kinematics(model, scratch)
                mujoco.mj_comPos(model, scratch)
                for k, obj in enumerate(objs):
                    jac_fn(model, scratch, jacp[i, k], jacr[i, k], obj)
        return run

    t_pool = best_ms(lambda: pool.site_jacobians(sites), reps)
    if n == 1024:
        out.append((name, f'site jacobians {n}x{len(sids)} vs per-query loop', t_pool,
                    best_ms(per_query, reps)))
    out.append((name, f'site jacobians {n}x{len(sids)} vs per-env loop', t_pool,
                best_ms(per_env(mujoco.mj_jacSite, sids), reps)))
    check_p, _ = pool.site_jacobians(sites, env_ids=[n - 1])
    assert np.allclose(check_p[0], jacp[n - 1], rtol=0, atol=1e-12), 'Jacobian mismatch'
    t_pool = best_ms(lambda: pool.body_jacobians(bodies), reps)
    out.append((name, f'body jacobians {n}x{len(bodies)} vs per-env loop', t_pool,
                best_ms(per_env(mujoco.mj_jacBody, bodies), reps)))
    check_p, _ = pool.body_jacobians(bodies, env_ids=[n - 1])
    assert np.allclose(check_p[0], jacp[n - 1], rtol=0, atol=1e-12), 'Jacobian mismatch'
    return out


def hfield_bench(args):
    """4096 Go1s over a 64x64 height field, 16 points each around the trunk (yaw frame)."""
    path = menagerie.model_path('go1')
    if path is None:
        return []
    spec = mujoco.MjSpec.from_file(path)
    rng = np.random.default_rng(5)
    spec.add_hfield(name='terrain', nrow=64, ncol=64, size=[5.0, 5.0, 0.3, 0.1],
                    userdata=list(rng.uniform(0, 1, 64 * 64)))
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname='terrain',
                            pos=[0, 0, -0.2], contype=0, conaffinity=0)
    model = spec.compile()
    n = 4096
    reps = 3 if args.quick else 10
    gx, gy = np.meshgrid(np.linspace(-0.4, 0.4, 4), np.linspace(-0.3, 0.3, 4))
    points = np.stack([gx.ravel(), gy.ravel()], axis=1)
    hid = model.hfield('terrain').id
    trunk = model.body('trunk').id
    geom = hf.geom_of(model, hid)
    heights, half = hf.grid(model, hid)
    with EnvPool(model, n, nthread=args.nthread, keyframe=0) as pool:
        state = pool.get_state()
        state[:, 1:3] = rng.uniform(-3, 3, (n, 2))     # trunks spread over the field
        pool.set_state(state)
        full = pool.get_state(full=True)
        scratch = mujoco.MjData(model)
        out = np.empty((n, len(points)))

        def loop():
            for i in range(n):
                mujoco.mj_setState(model, scratch, full[i], INTEG)
                mujoco.mj_kinematics(model, scratch)
                xy = hf.to_world_xy(points, 'yaw', scratch.xpos[trunk][None],
                                    scratch.xmat[trunk][None])
                out[i] = hf.sample(heights, half, xy, scratch.geom_xpos[geom][None],
                                   scratch.geom_xmat[geom][None])[0]

        t_pool = best_ms(lambda: pool.hfield_heights('terrain', points, 'yaw', 'trunk'), reps)
        t_loop = best_ms(loop, reps)
        got = pool.hfield_heights('terrain', points, 'yaw', 'trunk')
        assert np.allclose(got, out, rtol=0, atol=1e-12, equal_nan=True), 'hfield mismatch'
    return [('go1', f'hfield {n} x {len(points)} points vs per-env loop', t_pool, t_loop)]


def ray_bench(args):
    """RayPool on a local 2-node cluster vs EnvPool on the same cores: Panda 1024 x 100."""
    try:
        import ray
        from ray.cluster_utils import Cluster

        from mujoco_hal_ros.pool import RayPool
    except ImportError as exc:
        print(f'ray: skipped, import ray failed ({exc})')
        return None
    path = menagerie.model_path('panda')
    if path is None:
        print('ray: skipped, Menagerie Panda not installed')
        return None
    os.environ.setdefault('RAY_USAGE_STATS_ENABLED', '0')
    model = mujoco.MjModel.from_xml_path(path)
    n, nstep = 1024, 100
    reps = 3 if args.quick else 5
    store = 200 * 2 ** 20
    cluster = Cluster(initialize_head=True, head_node_args={
        'num_cpus': 0, 'object_store_memory': store, 'include_dashboard': False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, object_store_memory=store)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        ctrl = model.key_ctrl[0] + 0.02 * np.random.default_rng(0).standard_normal(
            (n, model.nu))
        with RayPool(model, n, nshard=2, nthread=1, keyframe=0) as rp, \
                EnvPool(model, n, nthread=args.nthread, keyframe=0) as ep:
            wall, _ = interleaved({'in-process': lambda: ep.step(nstep, ctrl=ctrl),
                                   'ray': lambda: rp.step(nstep, ctrl=ctrl)}, reps)
            same = np.array_equal(rp.get_state(full=True), ep.get_state(full=True))
            both = [0, n - 1]
            small, _ = interleaved({'in-process': lambda: ep.step(1, env_ids=both),
                                    'ray': lambda: rp.step(1, env_ids=both)}, reps * 5)
            nodes = len(set(rp.shard_nodes))
    finally:
        ray.shutdown()
        cluster.shutdown()
    return (n, nstep, wall['in-process'], wall['ray'], same, nodes,
            (small['ray'] - small['in-process']) * 1e3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='short run, < 60 s')
    parser.add_argument('--nthread', type=int, default=os.cpu_count() or 1)
    parser.add_argument('--models', default='panda,go1')
    parser.add_argument('--no-ray', action='store_true', help='skip the RayPool comparison')
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
    other_rows += hfield_bench(args)
    ray_row = None if args.no_ray else ray_bench(args)

    print()
    print(f'{"model":6} {"N":>5} {"engine":>7} {"bare/s":>9} {"pool/s":>9} {"cpu/wall":>8} '
          f'{"threads/s":>9} {"rollout/s":>9} {"cpu/wall":>8} {"pool/bare":>9} '
          f'{"/(0.9*cores)":>12} {"pool/rollout":>12} {"thr/rollout":>11} {"cpu-eff":>7} '
          f'{"thr-eff":>7} {"p/r cpu":>7}')
    for name, n, engine, b, p, p_cpu, t, r, r_cpu, eff, t_eff, r_eff, _, _ in step_rows:
        print(f'{name:6} {n:5d} {engine:>7} {b:9.0f} {p:9.0f} {p_cpu:8.2f} {t:9.0f} '
              f'{r:9.0f} {r_cpu:8.2f} {p / b:9.2f} {p / b / (0.9 * cores):12.2f} '
              f'{p / r:12.2f} {t / r:11.2f} {eff:7.2f} {t_eff:7.2f} {r_eff:7.2f}')
    print('goals: pool/bare >= 0.9 x cores (the /(0.9*cores) column >= 1.0), '
          'pool/rollout >= 1.0')
    print()
    print(f'{"model":6} {"N":>5} {"pool/batch":>10} {"pool/mjbatch":>12}   (throughput '
          f'ratios, same steps; goals >= 0.97 and >= 1.0)')
    for row in step_rows:
        print(f'{row[0]:6} {row[1]:5d} {row[-2]:10.3f} {row[-1]:12.3f}')
    print(f'mjbatch: {MJBATCH_NOTE}')
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
    print('goals: jacobians 1024x4 >= 10x the per-env loop, full reset >= 15x the loop')
    why = jacobian.why_unavailable()
    print('jacobians: ' + ('the compiled loop (src/query_kernels.c)' if why is None
                           else f'the Python loop ({why})'))
    if ray_row is not None:
        n, nstep, t_local, t_ray, same, nodes, overhead = ray_row
        print(f'\nray: {n} Panda x {nstep} steps per call, 2 shards on {nodes} nodes: '
              f'in-process {t_local * 1e3:.0f} ms, RayPool {t_ray * 1e3:.0f} ms, '
              f'in-process/ray = {t_local / t_ray:.2f} (goal >= 0.8); per-call overhead '
              f'{overhead:.2f} ms (one step of one env on each shard); final states '
              f'identical: {same}')
    print(f'\ntotal {time.perf_counter() - t_start:.1f} s')


if __name__ == '__main__':
    main()
