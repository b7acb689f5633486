"""What a URDF import adds for a robot that drives: a free base, wheels, tyre friction.

A URDF cannot say whether its root link is bolted down: an arm's and a rover's look the
same. The rule (``base``): ``auto`` frees the base of a robot that has drive wheels (joints
a drive controller names, a ``<ros2_control>`` velocity interface on a continuous joint,
or, with neither, a continuous joint whose own link touches the ground) and whose root is
not a ``world`` link; ``fixed`` and ``floating`` say it outright. Wheels are velocity servos
whose gain is sized on the inertia they drive (their own plus their share of the robot's
mass at the tyre, ``wheel_gains``), the loop bandwidth the timestep allows, and limited by
the URDF effort. Tyre friction comes from the description's ``<gazebo reference>``
``mu1``/``mu2`` (Gazebo's default 1 where a wheel gives none) and wins over the floor's
(geom priority), as the ODE contact uses the wheel's coefficients.
"""

from collections.abc import Iterable, Sequence
import xml.etree.ElementTree as ET

import mujoco
import numpy as np

from ..errors import ModelError
from . import servo_gains

BASES = ('auto', 'fixed', 'floating')
GROUND_TOUCH = 0.01          # m: a wheel's own link reaches this close to the lowest point
DEFAULT_MU = 1.0             # Gazebo's friction coefficient where the description has none
WHEEL_PREFIX = 'mujoco_hal_ros/wheel/'   # custom numerics marking the wheels' actuators
FLOOR_GAP = 0.001            # m between a free base's lowest point and the floor at start


def check_base(base: str) -> str:
    if base not in BASES:
        raise ModelError(f'base must be one of {", ".join(BASES)}, got {base!r}',
                         where='base', allowed=', '.join(BASES))
    return base


def root_link(root: ET.Element) -> str | None:
    """The URDF's root link: the one no joint has as its child."""
    children = {child.get('link') for j in root.findall('joint')
                if (child := j.find('child')) is not None}
    roots = [lk.get('name') for lk in root.findall('link') if lk.get('name') not in children]
    return roots[0] if roots else None


def continuous_joints(root: ET.Element) -> list[str]:
    return [j.get('name', '') for j in root.findall('joint') if j.get('type') == 'continuous']


def _number(elem: ET.Element | None) -> float | None:
    """``<mu1>0.8</mu1>`` or ``<mu1 value="0.8"/>`` (both forms are in public URDFs)."""
    if elem is None:
        return None
    text = elem.get('value') if elem.get('value') is not None else elem.text
    try:
        value = float((text or '').strip())
    except ValueError:
        return None
    return value if np.isfinite(value) and 0 <= value <= 1e3 else None


def gazebo_friction(root: ET.Element) -> dict[str, tuple[float | None, float | None]]:
    """link -> (mu1, mu2) from ``<gazebo reference="link">`` (read before the import drops
    the ``<gazebo>`` elements)."""
    out = {}
    for gz in root.findall('gazebo'):
        link = gz.get('reference')
        mu1, mu2 = _number(gz.find('mu1')), _number(gz.find('mu2'))
        if link and (mu1 is not None or mu2 is not None):
            out[link] = (mu1, mu2)
    return out


def lowest_point(model: mujoco.MjModel, data: mujoco.MjData,
                 bodies: Iterable[int] | None = None) -> float:
    """The lowest z of any colliding geom's bounding box (of ``bodies`` only, when given)
    at ``data``'s pose; planes left out."""
    low = np.inf
    for g in range(model.ngeom):
        if not (model.geom_contype[g] or model.geom_conaffinity[g]):
            continue
        if bodies is not None and int(model.geom_bodyid[g]) not in bodies:
            continue
        if int(model.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_PLANE):
            continue
        centre, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
        corners = centre + half * np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1)
                                            for z in (-1, 1)])
        world = data.geom_xpos[g] + corners @ data.geom_xmat[g].reshape(3, 3).T
        low = min(low, float(world[:, 2].min()))
    return low


def _on_axle(model: mujoco.MjModel, data: mujoco.MjData, joint: int, body: int) -> bool:
    """Whether a colliding geom of ``body`` is centred on the joint's axis: a wheel turns
    about its own centre, a leg about a knee far from its foot."""
    anchor, axis = data.xanchor[joint], data.xaxis[joint]
    for g in range(model.ngeom):
        if int(model.geom_bodyid[g]) != body or not (model.geom_contype[g] or
                                                     model.geom_conaffinity[g]):
            continue
        off = data.geom_xpos[g] - anchor
        off = off - axis * float(off @ axis)
        if np.linalg.norm(off) < 0.25 * max(float(model.geom_rbound[g]), 1e-6):
            return True
    return False


def touching_wheels(model: mujoco.MjModel, candidates: Iterable[str]) -> list[str]:
    """The continuous joints among ``candidates`` whose own link (the joint's body, not the
    links below it: a steering knuckle carries a wheel but is none) is centred on the joint
    and reaches the robot's lowest point at ``qpos0``."""
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    low = lowest_point(model, data)
    out = []
    for name in candidates:
        j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if j < 0 or not np.isfinite(low):
            continue
        body = int(model.jnt_bodyid[j])
        if lowest_point(model, data, {body}) <= low + GROUND_TOUCH and \
                _on_axle(model, data, j, body):
            out.append(name)
    return out


def casters(model: mujoco.MjModel, continuous: Iterable[str], driven: Iterable[str]) -> list[str]:
    """The caster joints of a free base: the continuous joints nothing drives whose own link
    rolls on the ground (the caster wheel) or carries one (its swivel). A servo on either
    would drag the base instead of following it."""
    driven = set(driven)
    free = [j for j in continuous if j not in driven]
    rolling = touching_wheels(model, free)
    wheel_bodies = {int(model.jnt_bodyid[model.joint(j).id]) for j in rolling}
    out = []
    for name in free:
        body = int(model.jnt_bodyid[model.joint(name).id])
        carried = any(_below(model, w, body) for w in wheel_bodies)
        if name in rolling or carried:
            out.append(name)
    return out


def _below(model: mujoco.MjModel, body: int, ancestor: int) -> bool:
    while body > 0:
        if body == ancestor:
            return True
        body = int(model.body_parentid[body])
    return False


def decide(base: str, root: ET.Element, wheels: list[str]) -> bool:
    """Whether the base floats: see the module's rule."""
    if base == 'floating':
        return True
    if base == 'fixed':
        return False
    return bool(wheels) and root_link(root) != 'world'


def free_base(spec: mujoco.MjSpec, notes: list[str]) -> None:
    """A free joint on the robot's root body (its first body under the world)."""
    body = spec.worldbody.first_body()
    if body is None:
        raise ModelError('base:=floating, but the URDF has no link to free',
                         where='robot_description')
    body.add_freejoint().name = f'{body.name}_floating'
    notes.append(f'{body.name}: a free base (it drives on its wheels; base:=fixed bolts it '
                 'down)')


def tyre_friction(spec: mujoco.MjSpec, friction: dict[str, tuple[float | None, float | None]],
                  wheels: Iterable[str],
                  notes: list[str]) -> None:
    """Each wheel's (and each ``<gazebo>``-tagged link's) geoms get the description's
    coefficient, with priority over the floor's."""
    bodies = {}
    for link, (mu1, mu2) in friction.items():
        given = [m for m in (mu1, mu2) if m is not None]
        bodies[link] = float(np.mean(given))
        if mu1 is not None and mu2 is not None and mu1 != mu2:
            notes.append(f'{link}: <mu1> {mu1:g} and <mu2> {mu2:g} differ; MuJoCo\'s friction '
                         f'is isotropic here, so it takes their mean {bodies[link]:g}')
    for joint in wheels:
        j = spec.joint(joint)
        if j is not None and j.parent is not None:
            bodies.setdefault(j.parent.name, DEFAULT_MU)
    for link, mu in bodies.items():
        body = spec.body(link)
        if body is None:
            continue
        for geom in body.geoms:
            if geom.contype or geom.conaffinity:
                geom.friction = [mu, geom.friction[1], geom.friction[2]]
                geom.priority = 1


def wheel_gains(model: mujoco.MjModel, data: mujoco.MjData, dofs: Sequence[int],
                efforts: Sequence[float | None],
                radii: Sequence[float]) -> np.ndarray:
    """Velocity-servo kv for wheels: the speed loop's bandwidth on the inertia the wheel
    drives (its own plus its share of the robot's mass at the tyre, ``m r^2 / n``), no
    stiffer than full effort at 0.5 rad/s of speed error."""
    own, _moved = servo_gains.inertia_at(model, data, dofs)
    mass = float(model.body_subtreemass[0])
    share = mass / max(len(dofs), 1) * np.asarray(radii, dtype=float) ** 2
    caps = np.array([e / 0.5 if e and np.isfinite(e) and e > 0 else np.inf for e in efforts])
    return np.minimum((own + share) * servo_gains.bandwidth(model.opt.timestep), caps)


def mark_wheels(spec: mujoco.MjSpec, wheels: Iterable[str]) -> None:
    """Mark the wheels' actuators (a custom numeric each) so the stepper holds them at zero
    speed, as a drive controller stops a base (``sim.drives.wheel_actuators``)."""
    for name in wheels:
        numeric = spec.add_numeric()
        numeric.name = WHEEL_PREFIX + name
        numeric.data = [1.0]


def wheel_radius(model: mujoco.MjModel, data: mujoco.MjData, joint: str) -> float:
    """The distance from a wheel's axle to the lowest point of its own geoms."""
    j = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
    mujoco.mj_kinematics(model, data)
    body = int(model.jnt_bodyid[j])
    anchor = data.xanchor[j]
    low = lowest_point(model, data, {body})
    return float(anchor[2] - low) if np.isfinite(low) and anchor[2] > low else 0.0


def floor_height(model: mujoco.MjModel, data: mujoco.MjData) -> float:
    """Where a free base's floor goes: just below its lowest point."""
    return lowest_point(model, data) - FLOOR_GAP
