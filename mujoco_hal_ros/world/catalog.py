"""Entities as simulation_interfaces describes them: categories, tags, bounds and filters.

The entities are the model's named bodies (``sim.entities``). Their category follows from
the model: a body driven by an actuator, or below one, belongs to a robot; a free body is a
dynamic object; a mocap body or one welded to the world is static. Tags and descriptions
are the user's (``set_info``) and kept here; categories are the model's and cannot be set,
since a mislabelled category would make the next query lie about the model. Bounds are the
axis-aligned box around every geom of the body and the bodies below it, in the world frame.
"""

import re
import threading

import mujoco
import numpy as np

from ..checks import finite_number
from ..errors import InvalidArgument, shorten

OBJECT, ROBOT, DYNAMIC, STATIC = 0, 1, 4, 5          # EntityCategory values
MAX_TAGS = 64
MAX_TEXT = 1024


MAX_PATTERN = 256
# Unbounded repeats in one filter: k of them cost up to n^k steps on a name of n characters
# that fails to match; two keep a 256-character name to ~3e4 steps.
MAX_REPEATS = 2
_QUANTIFIER = re.compile(r'[*+]|\{\d*,\d*\}|\{\d{2,}\}')


def safe_pattern(pattern):
    """``pattern`` compiled, refused when it could backtrack without bound: Python's ``re``
    holds the GIL while it matches, so ``(a*)*$`` against one long spawned name would
    freeze the whole node for hours. Refused: over MAX_PATTERN characters, more than
    MAX_REPEATS unbounded repeats (``.*.*.*``), a repeated group that itself repeats or
    alternates (``(a+)+``, ``(a|aa)*``), and backreferences."""
    if len(pattern) > MAX_PATTERN:
        raise InvalidArgument(f'a filter of {len(pattern)} characters', where='filter',
                              allowed=f'at most {MAX_PATTERN}')
    groups = []              # per open group: whether it repeats or alternates inside
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
    def __init__(self, model, body_names):
        self.model = model
        self.names = [n for n in body_names if n and n != 'world']
        self._ids = {n: i for i, n in enumerate(body_names) if n}
        self._lock = threading.Lock()
        self._info = {}           # name -> (description, tags), set by the user
        self._category = {n: self._model_category(self._ids[n]) for n in self.names}

    def follow(self, model, body_names):
        """A scene edit swapped the model: its bodies are the entities now; what the user
        said about the ones that stayed is kept."""
        ids = {n: i for i, n in enumerate(body_names) if n}
        with self._lock:
            self.model = model
            self.names = [n for n in body_names if n and n != 'world']
            self._ids = ids
            self._info = {n: v for n, v in self._info.items() if n in ids}
            self._category = {n: self._model_category(ids[n]) for n in self.names}

    def _model_category(self, bid):
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
                m.jnt_type[m.body_jntadr[bid]] == mujoco.mjtJoint.mjJNT_FREE:
            return DYNAMIC
        if m.body_dofnum[bid] == 0 and m.body_parentid[bid] == 0:
            return STATIC
        return OBJECT

    def info(self, name):
        """(category, description, tags)."""
        with self._lock:
            description, tags = self._info.get(name, ('', []))
            return self._category[name], description, list(tags)

    def set_info(self, name, category, description, tags):
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

    def subtree_geoms(self, bid):
        m = self.model
        bodies = {bid}
        for b in range(bid + 1, m.nbody):
            if int(m.body_parentid[b]) in bodies:
                bodies.add(b)
        return [g for g in range(m.ngeom) if int(m.geom_bodyid[g]) in bodies]

    def bounds(self, name, data):
        """(low (3,), high (3,)) world AABB of the entity's geoms in ``data`` (posed), or
        None when it has none."""
        geoms = self.subtree_geoms(self._ids[name])
        return box_of(self.model, data, geoms)

    def filter(self, data, pattern='', categories=(), tags=(), mode_all=False, region=None):
        """Names matching every given filter; ``region`` is ('sphere', centre, radius) or
        ('box', low, high), matched by AABB overlap."""
        rx = safe_pattern(pattern) if pattern else None
        out = []
        for n in self.names:
            if rx is not None and not rx.search(n):
                continue
            category, _, own = self.info(n)
            if categories and category not in categories:
                continue
            if tags and not (all(t in own for t in tags) if mode_all
                             else any(t in own for t in tags)):
                continue
            if region is not None and not self._overlaps(n, data, region):
                continue
            out.append(n)
        return out

    def _overlaps(self, name, data, region):
        box = self.bounds(name, data)
        if box is None:
            return False
        low, high = box
        if region[0] == 'box':
            return bool((low <= region[2]).all() and (high >= region[1]).all())
        centre, radius = region[1], region[2]
        nearest = np.clip(centre, low, high)
        return float(np.linalg.norm(nearest - centre)) <= radius


def box_of(model, data, geoms):
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
        world = local @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
        lows.append(world.min(0))
        highs.append(world.max(0))
    return np.min(lows, 0), np.max(highs, 0)


def region(kind, points):
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
