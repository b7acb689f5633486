"""Shared fixtures for the core tests: devices that are always closed, model paths, helpers.

Every ``Device`` starts a stepping thread, so tests get devices only through ``open_device``
(a factory fixture that closes whatever it opened). Deterministic tests open them paused at
real-time factor 0 and advance with ``step(n)``.
"""

import os
import textwrap
import types

import numpy as np
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.motion.move import action_for
from mujoco_hal_ros.sim.device import Device

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
TEST_MODELS = os.path.join(ROOT, 'test', 'models')
BENCH_YAML = os.path.join(ROOT, 'config', 'bench_arm.yaml')
BENCH_XML = menagerie.bench_arm_path()
BENCH_ENV = {'OPENHAL_BENCH_ARM': BENCH_XML}


def model_file(name):
    return os.path.join(TEST_MODELS, f'{name}.xml')


@pytest.fixture
def open_device():
    """Factory: ``open_device(device_file, model=..., ...)``; closes every device after."""
    opened = []

    def make(device_file=None, **kw):
        if isinstance(device_file, str) and device_file == BENCH_YAML:
            kw.setdefault('environ', BENCH_ENV)
        kw.setdefault('real_time_factor', 0)
        dev = Device(device_file, **kw)
        opened.append(dev)
        return dev
    yield make
    for dev in opened:
        dev.close()


@pytest.fixture
def bench(open_device):
    """The built-in bench arm from its device file, paused at rtf 0."""
    return open_device(BENCH_YAML, start_paused=True)


@pytest.fixture
def write_yaml(tmp_path):
    """Write a device file from (dedented) text; returns its path."""
    count = [0]

    def write(text, name=None):
        count[0] += 1
        path = tmp_path / (name or f'device{count[0]}.yaml')
        path.write_text(textwrap.dedent(text))
        return str(path)
    return write


def bench_doc(**changes):
    """The bench arm's device file as a dict (what ``Device`` also accepts), with changes:
    ``write__pan_goal={...}`` replaces write.pan_goal."""
    import yaml
    with open(BENCH_YAML, encoding='utf-8') as handle:
        doc = yaml.safe_load(handle)
    for key, value in changes.items():
        parts = key.split('__')
        node = doc
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        if value is None:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return doc


def menagerie_path(name):
    path = menagerie.model_path(name)
    if path is None:
        pytest.skip(f'Menagerie model {name} is not installed')
    return path


def run_until(dev, predicate, max_steps=20000, chunk=10):
    """Step a paused device until ``predicate()`` holds; returns the steps taken."""
    taken = 0
    while not predicate():
        if taken >= max_steps:
            raise AssertionError(f'condition not met within {max_steps} steps')
        dev.step(chunk)
        taken += chunk
    return taken


def trace(dev, steps, actuators=None):
    """Step one at a time; (times, setpoints, qpos) arrays from each snapshot."""
    times, sps, qs = [], [], []
    for _ in range(steps):
        dev.step(1)
        snap = dev.snapshot
        times.append(snap.time)
        sps.append(snap.setpoint if actuators is None else snap.setpoint[actuators])
        qs.append(snap.qpos.copy())
    return np.array(times), np.array(sps), np.array(qs)


def random_reachable(dev, act_name, rng, count, margin=0.1, site=None, body=None):
    """FK targets of random joint configurations inside the move's limits (shrunk by
    ``margin`` of each span), as world points; uses a private MjData."""
    import mujoco
    act = action_for(dev.layout, None) if act_name is None else dev.action(act_name)
    model = dev.model
    data = mujoco.MjData(model)
    data.qpos[:] = dev.snapshot.qpos
    goals = [dev._goal_for_joint(j, act) for j in act.joints]
    points = []
    for _ in range(count):
        for j, g in zip(act.joints, goals, strict=True):
            lo = max(g.native_lo, g.to_native(g.min))
            hi = min(g.native_hi, g.to_native(g.max))
            span = hi - lo
            jid = dev.layout.joints.index(j)
            data.qpos[model.jnt_qposadr[jid]] = rng.uniform(lo + margin * span,
                                                            hi - margin * span)
        mujoco.mj_kinematics(model, data)
        if site or act.site:
            sid = dev.layout.sites.index(site or act.site)
            points.append(data.site_xpos[sid].copy())
        else:
            bid = dev.layout.bodies.index(body or act.body)
            points.append(data.xpos[bid].copy())
    return points


@pytest.fixture(scope='session')
def h():
    """Helpers and paths for the core device tests (conftest is not importable by name)."""
    return types.SimpleNamespace(
        ROOT=ROOT, BENCH_YAML=BENCH_YAML, BENCH_XML=BENCH_XML, BENCH_ENV=BENCH_ENV,
        model_file=model_file, bench_doc=bench_doc, menagerie_path=menagerie_path,
        run_until=run_until, trace=trace, random_reachable=random_reachable)
