"""The web viewer as a user opens it: sim_node in its own process, a real browser.

Headless Chromium loads the page ``web_viewer:=<port>`` serves (the browser renders the
scene with WebGL), before and after a ``move_to``: the canvas must be drawn (not one flat
colour) and the arm's orange pixels must have moved. Skips, saying why, without a browser.
"""

import functools
import re
import socket
import time

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')
cv2 = pytest.importorskip('cv2')

from action_msgs.msg import GoalStatus  # noqa: E402

from browser import screenshot, why_no_browser  # noqa: E402
from helpers import START_S, wait_for  # noqa: E402
from test_sim_e2e import Client  # noqa: E402

pytestmark = pytest.mark.skipif(bool(why_no_browser()), reason=why_no_browser() or 'ok')
STATUS_BAR = 48            # the viewer's own status line at the bottom changes by itself


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def arm_pixels(image):
    """The bench arm's orange links (BGR)."""
    b, g, r = (image[:-STATUS_BAR, :, i].astype(int) for i in range(3))
    return (r > 150) & (g > 70) & (g < 190) & (b < 90)


def colours(image):
    return len(np.unique(image[:-STATUS_BAR].reshape(-1, 3), axis=0))


def drawn_screenshot(url):
    """A screenshot once the page has drawn its scene. The WebAssembly viewer compiles for
    seconds of page time, more on a loaded machine: a blank first shot gets a longer one."""
    for settle_ms in (20000, 60000):
        image = screenshot(url, settle_ms=settle_ms)
        if image[:-STATUS_BAR].std() > 10 and colours(image) > 100:
            return image
    pytest.fail(f'a blank canvas after {settle_ms} ms of page time ({colours(image)} colours)')


@pytest.fixture
def start_sim(start_node):
    return functools.partial(start_node, 'sim_node')


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


def test_browser_shows_the_arm_move(start_sim, spawn, client):
    port = free_port()
    proc = start_sim(f'web_viewer:={port}', 'thread_priority:=0')
    url = wait_for(lambda: (re.search(r'web viewer: (http://\S+)', spawn.output(proc)) or
                            [None, None])[1] or proc.poll() is not None, START_S)
    assert isinstance(url, str), f'no web viewer URL; sim_node said:\n{spawn.output(proc)}'
    assert url == f'http://localhost:{port}/'
    client.wait_graph(['/move_to'], START_S, proc, spawn)
    before = drawn_screenshot(url)
    res = client.move_to('/move_to', (0.17, 0.03, 0.05))
    assert res.status == GoalStatus.STATUS_SUCCEEDED, res.result.message
    time.sleep(0.5)
    arm_before = arm_pixels(before)
    assert arm_before.sum() > 100, 'no arm on the page'
    # A page that has just connected shows the state the viewer last streamed until its UI
    # stream starts the viewer's frames again (the studio streams only while a page's UI is
    # connected), which a loaded machine can delay past one shot: a few shots, each a fresh
    # browser, until the new pose is on the page.
    for _ in range(3):
        arm_after = arm_pixels(drawn_screenshot(url))
        moved = (arm_before ^ arm_after).sum()
        if moved > 0.3 * max(arm_before.sum(), arm_after.sum()):
            break
    assert arm_after.sum() > 100, 'no arm on the page after the move'
    assert moved > 0.3 * max(arm_before.sum(), arm_after.sum()), \
        f'the arm did not move on the page ({moved} pixels changed)'
    assert proc.poll() is None
