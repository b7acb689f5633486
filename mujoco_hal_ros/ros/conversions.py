"""Core values <-> ROS messages: stamps, quaternions, results and the device description.

MuJoCo stores quaternions (w, x, y, z) and ROS (x, y, z, w); every crossing goes through
here so the order is decided once.
"""

from __future__ import annotations

import array
from collections.abc import Iterable, Mapping
import json
import math
from typing import Any, cast, Protocol, TYPE_CHECKING, TypeVar

from builtin_interfaces.msg import Duration, Time
from geometry_msgs.msg import Point, Quaternion, Vector3
import mujoco
import numpy as np
import numpy.typing as npt

from ..checks import named_values
from ..errors import DeviceError, INTERNAL_ERROR, shorten
from ..msg import ActionInfo, ChannelInfo

if TYPE_CHECKING:     # the hints only
    from ..action import MoveTo as MoveToAction
    from ..srv import MoveTo, RunAction

# Codes of SetGoals parts that were fine but not applied because another part was refused.
NOT_APPLIED = 'NOT_APPLIED'


class Outcome(Protocol):
    """A response or action result that says how a request went (most of this package's)."""

    success: bool
    code: str
    message: str


class MoveOutcome(Outcome, Protocol):
    """MoveTo's result and response: an Outcome, and where the move got to."""

    reached: Point
    miss: float


OutcomeT = TypeVar('OutcomeT', bound=Outcome)
MoveT = TypeVar('MoveT', bound=MoveOutcome)


def stamp(seconds: float, kind: type[Time | Duration] = Time) -> Time | Duration:
    """Seconds -> builtin_interfaces/Time, or ``kind=Duration`` (never negative, nanoseconds
    exact: every stamp and time_from_start the nodes send is made here)."""
    ns = max(0, int(round(seconds * 1e9)))
    return kind(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def to_seconds(t: Time | Duration) -> float:
    """builtin_interfaces/Time or Duration -> float seconds (every one the nodes read)."""
    return t.sec + t.nanosec * 1e-9


def doubles(values: npt.ArrayLike) -> array.array[float]:
    """A float64 array as the array('d') rclpy accepts without a per-element check."""
    return array.array('d', np.ascontiguousarray(values, dtype=np.float64).tobytes())


def quat_ros(wxyz: Iterable[float]) -> Quaternion:
    w, x, y, z = (float(v) for v in wxyz)
    return Quaternion(x=x, y=y, z=z, w=w)


def quat_from_mat(mat: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """3x3 (or flat 9) rotation -> MuJoCo (w, x, y, z)."""
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(mat, dtype=np.float64).reshape(9))
    return q


def quat_mul(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return out


def point(xyz: Iterable[float]) -> Point:
    x, y, z = (float(v) for v in xyz)
    return Point(x=x, y=y, z=z)


def vec(v: Vector3 | Point) -> npt.NDArray[np.float64]:
    return np.array([v.x, v.y, v.z], dtype=np.float64)


def point_or_nan(xyz: Iterable[float] | None) -> Point:
    if xyz is None:
        return Point(x=math.nan, y=math.nan, z=math.nan)
    return point(xyz)


def run_action_args(req: RunAction.Request) -> dict[str, Any]:
    """RunAction request's parallel ``arg_names``/``arg_values`` -> ``{name: value}``.

    A plain ``dict(zip(...))`` would keep the last of a name given twice and drop the extra
    values of a longer list; both are refused instead, naming the duplicate.
    """
    return named_values(req.arg_names, req.arg_values, 'arg_names', 'argument')


def move_request(req: MoveToAction.Goal | MoveTo.Request) -> dict[str, Any]:
    """MoveTo goal/request -> keyword arguments of ``Device.move_to`` (no checks here)."""
    kw: dict[str, Any] = {
        'point': [req.target.x, req.target.y, req.target.z], 'site': req.site or None,
        'speed': req.speed if req.speed != 0.0 else None}
    if req.use_aim:
        kw['aim'] = (vec(req.aim_axis).tolist(), vec(req.aim_toward).tolist())
    if getattr(req, 'tolerance', 0.0) != 0.0:
        kw['tolerance'] = req.tolerance
    return kw


def fill_move_result(res: MoveT, result: Mapping[str, Any]) -> MoveT:
    """A core move result dict -> MoveTo result/response fields."""
    res.success = bool(result.get('success', False))
    res.code = str(result.get('code', ''))
    res.message = str(result.get('message', ''))
    res.reached = point_or_nan(result.get('reached'))
    res.miss = float(result.get('miss', math.nan))
    return res


def fill_error(res: OutcomeT, err: DeviceError) -> OutcomeT:
    """A refusal -> result fields; UNREACHABLE carries where the IK got to and the miss."""
    res.success = False
    res.code = err.code
    res.message = str(err)
    if hasattr(res, 'reached'):
        moved = cast(MoveOutcome, res)      # MoveTo's result and response: both fields
        moved.reached = point_or_nan(err.details.get('reached'))
        moved.miss = float(err.details.get('miss', math.nan))
    return res


def error_line(err: BaseException) -> str:
    """One line for a refused request in a log; a DeviceError caps what it repeats of the
    request itself, anything else is cut here, so a huge input never floods the log."""
    if isinstance(err, DeviceError):
        return f'{err.code}: {err}'
    return f'{type(err).__name__}: {shorten(str(err), 400)[1:-1]}'


def _opt(value: float | None) -> tuple[bool, float]:
    return (value is not None, float(value) if value is not None else 0.0)


def channel_infos(desc: Mapping[str, Any]) -> list[ChannelInfo]:
    out = []
    for c in desc['channels']:
        has_min, lo = _opt(c.get('min'))
        has_max, hi = _opt(c.get('max'))
        out.append(ChannelInfo(
            name=c['name'], direction=c['direction'], kind=c['kind'],
            target=str(c.get('target') or ''), axis=str(c.get('axis') or ''),
            unit=str(c.get('unit') or ''), has_min=has_min, min=lo, has_max=has_max, max=hi,
            max_change_per_s=float(c.get('max_change_per_s') or 0.0),
            every=float(c.get('every') or 0.0), drive=str(c.get('drive') or '')))
    return out


def action_infos(desc: Mapping[str, Any]) -> list[ActionInfo]:
    out = []
    for a in desc['actions']:
        args = a.get('args', {})
        out.append(ActionInfo(
            name=a['name'], command=a['command'], arg_names=list(args),
            arg_units=[str(v.get('unit') or '') for v in args.values()],
            arg_min=[math.nan if v.get('min') is None else float(v['min'])
                     for v in args.values()],
            arg_max=[math.nan if v.get('max') is None else float(v['max'])
                     for v in args.values()],
            effects=list(a.get('effects', []))))
    return out


def describe_json(desc: Mapping[str, Any]) -> str:
    """The whole description as JSON; numpy values and infinities made JSON-safe."""
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if isinstance(v, np.ndarray):
            return clean(v.tolist())
        if isinstance(v, (np.floating, float)):
            v = float(v)
            return v if math.isfinite(v) else None
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, (str, int, bool)) or v is None:
            return v
        return str(v)
    return json.dumps(clean(desc), sort_keys=True)


def vector3(xyz: Iterable[float]) -> Vector3:
    x, y, z = (float(v) for v in xyz)
    return Vector3(x=x, y=y, z=z)


def refuse(resp: OutcomeT, exc: BaseException) -> OutcomeT:
    """Fill a ``success``/``code``/``message`` response from ``exc``: a DeviceError's own
    code, anything else INTERNAL_ERROR with its type; returns ``resp``."""
    resp.success = False
    if isinstance(exc, DeviceError):
        resp.code, resp.message = exc.code, str(exc)
    else:
        resp.code, resp.message = INTERNAL_ERROR, f'{type(exc).__name__}: {exc}'
    return resp
