"""One owner per piece of state: no module reaches into another module's underscore names.

An AST scan over ``mujoco_hal_ros/``: an attribute access ``obj._name`` (not a dunder) is
fine only where the same file defines ``_name`` (``self._name = ...``, ``cls._name = ...``,
``def _name``, a class or module attribute, a ``__slots__`` entry), and ``from x import
_name`` is never fine. A name defined in the file may still be another object's (two
classes sharing a private name): the scan cannot see types, so it errs on the side of
passing such a file.
"""

import ast
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
PACKAGE = os.path.join(ROOT, 'mujoco_hal_ros')
# Underscore names that are public API of the standard library, and the MuJoCo bindings'
# raw struct pointer (the one way to hand an mjModel / mjData to our C loop).
PUBLIC = {'_replace', '_asdict', '_fields', '_make', '_field_defaults', '_exit',
          '_getframe', '_address'}


def _private(name):
    return name.startswith('_') and not (name.startswith('__') and name.endswith('__'))


def _targets(node):
    if isinstance(node, (ast.Assign,)):
        return node.targets
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _flatten(target):
    if isinstance(target, (ast.Tuple, ast.List)):
        for t in target.elts:
            yield from _flatten(t)
    elif isinstance(target, ast.Starred):
        yield from _flatten(target.value)
    else:
        yield target


def defined_names(tree):
    """Underscore names the file itself defines."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        for target in (t for tt in _targets(node) for t in _flatten(tt)):
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                    and target.value.id in ('self', 'cls'):
                names.add(target.attr)
            elif isinstance(target, ast.Name):
                names.add(target.id)
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == '__slots__' for t in node.targets):
            names.update(e.value for e in ast.walk(node.value)   # set through __slots__
                         if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return {n for n in names if _private(n)}


def violations(path):
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read(), path)
    own = defined_names(tree)
    rel = os.path.relpath(path, ROOT)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) \
                and node.attr not in own and node.attr not in PUBLIC:
            out.append(f'{rel}:{node.lineno}: .{node.attr} is not defined in this file')
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    out.append(f'{rel}:{node.lineno}: imports {alias.name} from '
                               f'{"." * node.level}{node.module or ""}')
    return out


def package_files():
    for base, _dirs, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith('.py'):
                yield os.path.join(base, name)


def test_no_module_reads_another_modules_private_names():
    found = [v for path in package_files() for v in violations(path)]
    assert not found, f'{len(found)} reach(es) into private names of other modules:\n' + \
        '\n'.join(found)


def test_the_scan_finds_a_reach_in(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text('from .stepper import _Closed\n\n\n'
                   'class A:\n    def __init__(self):\n        self._mine = 1\n\n'
                   '    def f(self, other):\n        return other._theirs, self._mine\n')
    found = violations(str(bad))
    assert len(found) == 2, found
    assert any('_Closed' in v for v in found) and any('._theirs' in v for v in found)


def test_nothing_outside_sim_touches_the_stepper():
    """One door to the physics thread: code outside ``sim/`` goes through the device
    (``on_physics``, ``snapshot``, ``paused``), never ``<anything>.stepper``."""
    found = []
    for path in package_files():
        if os.path.relpath(path, PACKAGE).split(os.sep)[0] == 'sim':
            continue
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        found += [f'{os.path.relpath(path, ROOT)}:{node.lineno}' for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and node.attr == 'stepper']
    assert not found, f'the stepper reached from outside sim/: {found}'


def test_a_thread_only_stepper_call_from_another_thread_fails_in_debug_runs(bench):
    """The check that keeps the one door the only one (on in the test suite)."""
    from mujoco_hal_ros.sim import stepper
    assert stepper.CHECK_THREADS, 'the suite runs with MUJOCO_HAL_ROS_CHECK_THREADS=1'
    with pytest.raises(RuntimeError, match='physics thread only'):
        bench.stepper.hold_now()
    assert bench.on_physics(lambda s: s.hold_now() or 'held') == 'held'


def test_a_closure_gets_the_physics_door_and_cannot_keep_it(bench):
    """Closures get ``sim.physics.Physics`` (``sim.door.Door``), not the stepper: every
    name the protocol lists is there, the setpoints are read-only (``set_setpoint`` writes
    them), and the object refuses use from another thread and after the closure returned."""
    import threading

    from mujoco_hal_ros.sim.door import Door
    from mujoco_hal_ros.sim.physics import Physics
    from mujoco_hal_ros.sim.stepper import Stepper
    listed = {n for n in vars(Physics) if not n.startswith('_')}
    assert len(listed) > 20 and listed <= set(dir(Door)), listed - set(dir(Door))
    assert not isinstance(bench.on_physics(lambda p: p), Stepper)
    kept = bench.on_physics(lambda p: p)
    with pytest.raises(RuntimeError, match='closure that has returned'):
        _ = kept.data
    with pytest.raises(ValueError, match='read-only'):
        bench.on_physics(lambda p: p.setpoint.__setitem__(0, 0.3))
    assert bench.on_physics(lambda p: p.set_setpoint(0.3, [0]) or p.setpoint[0]) == 0.3
    assert bench.on_physics(lambda p: p.publish_snapshot().setpoint[0]) == 0.3
    seen = []

    def from_another_thread(p):
        def use():
            try:
                p.hold_now()
                seen.append('used')
            except RuntimeError as exc:
                seen.append(str(exc))
        t = threading.Thread(target=use)
        t.start()
        t.join()
        return p.setpoint[0]
    assert bench.on_physics(from_another_thread) == 0.3      # nothing was held meanwhile
    assert len(seen) == 1 and 'physics thread' in seen[0], seen


# The modules outside sim/ whose closures run on the physics thread: they write the live
# state only through the door's methods (``Physics.set_ctrl``, ``set_setpoint``,
# ``set_state``, ``set_joints``, ``set_timestep``...), never by assignment.
CLOSURE_MODULES = ('tasks/device_runner.py', 'world/runtime.py', 'motion/runner.py',
                   'motion/joint_trajectory.py', 'mobile/base.py',
                   'sensors/device_sensors.py')
LIVE = {'data', 'setpoint', 'opt', 'ctrl', 'qpos', 'qvel', 'act', 'warning', 'mocap_pos',
        'mocap_quat', 'xfrc_applied', 'qfrc_applied'}


def state_writes(source, where):
    """``where:line`` of each assignment into an attribute chain through a live-state name
    (``p.data.qpos[...] = ``, ``d.ctrl[:] = ``, ``p.setpoint[...] = ``, ``m.opt.x = ``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AugAssign) else []
        for target in targets:
            chain, inner = [], target
            while isinstance(inner, (ast.Attribute, ast.Subscript)):
                if isinstance(inner, ast.Attribute):
                    chain.append(inner.attr)
                inner = inner.value
            if isinstance(target, ast.Subscript) and LIVE & set(chain) or \
                    isinstance(target, ast.Attribute) and LIVE & set(chain[1:]) or \
                    isinstance(target, ast.Attribute) and chain[0] == 'time' and \
                    isinstance(inner, ast.Name) and inner.id in ('d', 'data'):
                found.append(f'{where}:{node.lineno}')
    return found


def test_physics_closures_outside_sim_write_state_only_through_the_door():
    found = []
    for rel in CLOSURE_MODULES:
        with open(os.path.join(PACKAGE, rel)) as f:
            found += state_writes(f.read(), rel)
    assert not found, f'live state written by assignment, not through Physics: {found}'
    # the scan finds what it is for
    assert len(state_writes('def f(s, d):\n    s.data.qpos[0] = 1\n    d.ctrl[:] = 0\n'
                            '    s.setpoint[1] = 2\n    s.model.opt.timestep = 3\n'
                            '    d.time = 4\n    self.x = 5\n', 'x')) == 5
