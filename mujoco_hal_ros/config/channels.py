"""Channels: the device file's names resolved against one compiled model.

Everything that can be checked without running physics is checked here, once, at load:
names exist, units fit what they convert, goal limits sit inside what the actuator can do,
and every action's effects cover what it changes. Requests later only index these tables.
"""

from dataclasses import dataclass, field, replace
import math
from typing import Any

import mujoco
import numpy as np

from ..errors import ConfigError
from ..joint_view import QUANTITY
from . import units
from .device_file import number, vector3

AXIS_INDEX = {'x': 0, 'y': 1, 'z': 2}
JOINT_KIND = QUANTITY      # a 1-DoF joint's position: an angle (hinge) or a length (slide)
NATIVE_UNIT = {'angle': 'rad', 'length': 'm'}


def _names(model, objtype, count):
    return [mujoco.mj_id2name(model, objtype, i) or '' for i in range(count)]


@dataclass
class ReadChannel:
    name: str
    kind: str            # joint | site | body | sensor
    target: str
    index: int           # joint qpos address, site/body id, or sensor address
    axis: str = ''
    unit: str = ''
    scale: float = 1.0   # native = scale * value + offset
    offset: float = 0.0
    every: float = 0.0
    min: float | None = None
    max: float | None = None

    def to_unit(self, native: Any) -> Any:
        return (native - self.offset) / self.scale


def camera_size(model: mujoco.MjModel, cid: int) -> tuple[int, int]:
    """(width, height) an image channel defaults to: the MJCF camera's ``resolution`` where
    the model gives one (its ``focal``/``sensorsize`` intrinsics are for that size), else
    640x480 (MuJoCo's default resolution is 1x1, meaning none given)."""
    w, h = (int(v) for v in model.cam_resolution[cid])
    return (w, h) if w > 1 and h > 1 and max(w, h) <= 2048 else (640, 480)


@dataclass
class ImageChannel:
    name: str
    camera: str
    width: int = 640
    height: int = 480
    depth: bool = False
    every: float = 0.0


@dataclass
class GoalChannel:
    name: str
    actuator: int
    actuator_name: str
    joint: int           # -1 when the actuator drives no single joint
    drive: str           # position | velocity | motor_impedance | direct
    unit: str
    scale: float
    offset: float
    min: float | None = None    # channel units
    max: float | None = None
    max_change_per_s: float | None = None   # channel units per second; None = jump
    native_lo: float = -math.inf     # what the actuator or joint can reach, native units
    native_hi: float = math.inf

    def to_native(self, value: Any) -> Any:
        return self.scale * value + self.offset

    def to_unit(self, native: Any) -> Any:
        return (native - self.offset) / self.scale

    @property
    def native_rate(self) -> float | None:
        if self.max_change_per_s is None:
            return None
        return abs(self.scale) * self.max_change_per_s


@dataclass
class ActionArg:
    name: str
    unit: str
    kind: str            # length (a coordinate) or speed
    scale: float
    min: float | None = None
    max: float | None = None


@dataclass
class Action:
    name: str
    command: str
    args: dict = field(default_factory=dict)       # name -> ActionArg
    effects: list = field(default_factory=list)
    site: str | None = None
    body: str | None = None
    axes: dict = field(default_factory=dict)       # argument -> axis index
    at: dict = field(default_factory=dict)         # axis index -> metres
    aim: tuple | None = None                     # (local axis, world direction)
    joints: list = field(default_factory=list)     # joint names that may turn
    then: dict = field(default_factory=dict)       # goal channel -> value (its unit)
    speed: str | None = None
    path: str = 'joint'
    path_tolerance: float = 1e-3


class Layout:
    """Channels and actions of one device on one model (``describe()`` reports this)."""

    def __init__(self, model: mujoco.MjModel, spec: dict | None, prefix: str = '') -> None:
        # prefix: one robot of a world (``sim.robots``): only what is named ``<prefix>...``
        # has a name here, and it is the robot's own (``waist``, not ``left/waist``), so its
        # device file, controllers and clients use the names its URDF or MJCF gives; the
        # rest of the world is unnamed to it. Ids and addresses stay the world model's.
        self.model = model
        self.prefix = prefix

        def own(objtype: Any, count: int) -> list[str]:
            names = _names(model, objtype, count)
            if not prefix:
                return names
            return [n[len(prefix):] if n.startswith(prefix) else '' for n in names]
        self.joints = own(mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
        self.sites = own(mujoco.mjtObj.mjOBJ_SITE, model.nsite)
        self.bodies = own(mujoco.mjtObj.mjOBJ_BODY, model.nbody)
        self.actuators = own(mujoco.mjtObj.mjOBJ_ACTUATOR, model.nu)
        self.cameras = own(mujoco.mjtObj.mjOBJ_CAMERA, model.ncam)
        self.sensors = own(mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
        self.zero_config = spec is None
        spec = spec or {'read': None, 'write': None, 'actions': {}}
        self.reads: list[ReadChannel] = []
        self.images: list[ImageChannel] = []
        self.goals: dict[str, GoalChannel] = {}
        self.actions: dict[str, Action] = {}
        self._build_reads(spec.get('read'))
        self._build_goals(spec.get('write'))
        self._build_actions(spec.get('actions') or {})
        self.goal_by_actuator = {g.actuator: g for g in self.goals.values()}

    # --- lookups --------------------------------------------------------------------------
    def _find(self, names, name, kind, where):
        if not isinstance(name, str) or name not in names:
            shown = ', '.join(n for n in names if n)[:400]
            raise ConfigError(f'the model has no {kind} {name!r}', where=where,
                              allowed=shown or 'none')
        return names.index(name)

    def joint_kind(self, jid: int) -> str | None:
        return JOINT_KIND.get(int(self.model.jnt_type[jid]))

    def joint_range(self, jid: int) -> tuple[float | None, ...]:
        if self.model.jnt_limited[jid]:
            return tuple(float(v) for v in self.model.jnt_range[jid])
        return None, None

    def position_view(self, goal: 'GoalChannel') -> 'GoalChannel':
        """``goal`` as a joint-position channel, for what drives joints to positions (move_to,
        joint trajectories): the goal itself, except that a velocity servo's channel (speeds,
        for ``set_goals``) becomes its joint in native units within the joint's range, with
        no rate limit of its own (its ``max_change_per_s`` limits a speed's change), as a
        driver runs a velocity-mode drive in position mode."""
        if goal.drive != 'velocity':
            return goal
        kind = self.joint_kind(goal.joint)
        lo, hi = self.joint_range(goal.joint)
        return replace(goal, unit=NATIVE_UNIT[str(kind)], scale=1.0, offset=0.0, min=lo, max=hi,
                       max_change_per_s=None,
                       native_lo=-math.inf if lo is None else lo,
                       native_hi=math.inf if hi is None else hi)

    # --- reads ----------------------------------------------------------------------------
    def _build_reads(self, section):
        model = self.model
        if section is None:   # zero-config: every hinge/slide joint, every camera
            section = {j: {} for j in range(model.njnt) if self.joint_kind(j)}
            section = {self.joints[j]: {} for j in section if self.joints[j]}
            section.update({c: {'type': 'image', 'map': {'camera': c}}
                            for c in self.cameras if c})
        for name, entry in section.items():
            where = f'read.{name}'
            cmap = entry.get('map', {})
            every = units.parse_quantity(entry.get('every', 0), 'time', f'{where}.every')
            if every < 0:
                raise ConfigError('cannot be negative', where=f'{where}.every')
            if entry.get('type') == 'image' or 'camera' in cmap:
                cam = cmap.get('camera', name)
                cid = self._find(self.cameras, cam, 'camera', f'{where}.map.camera')
                size = {}
                for key, default in zip(('width', 'height'), camera_size(model, cid), strict=True):
                    value = cmap.get(key, default)
                    if isinstance(value, bool) or not isinstance(value, int) \
                            or not 1 <= value <= 2048:
                        raise ConfigError(f'{key} must be an integer in 1..2048, got '
                                          f'{value!r}', where=f'{where}.map.{key}')
                    size[key] = value
                self.images.append(ImageChannel(name, cam, size['width'], size['height'],
                                                bool(cmap.get('depth', False)), every))
                continue
            unit = entry.get('unit') or cmap.get('unit')
            if unit is not None and not isinstance(unit, str):
                raise ConfigError(f'expected a unit name, got {unit!r}', where=f'{where}.unit')
            lim = {k: number(entry[k], f'{where}.{k}') for k in ('min', 'max') if k in entry}
            if 'site' in cmap or 'body' in cmap:
                kind = 'site' if 'site' in cmap else 'body'
                names = self.sites if kind == 'site' else self.bodies
                idx = self._find(names, cmap[kind], kind, f'{where}.map.{kind}')
                if 'axis' not in cmap:
                    raise ConfigError(f'a {kind} channel needs an axis', where=f'{where}.map',
                                      allowed='x, y, z')
                unit = unit or 'm'
                factor = units.scale(unit, 'length', f'{where}.unit')
                self.reads.append(ReadChannel(name, kind, cmap[kind], idx, cmap['axis'], unit,
                                              factor, 0.0, every, **lim))
                continue
            if 'sensor' in cmap:
                sid = self._find(self.sensors, cmap['sensor'], 'sensor', f'{where}.map.sensor')
                if model.sensor_dim[sid] != 1:
                    raise ConfigError('only 1-D sensors can be scalar channels',
                                      where=f'{where}.map.sensor')
                self.reads.append(ReadChannel(name, 'sensor', cmap['sensor'],
                                              int(model.sensor_adr[sid]), '', unit or '',
                                              1.0, 0.0, every, **lim))
                continue
            joint = cmap.get('joint', name)
            jid = self._find(self.joints, joint, 'joint', f'{where}.map.joint')
            kind = self.joint_kind(jid)
            if kind is None:
                raise ConfigError(f'joint {joint!r} is not a hinge or slide', where=where)
            unit = unit or NATIVE_UNIT[kind]
            lo, hi = self.joint_range(jid)
            factor, offset = units.linear_map(unit, kind, lo, hi, f'{where}.unit')
            self.reads.append(ReadChannel(name, 'joint', joint, int(model.jnt_qposadr[jid]),
                                          '', unit, factor, offset, every, **lim))

    # --- goals ----------------------------------------------------------------------------
    def drive_of(self, aid: int) -> str:
        """How the stepper turns a goal into ctrl for this actuator.

        ``position``: a servo whose ctrl is the joint position (kp with bias -kp);
        ``velocity``: ctrl is the joint velocity (velocity, intvelocity servos);
        ``motor_impedance``: a torque motor on a joint, closed by the stepper's
        gravity-compensated joint loop so that it still takes joint-position goals;
        ``direct``: anything else (tendons, sites, muscles...): the goal is the raw ctrl.
        """
        m = self.model
        trn_joint = m.actuator_trntype[aid] == mujoco.mjtTrn.mjTRN_JOINT
        if not trn_joint:
            return 'direct'
        jid = int(m.actuator_trnid[aid, 0])
        if self.joint_kind(jid) is None:
            return 'direct'
        gain = m.actuator_gainprm[aid]
        bias = m.actuator_biasprm[aid]
        gear = m.actuator_gear[aid, 0]
        affine = m.actuator_biastype[aid] == mujoco.mjtBias.mjBIAS_AFFINE
        fixed = m.actuator_gaintype[aid] == mujoco.mjtGain.mjGAIN_FIXED
        integrator = m.actuator_dyntype[aid] == mujoco.mjtDyn.mjDYN_INTEGRATOR
        if fixed and affine and gain[0] > 0 and np.isclose(bias[1], -gain[0]):
            if integrator:      # intvelocity: ctrl is a velocity, act integrates it
                return 'velocity' if np.isclose(gear, 1.0) else 'direct'
            return 'position' if np.isclose(gear, 1.0) else 'direct'
        if fixed and affine and bias[1] == 0 and bias[2] < 0 \
                and np.isclose(bias[2], -gain[0]) and not integrator:
            return 'velocity' if np.isclose(gear, 1.0) else 'direct'
        if fixed and m.actuator_biastype[aid] == mujoco.mjtBias.mjBIAS_NONE \
                and m.actuator_dyntype[aid] == mujoco.mjtDyn.mjDYN_NONE \
                and gain[0] * gear != 0:
            return 'motor_impedance'
        return 'direct'

    def _zero_config_goals(self):
        """A goal per actuator: ``<actuator>_goal``; an unnamed one (gymnasium's, dm_control's)
        on a named joint is ``<joint>_goal``, since a name is what a caller can use."""
        m = self.model
        section, taken = {}, set(self.actuators)
        for a, name in enumerate(self.actuators):
            if name:
                section[f'{name}_goal'] = {'map': {'actuator': name}}
                continue
            if m.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
                continue
            joint = self.joints[int(m.actuator_trnid[a, 0])]
            drivers = [b for b in range(m.nu) if m.actuator_trntype[b] == m.actuator_trntype[a]
                       and m.actuator_trnid[b, 0] == m.actuator_trnid[a, 0]]
            if joint and joint not in taken and len(drivers) == 1:
                section[f'{joint}_goal'] = {'map': {'joint': joint}}
        return section

    def _actuator_for(self, cmap, name, where):
        """A write map names the actuator, or the joint it drives, or neither (by name)."""
        if 'actuator' in cmap:
            return self._find(self.actuators, cmap['actuator'], 'actuator',
                              f'{where}.map.actuator')
        if 'joint' in cmap:
            jid = self._find(self.joints, cmap['joint'], 'joint', f'{where}.map.joint')
            m = self.model
            found = [a for a in range(m.nu)
                     if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                     and m.actuator_trnid[a, 0] == jid]
            if not found:
                raise ConfigError(f'no actuator drives joint {cmap["joint"]!r}',
                                  where=f'{where}.map.joint', allowed=', '.join(
                                      self.joints[int(m.actuator_trnid[a, 0])]
                                      for a in range(m.nu)
                                      if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT))
            if len(found) > 1:   # prefer a servo that takes positions
                servo = [a for a in found if self.drive_of(a) == 'position']
                found = servo or found
            return found[0]
        default = name[:-5] if name.endswith('_goal') else name
        return self._find(self.actuators, default, 'actuator', f'{where}.map.actuator')

    def _build_goals(self, section):
        m = self.model
        if section is None:
            section = self._zero_config_goals()
        used = {}
        for name, entry in section.items():
            where = f'write.{name}'
            cmap = entry.get('map', {}) or {}
            aid = self._actuator_for(cmap, name, where)
            aname = self.actuators[aid]
            if aid in used:
                raise ConfigError(f'actuator {aname!r} is already driven by {used[aid]!r}',
                                  where=where)
            used[aid] = name
            drive = self.drive_of(aid)
            jid = int(m.actuator_trnid[aid, 0]) if drive != 'direct' else -1
            ctrl_lo, ctrl_hi = ((float(m.actuator_ctrlrange[aid, 0]),
                                 float(m.actuator_ctrlrange[aid, 1]))
                                if m.actuator_ctrllimited[aid] else (None, None))
            if drive == 'position':
                lo, hi = self.joint_range(jid)
                if ctrl_lo is not None:
                    lo = ctrl_lo if lo is None else max(lo, ctrl_lo)
                    hi = ctrl_hi if hi is None else min(hi, ctrl_hi)
            elif drive == 'motor_impedance':
                lo, hi = self.joint_range(jid)
            else:
                lo, hi = ctrl_lo, ctrl_hi
            unit, factor, offset = self._goal_unit(entry, cmap, drive, jid, lo, hi, aname,
                                                   where)
            goal = GoalChannel(name, aid, aname, jid, drive, unit, factor, offset,
                               native_lo=-math.inf if lo is None else lo,
                               native_hi=math.inf if hi is None else hi)
            if 'min' in entry:
                goal.min = number(entry['min'], f'{where}.min')
            if 'max' in entry:
                goal.max = number(entry['max'], f'{where}.max')
            # A side the device file leaves out is what the actuator (or joint) can reach.
            if lo is not None and goal.min is None:
                goal.min = min(goal.to_unit(lo), goal.to_unit(hi))
            if hi is not None and goal.max is None:
                goal.max = max(goal.to_unit(lo), goal.to_unit(hi))
            if goal.min is not None and goal.max is not None and goal.min > goal.max:
                raise ConfigError(f'min {goal.min:g} is above max {goal.max:g} {unit}',
                                  where=where)
            if 'max_change_per_s' in entry:
                goal.max_change_per_s = number(entry['max_change_per_s'],
                                               f'{where}.max_change_per_s')
                if goal.max_change_per_s <= 0:
                    raise ConfigError('must be above zero', where=f'{where}.max_change_per_s')
            for key in ('min', 'max'):
                value = getattr(goal, key)
                if value is None:
                    continue
                native = goal.to_native(value)
                if not goal.native_lo - 1e-9 <= native <= goal.native_hi + 1e-9:
                    raise ConfigError(
                        f'{key} {value:g} {unit} is outside what actuator {aname!r} can reach '
                        f'({goal.to_unit(goal.native_lo):g}..{goal.to_unit(goal.native_hi):g}'
                        f' {unit}); tighten the limit', where=f'{where}.{key}')
            self.goals[name] = goal

    def _goal_unit(self, entry, cmap, drive, jid, lo, hi, aname, where):
        """(unit, scale, offset) of a goal channel, native = scale * value + offset.

        Joint servos and torque motors take joint positions (rad or m); velocity servos
        joint speeds (rad/s or m/s); an actuator without a joint takes whatever
        ``map.unit`` says its ctrl is in, and converts from the channel's unit when both
        are units of one kind. ``percent`` spans the joint range or ctrlrange.
        """
        unit = entry.get('unit')
        if unit is not None and not isinstance(unit, str):
            raise ConfigError(f'expected a unit name, got {unit!r}', where=f'{where}.unit')
        if drive in ('position', 'motor_impedance'):
            kind = self.joint_kind(jid)
            unit = unit or cmap.get('unit') or NATIVE_UNIT[kind]
            factor, offset = units.linear_map(unit, kind, lo, hi, f'{where}.unit')
            return unit, factor, offset
        if drive == 'velocity':
            kind = self.joint_kind(jid)
            unit = unit or cmap.get('unit') or f'{NATIVE_UNIT[kind]}/s'
            if units.kind_of(unit) == units.PERCENT:
                factor, offset = units.linear_map(unit, kind, lo, hi, f'{where}.unit')
                return unit, factor, offset
            return unit, units.rate_scale(unit, kind, f'{where}.unit'), 0.0
        native_unit = cmap.get('unit')
        if native_unit is not None and not isinstance(native_unit, str):
            raise ConfigError(f'expected a unit name, got {native_unit!r}',
                              where=f'{where}.map.unit')
        unit = unit or native_unit or ''
        if units.kind_of(unit) == units.PERCENT:
            factor, offset = units.linear_map(unit, None, lo, hi, f'{where}.unit')
            return unit, factor, offset
        if native_unit is None or unit == native_unit:
            if native_unit is None and units.kind_of(unit) is not None:
                raise ConfigError(f'actuator {aname!r} drives no joint, so its ctrl has no '
                                  f'known unit to convert {unit!r} to; say what it is with '
                                  'map.unit', where=f'{where}.map.unit')
            return unit, 1.0, 0.0
        return unit, units.conversion(unit, native_unit, f'{where}.unit'), 0.0

    # --- actions --------------------------------------------------------------------------
    def _build_actions(self, section):
        if 'hold' not in section:
            section = dict(section, hold={'name': 'hold', 'command': 'hold', 'args': {},
                                          'map': {}, 'effects': []})
        for name, spec in section.items():
            self.actions[name] = self.build_action(name, spec, f'actions.{name}')

    def build_action(self, name: str, spec: dict, where: str) -> Action:
        """Resolve one checked action spec; the device also builds ad-hoc move_to actions
        (a site named in the request) through here, so they get the same checks."""
        amap = spec.get('map', {})
        act = Action(name, spec['command'], effects=list(spec.get('effects', [])))
        for arg, aspec in spec.get('args', {}).items():
            kind = 'speed' if amap.get('speed') == arg else 'length'
            unit = aspec.get('unit', 'm/s' if kind == 'speed' else 'm')
            factor = (units.rate_scale(unit, 'length', f'{where}.args.{arg}.unit')
                      if kind == 'speed' else units.scale(unit, 'length',
                                                          f'{where}.args.{arg}.unit'))
            act.args[arg] = ActionArg(arg, unit, kind, factor, aspec.get('min'), aspec.get('max'))
        for goal in spec.get('effects', []):
            if goal not in self.goals:
                raise ConfigError(f'{goal!r} is not a goal channel', where=f'{where}.effects',
                                  allowed=', '.join(self.goals))
        if act.command != 'move_to':
            return act
        if 'site' in amap:
            act.site = amap['site']
            self._find(self.sites, act.site, 'site', f'{where}.map.site')
        elif 'body' in amap:
            act.body = amap['body']
            self._find(self.bodies, act.body, 'body', f'{where}.map.body')
        else:
            raise ConfigError('move_to needs a site (or a body when the model has no site)',
                              where=f'{where}.map')
        act.axes = {arg: AXIS_INDEX[arg] for arg in act.args if arg in AXIS_INDEX}
        act.axes.update({arg: AXIS_INDEX[ax] for arg, ax in amap.get('axes', {}).items()})
        act.axes = {a: i for a, i in act.axes.items() if act.args[a].kind == 'length'}
        for axis, value in amap.get('at', {}).items():
            if axis not in AXIS_INDEX:
                raise ConfigError(f'unknown axis {axis!r}', where=f'{where}.map.at',
                                  allowed='x, y, z')
            act.at[AXIS_INDEX[axis]] = units.parse_quantity(value, 'length',
                                                            f'{where}.map.at.{axis}')
        if 'aim' in amap:
            act.aim = (np.array(vector3(amap['aim']['axis'], f'{where}.map.aim.axis')),
                       np.array(vector3(amap['aim']['toward'], f'{where}.map.aim.toward')))
        act.speed = amap.get('speed')
        act.path = amap.get('path', 'joint')
        if 'path_tolerance' in amap:
            act.path_tolerance = units.parse_quantity(amap['path_tolerance'], 'length',
                                                      f'{where}.map.path_tolerance')
        act.then = dict(amap.get('then', {}) or {})
        for goal, value in act.then.items():
            if goal not in self.goals:
                raise ConfigError(f'then sets unknown goal channel {goal!r}',
                                  where=f'{where}.map.then', allowed=', '.join(self.goals))
            g = self.goals[goal]
            value = number(value, f'{where}.map.then.{goal}')
            if (g.min is not None and value < g.min) or (g.max is not None and value > g.max):
                raise ConfigError(f'then sets {goal} to {value:g} {g.unit}, outside its limit '
                                  f'{g.min}..{g.max}', where=f'{where}.map.then.{goal}')
        joints = amap.get('joints')
        if joints is None:
            joints = self._chain_actuated(act)
        elif not isinstance(joints, list) or not joints:
            raise ConfigError('expected a list of joint names', where=f'{where}.map.joints')
        for j in joints:
            self._find(self.joints, j, 'joint', f'{where}.map.joints')
        act.joints = list(joints)
        driven = {self.goals[g].joint: g for g in self.goals if self.goals[g].joint >= 0}
        for j in act.joints:
            jid = self.joints.index(j)
            goal = driven.get(jid)
            if goal is None:
                raise ConfigError(f'move_to turns joint {j!r}, which no goal channel drives',
                                  where=f'{where}.map.joints')
            if self.actions_check_effects(act) and goal not in act.effects:
                raise ConfigError(f'action {act.name!r} changes goal channel {goal!r} but does '
                                  'not list it in effects; add it to effects',
                                  where=f'{where}.effects')
        if not act.joints:
            raise ConfigError('no actuated joint moves this site', where=where)
        return act

    def actions_check_effects(self, act: Action) -> bool:
        """Zero-config actions have no effects list to check against."""
        return not self.zero_config

    def _chain_actuated(self, act):
        m = self.model
        body = (m.site_bodyid[self.sites.index(act.site)] if act.site
                else self.bodies.index(act.body))
        driven = {g.joint for g in self.goals.values()
                  if g.joint >= 0 and g.drive in ('position', 'motor_impedance', 'velocity')}
        chain = []
        while body > 0:
            for j in range(m.body_jntadr[body], m.body_jntadr[body] + m.body_jntnum[body]):
                if j in driven:
                    chain.append(self.joints[j])
            body = m.body_parentid[body]
        return chain[::-1]

    # --- description ----------------------------------------------------------------------
    def describe(self) -> dict:
        chans = []
        for r in self.reads:
            chans.append({'name': r.name, 'direction': 'read', 'kind': r.kind,
                          'target': r.target, 'axis': r.axis, 'unit': r.unit,
                          'every': r.every, 'min': r.min, 'max': r.max})
        for i in self.images:
            chans.append({'name': i.name, 'direction': 'image', 'kind': 'camera',
                          'target': i.camera, 'unit': 'png', 'width': i.width,
                          'height': i.height, 'depth': i.depth, 'every': i.every})
        for g in self.goals.values():
            chans.append({'name': g.name, 'direction': 'write', 'kind': 'actuator',
                          'target': g.actuator_name, 'unit': g.unit, 'min': g.min,
                          'max': g.max, 'max_change_per_s': g.max_change_per_s,
                          'drive': g.drive})
        acts = []
        for a in self.actions.values():
            acts.append({'name': a.name, 'command': a.command, 'effects': a.effects,
                         'args': {n: {'unit': x.unit, 'min': x.min, 'max': x.max,
                                      'kind': x.kind} for n, x in a.args.items()},
                         'site': a.site, 'body': a.body, 'joints': a.joints,
                         'path': a.path, 'speed': a.speed,
                         'at': {'xyz'[i]: v for i, v in a.at.items()},
                         'aim': None if a.aim is None else {
                             'axis': [float(v) for v in a.aim[0]],
                             'toward': [float(v) for v in a.aim[1]]},
                         'then': dict(a.then)})
        return {'channels': chans, 'actions': acts}
