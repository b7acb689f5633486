"""The conformance table: every zoo model against the one battery (model x check).

    python bench/conformance.py [--markdown] [--urdf] [--only NAME ...]

The same battery as the conformance test tier (``mujoco_hal_ros.conformance``), printed as
a table: pass, FAIL or skip per cell, then every failure's and skip's reason. With
``--markdown`` the table is the one the README carries.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))

from mujoco_hal_ros.conformance import battery, urdf_zoo, zoo  # noqa: E402


def table(rows, markdown):
    head = ['model', 'kind'] + list(battery.CHECKS)
    lines = []
    if markdown:
        lines.append('| ' + ' | '.join(head) + ' |')
        lines.append('|' + '---|' * len(head))
    else:
        lines.append(' '.join(f'{h:<11}' for h in head))
    for zm, results in rows:
        marks = {r.check: r.mark for r in results}
        cells = [zm.name, zm.kind] + [marks.get(c, '') for c in battery.CHECKS]
        if markdown:
            lines.append('| ' + ' | '.join(cells) + ' |')
        else:
            lines.append(f'{cells[0]:<28} {cells[1]:<8} ' +
                         ' '.join(f'{c:<11}' for c in cells[2:]))
    return '\n'.join(lines)


def notes(rows, markdown):
    out = []
    for _zm, results in rows:
        for r in results:
            if r.mark == 'pass':
                continue
            why = r.skipped_reason or r.detail
            if r.mark == 'FAIL' and (r.model, r.check) in zoo.KNOWN_FAILURES:
                why = f'{why} [known: {zoo.KNOWN_FAILURES[(r.model, r.check)]}]'
            out.append(f'- {r.model} {r.check} ({r.mark}): {why}' if markdown
                       else f'{r.model:<28} {r.check:<12} {r.mark}: {why}')
    return '\n'.join(out)


def _worst(cells, key):
    best = (0.0, '')
    for r in cells:
        if r.metrics and key in r.metrics and r.metrics[key][0] >= best[0]:
            best = (r.metrics[key][0], f'{r.model} {r.metrics[key][1]}')
    return best


def summary(rows):
    """The numbers the issues ask for, from the same run: worst step response over every
    joint, FollowJointTrajectory final errors, move_to success on the soft-servo arms."""
    cells = [r for _z, rs in rows for r in rs]
    lines = ['', 'summary:']
    steps = [r for r in cells if r.check == 'step' and r.metrics]
    if steps:
        over, settle, var = (_worst(steps, k) for k in ('overshoot', 'settling', 'variation'))
        lines.append(f'  step response over {len(steps)} models: worst overshoot '
                     f'{over[0]:.1%} ({over[1]}), worst settling {settle[0]:.3f} s '
                     f'({settle[1]}), worst variation/step {var[0]:.2f} ({var[1]})')
    traj = [r for r in cells if r.check.startswith('trajectory') and r.metrics]
    if traj:
        worst = max(traj, key=lambda r: r.metrics['final_error'])
        ok = sum(r.metrics['final_error'] <= battery.GOAL_TOL and r.passed for r in traj)
        lines.append(f'  FollowJointTrajectory: {ok}/{len(traj)} end SUCCEEDED within '
                     f'{battery.GOAL_TOL:g} rad; worst final error '
                     f'{worst.metrics["final_error"]:.1e} rad ({worst.model})')
    soft = [r for r in cells if r.check == 'move_to' and r.metrics and
            (r.model.endswith('_soft') or r.model.startswith('urdf_'))]
    if soft:
        done = sum(r.metrics['done'] for r in soft)
        total = sum(r.metrics['targets'] for r in soft)
        lines.append(f'  move_to on {len(soft)} soft-servo / URDF arms: {done}/{total} '
                     f'targets DONE within tolerance ({done / total:.0%})')
    return '\n'.join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--markdown', action='store_true')
    ap.add_argument('--only', nargs='*', default=None, help='zoo model names')
    ap.add_argument('--quick', action='store_true', help='the same run (make bench)')
    ap.add_argument('--urdf', action='store_true',
                    help='the URDF zoo (example-robot-data) instead of the MJCF zoo')
    args = ap.parse_args()
    rows = []
    t0 = time.monotonic()
    for zm in (urdf_zoo.models() if args.urdf else zoo.models()):
        if args.only and zm.name not in args.only:
            continue
        rows.append((zm, battery.run(zm)))
    print(table(rows, args.markdown))
    print()
    print(notes(rows, args.markdown))
    cells = [r for _z, rs in rows for r in rs]
    failed = sum(r.mark == 'FAIL' for r in cells)
    print(f'\n{len(rows)} models, {len(cells)} checks: {failed} failed, '
          f'{sum(r.mark == "skip" for r in cells)} skipped, {time.monotonic() - t0:.0f} s')
    print(summary(rows))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
