"""Entities as simulation_interfaces describes them: categories, tags, bounds and filters.

The entities are the model's named bodies (``sim.entities``). Their category follows from
the model: a body driven by an actuator, or below one, belongs to a robot; a free body is a
dynamic object; a mocap body or one welded to the world is static. Tags and descriptions
are the user's (``set_info``) and kept here; categories are the model's and cannot be set,
since a mislabelled category would make the next query lie about the model. Bounds are the
axis-aligned box around every geom of the body and the bodies below it, in the world frame.
"""

from collections.abc import Callable, Sequence
import os
import re
import threading
from typing import Any

import mujoco
import numpy as np

from ..checks import finite_number
from ..errors import InvalidArgument, shorten, UnknownName
from ..joint_view import FREE

OBJECT, ROBOT, DYNAMIC, STATIC = 0, 1, 4, 5          # EntityCategory values
Box = tuple[np.ndarray, np.ndarray]                     # (low (3,), high (3,)), world frame
Region = tuple[Any, ...]                                # ('box', low, high) | ('sphere', c, r)
MAX_TAGS = 64
MAX_TEXT = 1024


MAX_PATTERN = 256
# Unbounded repeats in one filter: k of them cost up to n^k steps on a name of n characters
# that fails to match; two keep a 256-character name to ~3e4 steps.
MAX_REPEATS = 2
_QUANTIFIER = re.compile(r'[*+]|\{\d*,\d*\}|\{\d{2,}\}')


def safe_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled, refused when it could backtrack without bound: Python's ``re``
    holds the GIL while it matches, so ``(a*)*$`` against one long spawned name would
    freeze the whole node for hours. Refused: over MAX_PATTERN characters, more than
    MAX_REPEATS unbounded repeats (``.*.*.*``), a repeated group that itself repeats or
    alternates (``(a+)+``, ``(a|aa)*``), and backreferences."""
    if len(pattern) > MAX_PATTERN:
        raise InvalidArgument(f'a filter of {len(pattern)} characters', where='filter',
                              allowed=f'at most {MAX_PATTERN}')
    groups: list[bool] = []  # per open group: whether it repeats or alternates inside
    i, risky_after, repeats = 0, False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == '\\':
            if i + 1 < len(pattern) and pattern[i + 1].isdigit():
                raise InvalidArgument('backreferences are not served in a filter',
                                      where='filter')
            i += 2
            continue
        if c == '[':                       # a class: skip to its end
            j = i + 1 + (pattern[i + 1:i + 2] == '^')
            j += pattern[j:j + 1] == ']'
            while j < len(pattern) and pattern[j] != ']':
                j += 2 if pattern[j] == '\\' else 1
            i = j + 1
            continue
        quantifier = _QUANTIFIER.match(pattern, i)
        if quantifier:
            if risky_after:
                raise InvalidArgument(f'{shorten(pattern)} repeats a group that repeats or '
                                      'alternates: matching it can take hours',
                                      where='filter', allowed='a pattern without nested '
                                      'repetition, e.g. (ab)+ or a+b*')
            repeats += 1
            if repeats > MAX_REPEATS:
                raise InvalidArgument(f'{shorten(pattern)} has more than {MAX_REPEATS} '
                                      'unbounded repeats: matching it can take hours',
                                      where='filter', allowed=f'at most {MAX_REPEATS} of '
                                      '*, + or {m,}')
            if groups:
                groups[-1] = True
            i, risky_after = quantifier.end(), False
            continue
        risky_after = False
        if c == '(':
            groups.append(False)
        elif c == ')' and groups:
            risky_after = groups.pop()
            if groups and risky_after:
                groups[-1] = True
        elif c == '|' and groups:
            groups[-1] = True
        i += 1
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidArgument(f'not a regular expression: {exc}', where='filter') from None


class Catalog:
    def __init__(self, model: mujoco.MjModel, body_names: Sequence[str]) -> None:
        self.model = model
        self.names = [n for n in body_names if n and n != 'world']
        self._ids = {n: i for i, n in enumerate(body_names) if n}
        self._lock = threading.Lock()
        self._info: dict[str, tuple[str, list[str]]] = {}   # name -> (description, tags)
        self._category = {n: self._model_category(self._ids[n]) for n in self.names}

    def follow(self, model: mujoco.MjModel, body_names: Sequence[str]) -> None:
        """A scene edit swapped the model: its bodies are the entities now; what the user
        said about the ones that stayed is kept."""
        ids = {n: i for i, n in enumerate(body_names) if n}
        with self._lock:
            self.model = model
            self.names = [n for n in body_names if n and n != 'world']
            self._ids = ids
            self._info = {n: v for n, v in self._info.items() if n in ids}
            self._category = {n: self._model_category(ids[n]) for n in self.names}

    def _model_category(self, bid: int) -> int:
        m = self.model
        driven = set()
        for a in range(m.nu):
            if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT:
                driven.add(int(m.jnt_bodyid[m.actuator_trnid[a, 0]]))
        body = bid
        while body > 0:
            if body in driven:
                return ROBOT
            body = int(m.body_parentid[body])
        if m.body_mocapid[bid] >= 0:
            return STATIC
        if m.body_jntnum[bid] == 1 and \
                m.jnt_type[m.body_jntadr[bid]] == FREE:
            return DYNAMIC
        if m.body_dofnum[bid] == 0 and m.body_parentid[bid] == 0:
            return STATIC
        return OBJECT

    def info(self, name: str) -> tuple[int, str, list[str]]:
        """(category, description, tags)."""
        with self._lock:
            description, tags = self._info.get(name, ('', []))
            return self._category[name], description, list(tags)

    def set_info(self, name: str, category: int, description: str,
                 tags: Sequence[str]) -> None:
        if category != self._category[name]:
            raise InvalidArgument(f'entity {name!r} is category {self._category[name]} in the '
                                  f'model; it cannot be set to {category}', where='category',
                                  allowed=f'{self._category[name]} (the model decides)')
        if not isinstance(description, str) or len(description) > MAX_TEXT:
            raise InvalidArgument(f'expected a description up to {MAX_TEXT} characters',
                                  where='description')
        tags = list(tags)
        if len(tags) > MAX_TAGS or not all(isinstance(t, str) and 0 < len(t) <= 256
                                           for t in tags):
            raise InvalidArgument(f'expected up to {MAX_TAGS} non-empty tags',
                                  where='tags')
        with self._lock:
            self._info[name] = (description, tags)

    def bounds(self, name: str, xpos: np.ndarray, xquat: np.ndarray) -> Box | None:
        """(low (3,), high (3,)) world AABB of the entity's geoms with the bodies at
        ``xpos``/``xquat`` (a snapshot's, of this catalogue's model), or None when it has
        none."""
        with self._lock:
            model, bid = self.model, self._ids[name]
        geom_xpos, geom_xmat = geom_poses(model, xpos, xquat)
        return box_of(model, geom_xpos, geom_xmat, subtree_geoms(model, bid))

    def filter(self, xpos: np.ndarray, xquat: np.ndarray, pattern: str = '',
               categories: Sequence[int] = (), tags: Sequence[str] = (),
               mode_all: bool = False, region: Region | None = None) -> list[str]:
        """Names matching every given filter; ``region`` is ('sphere', centre, radius) or
        ('box', low, high), matched by AABB overlap with the bodies at ``xpos``/``xquat``
        (a snapshot's, of this catalogue's model)."""
        rx = safe_pattern(pattern) if pattern else None
        with self._lock:
            model, names, ids = self.model, list(self.names), dict(self._ids)
        poses = geom_poses(model, xpos, xquat) if region is not None else None
        out = []
        for n in names:
            if rx is not None and not rx.search(n):
                continue
            category, _, own = self.info(n)
            if categories and category not in categories:
                continue
            if tags and not (all(t in own for t in tags) if mode_all
                             else any(t in own for t in tags)):
                continue
            if poses is not None and region is not None and not _overlaps(
                    box_of(model, *poses, subtree_geoms(model, ids[n])), region):
                continue
            out.append(n)
        return out


def _overlaps(box: Box | None, region: Region) -> bool:
    if box is None:
        return False
    low, high = box
    if region[0] == 'box':
        return bool((low <= region[2]).all() and (high >= region[1]).all())
    centre, radius = region[1], region[2]
    nearest = np.clip(centre, low, high)
    return float(np.linalg.norm(nearest - centre)) <= radius


def body_names(model: mujoco.MjModel) -> list[str]:
    """Every body's name ('' when unnamed), by id: what ``Catalog`` takes."""
    return [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) or ''
            for b in range(model.nbody)]


def subtree_geoms(model: mujoco.MjModel, bid: int) -> list[int]:
    """The geoms of body ``bid`` and every body below it."""
    bodies = {bid}
    for b in range(bid + 1, model.nbody):       # parents come before their children
        if int(model.body_parentid[b]) in bodies:
            bodies.add(b)
    return [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in bodies]


def geom_poses(model: mujoco.MjModel, xpos: np.ndarray,
               xquat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World positions (ngeom, 3) and rotation matrices (ngeom, 9) of every geom, from
    the bodies' world poses (a snapshot's ``xpos``, ``xquat``, w first), as MuJoCo's
    kinematics composes them: no MjData needed, none borrowed."""
    xpos, xquat = np.asarray(xpos, dtype=float), np.asarray(xquat, dtype=float)
    if xpos.shape != (model.nbody, 3) or xquat.shape != (model.nbody, 4):
        raise InvalidArgument(f'body poses of {len(xpos)} bodies for a model of '
                              f'{model.nbody}: the model was swapped since; ask again',
                              where='snapshot')
    body = np.asarray(model.geom_bodyid, dtype=np.intp)
    rot = _quat_mats(xquat[body])                          # (ngeom, 3, 3)
    local = _quat_mats(np.asarray(model.geom_quat, dtype=float))
    geom_xpos = xpos[body] + np.einsum('gij,gj->gi', rot, model.geom_pos)
    geom_xmat = np.einsum('gij,gjk->gik', rot, local).reshape(-1, 9)
    return geom_xpos, geom_xmat


def _quat_mats(q: np.ndarray) -> np.ndarray:
    """Rotation matrices (n, 3, 3) of unit quaternions (n, 4), w first (``mju_quat2Mat``)."""
    q = q / np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], 1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], 1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], 1)],
        axis=1)


def box_of(model: mujoco.MjModel, geom_xpos: np.ndarray, geom_xmat: np.ndarray,
           geoms: Sequence[int]) -> Box | None:
    """The world AABB (low, high) around ``geoms`` posed at ``geom_xpos``/``geom_xmat``;
    a plane counts as its drawn size (1 km where it is infinite); None for no geoms."""
    if not geoms:
        return None
    corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    lows, highs = [], []
    for g in geoms:
        aabb = model.geom_aabb[g]
        local = aabb[:3] + corners * aabb[3:]
        if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_PLANE:
            size = model.geom_size[g]
            half = np.array([size[0] or 1e3, size[1] or 1e3, 0.0])
            local = corners * half
        world = local @ np.asarray(geom_xmat[g]).reshape(3, 3).T + geom_xpos[g]
        lows.append(world.min(0))
        highs.append(world.max(0))
    return np.min(lows, 0), np.max(highs, 0)


def named_poses(model: mujoco.MjModel) -> dict[str, int]:
    """The model's keyframes as named poses: ``{name (key<i> when unnamed): id}``."""
    return {(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_KEY, k) or f'key{k}'): k
            for k in range(model.nkey)}


def named_pose_bounds(model: mujoco.MjModel, name: str) -> Box | None:
    """The world AABB of every geom with the model posed at keyframe ``name``, from a
    private MjData (never the simulation's, never the renderer's); UnknownName listing
    them when there is no such pose."""
    keys = named_poses(model)
    if name not in keys:
        raise UnknownName('named pose', name, list(keys), where='name')
    d = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, d, keys[name])
    mujoco.mj_kinematics(model, d)
    return box_of(model, d.geom_xpos, d.geom_xmat, list(range(model.ngeom)))


def region(kind: int, points: Sequence[Sequence[float]]) -> Region | None:
    """A Bounds message's (type, points as (n, 3)) as a filter region; None for TYPE_EMPTY.
    Types: 0 empty, 1 box, 2 convex hull (refused), 3 sphere."""
    if kind == 0:
        return None
    pts = [[finite_number(v, f'bounds.points[{i}]') for v in p] for i, p in enumerate(points)]
    if kind == 1:
        if len(pts) != 2:
            raise InvalidArgument('a box needs 2 points', where='bounds')
        a, b = np.array(pts)
        return ('box', np.minimum(a, b), np.maximum(a, b))
    if kind == 3:
        if len(pts) != 2 or pts[1][0] < 0:
            raise InvalidArgument('a sphere needs a centre and a radius >= 0', where='bounds')
        return ('sphere', np.array(pts[0]), pts[1][0])
    raise InvalidArgument(f'bounds type {shorten(kind)} is not served', where='bounds',
                          allowed='0 (empty), 1 (box), 3 (sphere)')


# --- what a spawn request names: its resource and a free entity name --------------------
FOREIGN = ('.urdf', '.sdf', '.usd', '.usda', '.usdc', '.world')


def spawn_resource(uri: str, text: str) -> tuple[str | None, tuple[str, str] | None]:
    """``(MJCF path or document, None)`` of a simulation_interfaces Resource (its ``uri``
    and ``resource_string``), or ``(None, (why, message))``: ``why`` is ``format`` for
    something this simulator does not read (a remote uri, a URDF or SDF file), ``none``
    when neither is given."""
    if uri:
        path = uri[len('file://'):] if uri.startswith('file://') else uri
        if '://' in path:
            return None, ('format', f'uri {uri[:80]!r}: only local files (file:// or a '
                          'path) are read')
        if path.lower().endswith(FOREIGN):
            return None, ('format', f'{os.path.basename(path)[:80]}: only MJCF is spawned '
                          'here')
        return path, None
    if text:
        return text, None
    return None, ('none', 'give an MJCF file in uri or an MJCF document in resource_string')


def spawn_name(name: str, namespace: str, allow_renaming: bool,
               taken: Callable[[str], bool]) -> tuple[str, str]:
    """``(name, namespace)`` a spawn request's entity gets: its own where ``taken`` (full
    name -> bool) says it is free, else with ``_1``, ``_2``... when renaming is allowed
    (``entity`` when it has no name); InvalidArgument (``where='name'``, ``exists``) when
    the name is taken and renaming is not allowed."""
    if not name and allow_renaming:
        name = 'entity'
    ns = namespace.strip('/')
    full = f'{ns}/{name}' if ns else name
    if taken(full):
        if not allow_renaming:
            raise InvalidArgument(f'an entity {full[:80]!r} exists; delete it, pick another '
                                  'name or allow_renaming', where='name')
        k = 1
        while taken(f'{full}_{k}'):
            k += 1
        name = f'{name}_{k}'
    return name, ns


def name_taken(full: str, entities: Sequence[str], bodies: Sequence[str]) -> bool:
    """Whether an entity ``full`` would clash: a spawned entity or a body of that name, or
    bodies under it as a namespace."""
    return full in entities or full in bodies or any(b.startswith(f'{full}/') for b in bodies)
