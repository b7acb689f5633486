"""The web viewer as a user opens it: sim_node in its own process, a real browser.

Headless Chromium keeps open the page ``web_viewer:=<port>`` serves (the browser renders
the scene with WebGL) and is looked at before and after a ``move_to``: the canvas must be
drawn (not one flat colour) and the arm's orange pixels must have moved. Skips, saying why,
without a browser.
"""

import re
import socket

import pytest

rclpy = pytest.importorskip('rclpy')
cv2 = pytest.importorskip('cv2')

from action_msgs.msg import GoalStatus  # noqa: E402
from browser import colours, Page, STATUS_BAR, viewer_drawn, why_no_browser  # noqa: E402
from helpers import START_S, wait_for  # noqa: E402

pytestmark = pytest.mark.skipif(bool(why_no_browser()), reason=why_no_browser() or 'ok')
PAGE_S = 90.0              # for the page to draw, then to show the move


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def arm_pixels(image):
    """The bench arm's orange links (BGR)."""
    b, g, r = (image[:-STATUS_BAR, :, i].astype(int) for i in range(3))
    return (r > 150) & (g > 70) & (g < 190) & (b < 90)


def test_browser_shows_the_arm_move(start_sim, spawn, client):
    port = free_port()
    proc = start_sim(f'web_viewer:={port}', 'thread_priority:=0')
    url = wait_for(lambda: (re.search(r'web viewer: (http://\S+)', spawn.output(proc)) or
                            [None, None])[1] or proc.poll() is not None, START_S)
    assert isinstance(url, str), f'no web viewer URL; sim_node said:\n{spawn.output(proc)}'
    assert url == f'http://localhost:{port}/'
    client.wait_graph(['/move_to'], START_S, proc, spawn)
    with Page(url) as page:
        # The WebAssembly viewer compiles for seconds, more on a loaded machine.
        drawn, before = page.shot_until(viewer_drawn, PAGE_S)
        assert drawn, f'a blank canvas after {PAGE_S:.0f} s ({colours(before)} colours)'
        arm_before = arm_pixels(before)
        assert arm_before.sum() > 100, 'no arm on the page'
        res = client.move_to('/move_to', (0.17, 0.03, 0.05))
        assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message

        def moved(image):
            arm_after = arm_pixels(image)
            return (viewer_drawn(image) and arm_after.sum() > 100 and
                    (arm_before ^ arm_after).sum() > 0.3 * max(arm_before.sum(),
                                                               arm_after.sum()))
        shown, after = page.shot_until(moved, PAGE_S)
    arm_after = arm_pixels(after)
    assert shown, (
        f'the arm did not move on the page in {PAGE_S:.0f} s ({arm_after.sum()} arm '
        f'pixels, {(arm_before ^ arm_after).sum()} changed)')
    assert proc.poll() is None
