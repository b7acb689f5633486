"""Scene edits through MjSpec: spawn and delete entities, compiled into a new model.

The running model is never edited in place: an edit is made on a copy of the scene's spec
and compiled; a request that does not compile (a name taken twice, a broken file, a body
an actuator still needs) is refused with MODEL_ERROR and the scene keeps its old spec and
model. ``carry_state`` then moves the state of everything that stays over into the new
model by name (joints, actuators, mocap bodies), so a spawn does not reset the robot.

``device.swap.replace_model`` (``sim.swap``) swaps the running device onto the new
model; ``renumbered`` and ``lost_channels`` are what it checks first: whether what stays
keeps its indices (then a running move goes on untouched), and whether an edit would take
a device channel away.
"""

from collections.abc import Iterable
import math
import os
import re
from typing import Any

import mujoco
import numpy as np

from ..errors import DeviceError, InvalidArgument, ModelError, shorten, UnknownName, UNSTABLE
from . import bounds

MAX_RESOURCE = 10_000_000      # characters of an MJCF string


def load_model(path: str) -> mujoco.MjModel:
    """Compile an MJCF file, with an error that says what to check."""
    if not isinstance(path, str) or not path:
        raise ModelError(f'expected an MJCF path, got {path!r}')
    if not os.path.isfile(path):
        raise ModelError(f'model file not found: {path}; check the path (or the environment '
                         'variable the device file names)', where='model')
    try:
        return mujoco.MjModel.from_xml_path(path)
    except Exception as exc:  # noqa: BLE001 - MuJoCo raises ValueError and others
        raise ModelError(f'MuJoCo could not load {path}: {exc}', where='model') from None


# A spawned entity's name becomes a ROS name part and a TF frame id prefix
# (``<name>/<body>``): ROS name tokens, at most 256 characters; a namespace is such tokens
# joined by ``/``. ``../../x`` or ``a b`` would name frames no tool can address.
_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')


def _name(value: Any, where: str, tokens: int | None = 1) -> str:
    ok = isinstance(value, str) and 0 < len(value) <= 256
    parts = value.split('/') if ok else []
    if not ok or (tokens == 1 and len(parts) != 1) or \
            not all(_TOKEN.fullmatch(p) for p in parts):
        raise InvalidArgument(f'{shorten(value)} is not a valid ROS name', where=where,
                              allowed='letters, digits and _, not starting with a digit'
                              + (', tokens joined by /' if tokens != 1 else '')
                              + '; at most 256 characters')
    return value


def child_spec(resource: str) -> mujoco.MjSpec:
    """An MjSpec of an entity: an MJCF string (``<mujoco>...``) or the path of an MJCF
    file (a whole robot, with its meshes beside it)."""
    if not isinstance(resource, str) or not resource or len(resource) > MAX_RESOURCE:
        raise InvalidArgument('expected an MJCF string or file path', where='resource')
    try:
        if resource.lstrip().startswith('<'):
            return mujoco.MjSpec.from_string(resource)
        path = resource[len('file://'):] if resource.startswith('file://') else resource
        if not os.path.isfile(path):
            raise InvalidArgument(f'no file {shorten(path)}', where='resource',
                                  allowed='an MJCF string or an existing MJCF file')
        return mujoco.MjSpec.from_file(path)
    except InvalidArgument:
        raise
    except Exception as exc:  # noqa: BLE001 - MuJoCo's parser raises several types
        raise ModelError(f'MuJoCo could not read the entity: {exc}', where='resource') \
            from None


# An entity's home: ({joint: position}, {actuator: ctrl}) (entity_home)
Home = tuple[dict[str, float], dict[str, float]]


class Scene:
    """The spec the running model was compiled from, and edits that compile or change
    nothing."""

    def __init__(self, path: str | None = None, spec: mujoco.MjSpec | None = None):
        if spec is not None:
            self.spec = spec
            return
        try:
            self.spec = mujoco.MjSpec.from_file(path)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f'MuJoCo could not load {path}: {exc}', where='model') from None

    def compile(self) -> mujoco.MjModel:
        """The model of this scene's spec (MODEL_ERROR when it does not compile)."""
        return self._compile(self.spec, 'the scene')

    def load(self, resource: str, model: mujoco.MjModel | None = None
             ) -> tuple[mujoco.MjSpec, mujoco.MjModel]:
        """(spec, model) of a whole new world: an MJCF string or file path; ``model``: its
        compiled model already (the sandbox's), so it is only parsed here."""
        spec = child_spec(resource)
        return spec, model if model is not None else self._compile(spec, 'the world')

    def _compile(self, spec, what):
        try:
            return spec.compile()
        except Exception as exc:  # noqa: BLE001 - MuJoCo's compiler raises ValueError
            raise ModelError(f'{what} does not compile: {exc}; nothing was changed',
                             where='scene') from None

    def check_pose(self, name: Any, position: Any = (0, 0, 0), quaternion: Any = (1, 0, 0, 0),
                   namespace: str = '') -> tuple[str, np.ndarray, np.ndarray]:
        """(full name, position, unit quaternion) of a spawn, refused before any model is
        read: a name that is no ROS name or TF frame, or taken; a position outside the world
        box; a quaternion that is not a rotation (near-unit ones are normalized)."""
        name = _name(name, 'name')
        if namespace:
            name = f'{_name(namespace.strip("/"), "namespace", tokens=None)}/{name}'
        pos = bounds.position(position, 'position')
        quat = bounds.quaternion(quaternion, 'quaternion')
        prefix = f'{name}/'
        if any(b.name.startswith(prefix) for b in self.spec.bodies):
            raise InvalidArgument(f'an entity {name!r} exists already', where='name',
                                  allowed='a new name, or delete it first')
        return name, pos, quat

    def spawn(self, resource: str, name: Any, position: Any = (0, 0, 0),
              quaternion: Any = (1, 0, 0, 0), namespace: str = ''
              ) -> tuple[mujoco.MjSpec, mujoco.MjModel]:
        """(spec, model) with the entity's bodies attached at the pose, named
        ``<namespace>/<name>/<body>``; the scene is unchanged until ``commit``."""
        spec, model, _home = self.spawn_at_home(resource, name, position, quaternion,
                                                namespace)
        return spec, model

    def spawn_at_home(self, resource: str, name: Any, position: Any = (0, 0, 0),
                      quaternion: Any = (1, 0, 0, 0), namespace: str = ''
                      ) -> tuple[mujoco.MjSpec, mujoco.MjModel, Home]:
        """``spawn``, and the entity's home (``entity_home``) under its new names: where
        its joints and actuators start once swapped in, as the model alone would start."""
        name, pos, quat = self.check_pose(name, position, quaternion, namespace)
        child = child_spec(resource)
        home = entity_home(child, f'{name}/')
        spec = self.spec.copy()
        if not spec.keys:
            # A world without keyframes keeps none of the entity's either; MuJoCo said so
            # on stderr at every spawn ("Attach conflict ... nkey"), in the user's console.
            for key in list(child.keys):
                child.delete(key)
            child.nkey = 0          # <size nkey=...> (a saved model writes it) asks for them
        frame = spec.worldbody.add_frame(pos=pos, quat=quat)
        try:
            spec.attach(child, prefix=f'{name}/', frame=frame)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f'the entity cannot be attached: {exc}; nothing was changed',
                             where='scene') from None
        return spec, self._compile(spec, f'spawning {name!r}'), home

    def delete(self, name: str, brought: Iterable[str] | None = None
               ) -> tuple[mujoco.MjSpec, mujoco.MjModel]:
        """(spec, model) without body ``name`` and what hangs below it. Actuators and
        sensors go with it only when named ``<brought>/...`` (a spawned entity's own)."""
        bodies = [b.name for b in self.spec.bodies if b.name and b.name != 'world']
        if not isinstance(name, str) or name not in bodies:
            raise UnknownName('entity', name, bodies, where='name')
        spec = self.spec.copy()
        before = self._compile(self.spec.copy(), 'the scene')
        spec.delete(spec.body(name))
        model = self._compile(spec, f'deleting {name!r}')
        if lost_channels(before, model, brought):
            # MuJoCo drops what referred to the body; the device's channels would dangle.
            raise InvalidArgument(f'entity {name!r} carries actuators or sensors of the '
                                  'device; nothing was changed', where='name',
                                  allowed='an entity without actuators or sensors, or a '
                                  'spawned one by its name')
        return spec, model

    def commit(self, spec: mujoco.MjSpec) -> None:
        self.spec = spec


def entity_home(child: mujoco.MjSpec, prefix: str
                ) -> Home:
    """``({joint: position}, {actuator: ctrl})`` of an entity at its home (``keyframes.
    home_state`` of its model alone), its names prefixed: a spawn attaches bodies, not
    keyframes, and a robot left at qpos0 may start outside its joint ranges. Empty when
    the entity does not compile alone (the spawn then refuses it anyway)."""
    from ..sim.keyframes import home_state  # sim imports this module
    try:
        model = child.copy().compile()
    except Exception:  # noqa: BLE001 - MuJoCo's compiler raises several types
        return {}, {}
    joints, ctrl = home_state(model)
    return ({f'{prefix}{j}': q for j, q in joints.items()},
            {f'{prefix}{a}': c for a, c in ctrl.items()})


def put_at_home(old_model: mujoco.MjModel, new_model: mujoco.MjModel, new_data: mujoco.MjData,
                home: Home) -> None:
    """Stepper thread, in a swap: the joints and actuators that are new in ``new_model``
    (not in ``old_model``; every one of ``home`` when it is None, as after a reset) start
    where ``home`` (``entity_home``) puts them, then ``mj_forward``. What was there before
    keeps its carried-over state."""
    joints, ctrl = home or ({}, {})
    J, A = mujoco.mjtObj.mjOBJ_JOINT, mujoco.mjtObj.mjOBJ_ACTUATOR
    for name, q in joints.items():
        j = mujoco.mj_name2id(new_model, J, name)
        if j >= 0 and (old_model is None or mujoco.mj_name2id(old_model, J, name) < 0):
            new_data.qpos[new_model.jnt_qposadr[j]] = q
            new_data.qvel[new_model.jnt_dofadr[j]] = 0.0
    for name, c in ctrl.items():
        a = mujoco.mj_name2id(new_model, A, name)
        if a >= 0 and (old_model is None or mujoco.mj_name2id(old_model, A, name) < 0):
            new_data.ctrl[a] = c
    mujoco.mj_forward(new_model, new_data)


def entity_bodies(spec: mujoco.MjSpec, name: str) -> list[str]:
    """The bodies an entity spawned as ``name`` brought (``<name>/...``), top ones first."""
    prefix = f'{name}/'
    return [b.name for b in spec.bodies if b.name.startswith(prefix)]


def renumbered(old_model: mujoco.MjModel, new_model: mujoco.MjModel) -> bool:
    """Whether anything named in both models (joint, actuator, sensor, site, body, camera)
    sits at another index or address in the new one: then index-based state (plans,
    channels) cannot go on as it is."""
    Obj = mujoco.mjtObj
    for kind, n in ((Obj.mjOBJ_JOINT, 'njnt'), (Obj.mjOBJ_ACTUATOR, 'nu'),
                    (Obj.mjOBJ_SENSOR, 'nsensor'), (Obj.mjOBJ_SITE, 'nsite'),
                    (Obj.mjOBJ_BODY, 'nbody'), (Obj.mjOBJ_CAMERA, 'ncam')):
        new = _names(new_model, kind, getattr(new_model, n))
        for name, i in _names(old_model, kind, getattr(old_model, n)).items():
            if new.get(name, i) != i:
                return True
    for name, j in _names(old_model, Obj.mjOBJ_JOINT, old_model.njnt).items():
        k = mujoco.mj_name2id(new_model, Obj.mjOBJ_JOINT, name)
        if k >= 0 and (old_model.jnt_qposadr[j] != new_model.jnt_qposadr[k]
                       or old_model.jnt_dofadr[j] != new_model.jnt_dofadr[k]):
            return True
    for name, s in _names(old_model, Obj.mjOBJ_SENSOR, old_model.nsensor).items():
        k = mujoco.mj_name2id(new_model, Obj.mjOBJ_SENSOR, name)
        if k >= 0 and old_model.sensor_adr[s] != new_model.sensor_adr[k]:
            return True
    return False


def lost_channels(old_model: mujoco.MjModel, new_model: mujoco.MjModel,
                  brought: Iterable[str] | None = None
                  ) -> list[str]:
    """Names of actuators and sensors the old model has and the new one lacks (an unnamed
    one counts by number): what a spawn or delete must never take from the device, unless
    they are named ``<brought>/...`` (what a spawned entity brought goes with it)."""
    Obj = mujoco.mjtObj
    own = f'{brought}/' if brought else None
    lost = []
    for kind, n, what in ((Obj.mjOBJ_ACTUATOR, 'nu', 'actuator'),
                          (Obj.mjOBJ_SENSOR, 'nsensor', 'sensor')):
        old = _names(old_model, kind, getattr(old_model, n))
        new = _names(new_model, kind, getattr(new_model, n))
        lost += [f'{what} {name}' for name in old
                 if name not in new and not (own and name.startswith(own))]
        if getattr(old_model, n) - len(old) > getattr(new_model, n) - len(new):
            lost.append(f'an unnamed {what}')
    return lost


def _names(model, kind, n):
    return {mujoco.mj_id2name(model, kind, i): i for i in range(n)
            if mujoco.mj_id2name(model, kind, i)}


def carry_state(old_model: mujoco.MjModel, old_data: mujoco.MjData, new_model: mujoco.MjModel,
                new_data: mujoco.MjData) -> None:
    """Copy what both models share, by name, into ``new_data`` (then ``mj_forward``)."""
    J = mujoco.mjtObj.mjOBJ_JOINT
    old_j, new_j = _names(old_model, J, old_model.njnt), _names(new_model, J, new_model.njnt)
    nq = {0: 7, 1: 4, 2: 1, 3: 1}                # free, ball, slide, hinge
    nv = {0: 6, 1: 3, 2: 1, 3: 1}
    for name, j in old_j.items():
        k = new_j.get(name)
        if k is None or old_model.jnt_type[j] != new_model.jnt_type[k]:
            continue
        t = int(old_model.jnt_type[j])
        a, b = old_model.jnt_qposadr[j], new_model.jnt_qposadr[k]
        new_data.qpos[b:b + nq[t]] = old_data.qpos[a:a + nq[t]]
        a, b = old_model.jnt_dofadr[j], new_model.jnt_dofadr[k]
        new_data.qvel[b:b + nv[t]] = old_data.qvel[a:a + nv[t]]
    A = mujoco.mjtObj.mjOBJ_ACTUATOR
    new_a = _names(new_model, A, new_model.nu)
    for name, a in _names(old_model, A, old_model.nu).items():
        if name in new_a:
            new_data.ctrl[new_a[name]] = old_data.ctrl[a]
    B = mujoco.mjtObj.mjOBJ_BODY
    new_b = _names(new_model, B, new_model.nbody)
    for name, b in _names(old_model, B, old_model.nbody).items():
        m_old = old_model.body_mocapid[b]
        if m_old >= 0 and name in new_b and new_model.body_mocapid[new_b[name]] >= 0:
            m_new = new_model.body_mocapid[new_b[name]]
            new_data.mocap_pos[m_new] = old_data.mocap_pos[m_old]
            new_data.mocap_quat[m_new] = old_data.mocap_quat[m_old]
    new_data.time = old_data.time
    mujoco.mj_forward(new_model, new_data)


# --- the trial run: a new model is stepped before it replaces the running one -------------
TRIAL_STEPS = 1
ARENA_HEADROOM = 0.9      # a trial that fills more of the arena than this is refused
_W = mujoco.mjtWarning
# What a trial must not raise. INERTIA alone is MuJoCo's note on a near-singular mass
# matrix that it then handles; the arena and state warnings mean a scene that cannot run.
TRIAL_WARNINGS = {_W.mjWARN_CONTACTFULL: 'contacts overflowed the arena',
                  _W.mjWARN_CNSTRFULL: 'constraints overflowed the arena',
                  _W.mjWARN_BADQPOS: 'positions went non-finite',
                  _W.mjWARN_BADQVEL: 'velocities went non-finite',
                  _W.mjWARN_BADQACC: 'accelerations went non-finite',
                  _W.mjWARN_BADCTRL: 'controls went non-finite'}
ARENA_WARNINGS = (_W.mjWARN_CONTACTFULL, _W.mjWARN_CNSTRFULL)


def memory_fix(model: mujoco.MjModel, needed: int | None = None) -> str:
    """The MJCF change that gives a scene enough arena: ``<size memory="...M"/>`` of about
    twice what it needed (or twice what it has)."""
    base = max(int(needed or 0), int(model.narena), 1 << 20)
    return f'give the scene more arena with <size memory="{math.ceil(2 * base / (1 << 20))}M"' \
        '/> in its MJCF, or fewer bodies that start overlapping'


def trial_swap(model: mujoco.MjModel, old: tuple[mujoco.MjModel, mujoco.MjData] | None = None,
               why: str = 'the scene changed') -> None:
    """Step the new model once on a copy of the state a swap would give it, on the
    caller's thread: a scene that overflows MuJoCo's arena, warns or diverges is refused
    here, and the physics thread never runs it. ``old``: (model, a copy of its data) that
    an edit carries the state over from; None: a whole new world, from its ``home`` (else
    first) keyframe, as a zero-config device starts."""
    data = mujoco.MjData(model)
    if old is None:
        key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, 'home')
        if key >= 0 or model.nkey:
            mujoco.mj_resetDataKeyframe(model, data, max(key, 0))
    else:
        try:
            carry_state(old[0], old[1], model, data)
        except mujoco.FatalError:
            pass                   # trial_run's forward meets it again and says why
    trial_run(model, data, f'the new scene ({why})')


def trial_run(model: mujoco.MjModel, data: mujoco.MjData, what: str = 'the new scene',
              steps: int = TRIAL_STEPS) -> mujoco.MjData:
    """Step a throwaway ``data`` of ``model`` (the state the swap would start from) and
    refuse the edit when the new scene cannot run: a MuJoCo fatal error (the arena out of
    memory: ``mj_stackAlloc``), an arena or state warning, a non-finite state, or an arena
    fuller than ARENA_HEADROOM. Run on the caller's thread, never the physics thread, so
    a scene that fails costs the running simulation nothing; MODEL_ERROR (or UNSTABLE) names
    the fix. Returns ``data``, stepped."""
    data.warning.number[:] = 0
    try:
        mujoco.mj_forward(model, data)
        for _ in range(steps):
            mujoco.mj_step(model, data)
    except mujoco.FatalError as exc:
        text = ' '.join(str(exc).split())
        if 'memory' in text or 'stackAlloc' in text:
            raise ModelError(f'{what} runs out of arena memory on its first step ({text}); '
                             f'nothing was changed: {memory_fix(model)}',
                             where='scene') from None
        raise ModelError(f'{what} fails on its first step ({text}); nothing was changed',
                         where='scene') from None
    for w, why in TRIAL_WARNINGS.items():
        if data.warning.number[int(w)] > 0:
            if w in ARENA_WARNINGS:
                raise ModelError(f'{what}: {why} on its first step; nothing was changed: '
                                 f'{memory_fix(model, data.maxuse_arena)}', where='scene')
            raise DeviceError(UNSTABLE, f'{what}: {why} on its first step; nothing was '
                              'changed', where='scene', allowed='a scene whose bodies start '
                              'apart and at rest, with positive masses and inertias')
    if not (np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()
            and np.isfinite(data.qacc).all()):
        raise DeviceError(UNSTABLE, f'{what} is not finite after its first step; nothing was '
                          'changed', where='scene', allowed='a scene whose bodies start apart '
                          'and at rest')
    if model.narena and data.maxuse_arena > ARENA_HEADROOM * model.narena:
        raise ModelError(f'{what} fills {data.maxuse_arena / model.narena:.0%} of its arena '
                         f'on its first step (over {ARENA_HEADROOM:.0%}); nothing was changed: '
                         f'{memory_fix(model, data.maxuse_arena)}', where='scene')
    return data
