"""The running move_to moves of one world: started, settled, re-aimed and ended.

``motion.move`` plans a move (IK, paths) and judges it (``settle``); this is what keeps
the moves that run, one a robot at most (``sim.robots``): it starts a planned move on the
physics thread (ending the same robot's older one ``PREEMPTED``), looks at every move after
each chunk, re-aims a near miss on its own thread (the IK never runs on the physics
thread), and ends moves when something takes their actuators, a hold, a reset, an
instability or a model swap. It sees of the device only ``sim.ports.MoveHost``:
``on_physics``, ``snapshot``, ``model``, ``layout``, ``params``, ``record``, ``robots``.
Its closures run on the physics thread (started, settled, re-aimed, ended there); the
IK never does.
"""

from __future__ import annotations

from collections.abc import Callable
import concurrent.futures
import logging
from typing import Any, TYPE_CHECKING

from .. import errors
from ..config import limits
from ..errors import DeviceError
from . import move as moves, settling

if TYPE_CHECKING:     # the hint only: sim/ imports this module
    from ..sim.physics import Physics
    from ..sim.ports import MoveHost

LOG = logging.getLogger('mujoco_hal_ros.device')


class MoveRunner:
    """The moves running on one device (``Device.move_to`` is its door)."""

    def __init__(self, device: MoveHost) -> None:
        self._device = device
        self._moves: list = []          # owned by the physics thread
        self.latest: moves.Move | None = None
        # re-aims' IK: off the physics thread, one at a time (``_re_aim``)
        self._aiming = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix='mujoco_hal_ros-aim')

    @property
    def running(self) -> list:
        """The moves not finished yet."""
        return [m for m in self._moves if not m.done()]

    # --- starting -----------------------------------------------------------------------
    def start(self, act: Any, args: Any = None, *, point: Any = None, speed: Any = None,
              aim: Any = None, wait: Any = True, timeout: Any = None, path: Any = None,
              tolerance: Any = None, planner: Any) -> Any:
        """Check, plan (IK on the caller's thread) and start a move; its result dict, or
        with ``wait=False`` the ``Move`` (see ``Device.move_to``)."""
        dev = self._device
        target, speed_ms, aim, use_path, timeout = moves.check_request(
            act, args, point, speed, aim, wait, timeout, path)
        tol = dev.params['tolerance'] if tolerance is None else limits.tolerance(tolerance)
        move = planner.plan(act, dev.snapshot, target, speed_ms, aim, use_path,
                            tol, dev.params['aim_tolerance'])
        move.tolerance, move.planner = tol, planner
        acts = move.actuators

        def apply(s: Physics) -> None:
            now = s.time
            plan = moves.start_plan(dev.model, move, s.joint_setpoint[acts], now)
            for old in self.running:
                if dev.robots.same_robot(old.actuators, acts):
                    old.finish(self.result(old, errors.PREEMPTED, False,
                                           'a newer move_to took over'))
            s.take_over(plan, positions=True)
            move.plan_end = plan.t_end
            move.duration = plan.t_end - now
            self._moves = self.running + [move]
            self.latest = move
            dev.record('move_to', {'action': act.name, 'target_m': target.tolist(),
                                   'speed_m_s': speed_ms, 'path': use_path},
                       {dev.layout.actuators[a]: float(v)
                        for a, v in zip(acts, move.q_goal, strict=True)}, sim_time=now)
        dev.on_physics(apply, wait=True)
        if not wait:
            return move
        limit = dev.params['action_wait'] if timeout is None else timeout
        move.wait(limit)
        if move.done():
            return move.result
        return self.result(move, errors.STARTED, True,
                           f'still moving after {limit:g} s; '
                           f'{self.distance_to_go(move) * 1000:.1f} mm to go')

    # --- reading ------------------------------------------------------------------------
    def result(self, move: Any, code: str, success: bool, message: str,
               snap: Any = None) -> dict:
        return moves.result(_layout_of(move, self._device.layout), move, code, success,
                            message, snap or self._device.snapshot)

    def distance_to_go(self, move: Any = None) -> float:
        move = move or self.latest
        if move is None:
            return 0.0
        return moves.distance_to_go(_layout_of(move, self._device.layout), move,
                                    self._device.snapshot)

    # --- ending (physics thread) ----------------------------------------------------------
    def preempt_touching(self, actuators: Any) -> None:
        """A running move that drives any of these actuators ends PREEMPTED: another
        command took them over, so it cannot arrive as planned."""
        names = self._device.layout.actuators
        for move in self.running:
            touched = set(actuators) & set(move.actuators)
            if touched:
                move.finish(self.result(move, errors.PREEMPTED, False,
                                        'a newer goal took over '
                                        + ', '.join(names[a] for a in sorted(touched))))

    def end(self, code: str, message: str, snap: Any = None,
            actuators: Any = None) -> None:
        """End the running moves (those driving any of ``actuators``, when given)."""
        for move in self.running:
            if actuators is None or set(move.actuators) & set(actuators):
                move.finish(self.result(move, code, False, message, snap))

    def end_for_swap(self, old_layout: Any, gone: list, renumber: bool, code: str,
                     ended: str, snap: Any) -> list:
        """A model swap: moves end when the joints were renumbered or their actuators went
        with an entity; ``gone`` plus the actuators whose paths stop where they are."""
        for move in self.running:
            if renumber or set(gone) & set(move.actuators):
                why = ended if renumber else \
                    f'{ended.split(":")[0]}: the move\'s actuators went with the entity'
                move.finish(moves.result(_layout_of(move, old_layout), move, code, False,
                                         why, snap))
                gone = gone + list(move.actuators)
        return gone

    # --- after each chunk (physics thread) ---------------------------------------------
    def after_chunk(self, physics: Physics) -> None:
        """Finish each move once its path ended and the point settled."""
        for move in self.running:
            if move.plan_end is not None and not getattr(move, 'aiming', False):
                self._settle(physics, move)

    def _settle(self, physics: Physics, move: Any) -> None:
        dev = self._device
        snap = physics.snapshot
        ended = moves.settle(_layout_of(move, dev.layout), move, snap, dev.params['tolerance'],
                             dev.params['aim_tolerance'])
        if ended is None:
            return
        if not ended[0] and self._re_aim(physics, move, snap):
            return
        if move.then:
            self._apply_then(physics, move)
        arrived, message = ended
        if not arrived:
            message += moves.why_short(dev.model, move, snap)
        move.finish(self.result(move, errors.DONE if arrived else errors.MISSED,
                                arrived, message, snap))

    def _re_aim(self, physics: Physics, move: Any, snap: Any) -> bool:
        """A move that stopped out of tolerance, but near, gets another go from where the
        joints really are (``Planner.correct``); False when it cannot. The IK runs on the
        aiming thread: the physics goes on stepping (the move held where it stopped) and
        the new path is posted back through the device's door when solved (``_aimed``)."""
        dev = self._device
        miss = moves.distance_to_go(_layout_of(move, dev.layout), move, snap)
        speed = settling.joint_speed(snap.qvel, move.joints_dof)
        if move.corrections >= moves.CORRECTIONS or miss > moves.CORRECT_WITHIN \
                or not settling.is_still(speed) or move.cartesian is not None:
            return False
        tol = dev.params['tolerance'] if move.tolerance is None else move.tolerance
        setpoint = physics.joint_setpoint[move.actuators]
        aim_tol = dev.params['aim_tolerance']
        move.aiming = True

        def solve() -> None:
            try:
                q = move.planner.correct(move, snap, tol, aim_tol, setpoint=setpoint)
            except Exception:  # noqa: BLE001 - no correction: the move ends MISSED
                LOG.exception('re-aim failed')
                q = None
            try:
                dev.on_physics(self._aimed(move, q), wait=False)
            except DeviceError:
                pass                           # closed meanwhile
        self._aiming.submit(solve)
        return True

    def _aimed(self, move: Any, q: Any) -> Callable[[Physics], None]:
        """The physics-thread closure that makes a re-aim's solution the move's new path;
        None: no better goal, and the move ends as it stands at its next settle."""
        def apply(physics: Physics) -> None:
            move.aiming = False
            if move.done():
                return
            if q is None:
                move.corrections = moves.CORRECTIONS
                return
            now = physics.time
            plan = moves.correction_plan(move, physics.joint_setpoint[move.actuators], q,
                                         now)
            physics.take_over(plan, positions=True)
            move.plan_end = plan.t_end
            move.best_miss = move.best_time = None
            move.corrections += 1
        return apply

    def _apply_then(self, physics: Physics, move: Any) -> None:
        dev = self._device
        now = physics.time
        layout = _layout_of(move, dev.layout)
        for plan in moves.then_plans(layout, move.then, physics.goal_setpoint, now):
            physics.take_over(plan)
        dev.record('then', {'action': move.action.name, 'then': dict(move.action.then)},
                   {layout.goals[n].actuator_name: float(v)
                    for n, v in move.then.items()}, sim_time=now)

    def close(self) -> None:
        self._aiming.shutdown(wait=False, cancel_futures=True)


def _layout_of(move: Any, default: Any) -> Any:
    """The channels a move's names are in: one robot's (``RobotView``: its own names, a
    ``Layout`` with a prefix) or the device's (``default``)."""
    layout = getattr(getattr(move, 'planner', None), 'layout', None)
    return layout if getattr(layout, 'prefix', '') else default
