"""One render state per device: two threads drawing at once each get the frame of their own
snapshot, as ``Device.render`` and the camera streams do in a node."""

import threading

import numpy as np
import pytest

from mujoco_hal_ros.render import gl

GL_PROBLEM = gl.probe()
needs_gl = pytest.mark.skipif(GL_PROBLEM is not None, reason=f'no headless GL: {GL_PROBLEM}')
W, H = 96, 72
ROUNDS = 60


def two_poses(bench):
    """Snapshots of the arm before and after a large move: frames that differ."""
    before = bench.snapshot
    bench.set_goals({'pan_goal': 80, 'lift_goal': 20})
    bench.step(3000)
    return before, bench.snapshot


@needs_gl
def test_render_and_a_stream_at_once_draw_their_own_snapshots(bench):
    before, after = two_poses(bench)
    stream = bench.cameras.renderer('overhead', W, H, depth=True)    # a camera stream's renderer
    with bench.cameras.render_state(before) as data:
        want_before = stream.render_rgb(data)
    want_after = bench.cameras.render('overhead', W, H)              # the latest snapshot: after
    assert not np.array_equal(want_before, want_after), 'the two poses look the same'
    wrong = {'render': 0, 'stream': 0}
    failed = []

    def render_loop():
        try:
            for _ in range(ROUNDS):
                if not np.array_equal(bench.cameras.render('overhead', W, H), want_after):
                    wrong['render'] += 1
        except Exception as exc:  # noqa: BLE001 - reported by the test thread
            failed.append(exc)

    def stream_loop():
        try:
            for _ in range(ROUNDS):
                with bench.cameras.render_state(before) as data:
                    frame = stream.submit(data, rgb=True).result()
                if not np.array_equal(frame.rgb_top_down(), want_before):
                    wrong['stream'] += 1
        except Exception as exc:  # noqa: BLE001
            failed.append(exc)

    threads = [threading.Thread(target=render_loop), threading.Thread(target=stream_loop)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60.0)
    assert not failed, failed
    assert wrong == {'render': 0, 'stream': 0}, f'frames of the other snapshot: {wrong}'


def test_render_data_is_the_callers_own(bench):
    """``render_data`` hands out a new MjData posed at the snapshot, never the shared one."""
    before, after = two_poses(bench)
    mine = bench.cameras.render_data(before)
    with bench.cameras.render_state(after) as shared:
        assert shared is not mine
        assert not np.array_equal(shared.xpos, mine.xpos)
    np.testing.assert_array_equal(mine.qpos, before.qpos)
    np.testing.assert_array_equal(mine.xpos[1:], before.xpos[1:])
