"""Headless Chromium for the tests: a page kept open and looked at, or the reason there is none.

Debian's ``chromium`` with the flags this machine's closed network needs (no background
connections, or Chromium's own connections are refused and the page never settles) and
SwiftShader for WebGL without a GPU. The page stays open in one browser and is captured over
the DevTools protocol (``--remote-debugging-pipe``: NUL-separated JSON on fds 3 and 4, no
port and no client library), as often as a test asks, in real time. Chromium's one-shot
``--screenshot`` was dropped: Chromium 156 returns an all-black image for a drawn WebGL page
in about half its runs, at any virtual-time budget and with any of the GL flags, so a test
built on it could not tell a blank viewer from a blank capture.
"""

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time

from helpers import wait_for

FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync',
         '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--hide-scrollbars',
         '--mute-audio']
STATUS_BAR = 48            # the MuJoCo web viewer's status line, which changes by itself


def colours(image):
    """How many colours the viewer's canvas (above its status line) shows."""
    import numpy as np
    return len(np.unique(image[:-STATUS_BAR].reshape(-1, 3), axis=0))


def viewer_drawn(image):
    """Whether the web viewer has drawn its scene: not one flat colour, and not the status
    line alone over a canvas still waiting for its model."""
    return image[:-STATUS_BAR].std() > 10 and colours(image) > 100


def chromium():
    """The browser's path, or None."""
    for name in ('chromium', 'chromium-browser', 'google-chrome'):
        path = shutil.which(name)
        if path:
            return path
    return None


def why_no_browser():
    """'' where a browser is here, else the reason the browser tests skip."""
    if chromium():
        return ''
    return ('no chromium here: scripts/setup.sh installs it with apt (it could not, or was '
            'not run); apt-get install chromium to run this test')


class Page:
    """``url`` open in a fresh headless Chromium (fresh profile) until ``close()``."""

    def __init__(self, url, width=800, height=600, timeout=60.0):
        self.timeout = float(timeout)
        self._profile = tempfile.mkdtemp(prefix='mujoco_hal_ros_chromium_')
        to_chrome, self._write_fd = os.pipe()
        self._read_fd, from_chrome = os.pipe()
        log = open(os.path.join(self._profile, 'stderr.txt'), 'wb')
        # The protocol pipe must be fds 3 and 4 in the browser: bash moves them there (dash
        # takes one-digit fds only).
        self._proc = subprocess.Popen(
            ['bash', '-c', f'exec "$0" "$@" 3<&{to_chrome} 4>&{from_chrome}', chromium(), *FLAGS,
             f'--user-data-dir={self._profile}', '--remote-debugging-pipe',
             f'--window-size={width},{height}', url],
            pass_fds=(to_chrome, from_chrome), stdout=subprocess.DEVNULL,
            stderr=log)
        log.close()
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer = b''
        self._next_id = 0
        self._session = None
        try:
            page = self._page_target()
            self._session = self._call('Target.attachToTarget',
                                       {'targetId': page['targetId'], 'flatten': True}
                                       )['sessionId']
        except BaseException:
            self.close()
            raise

    def _page_target(self):
        """The tab Chromium opened on the URL, which it may list a moment after starting."""
        pages = wait_for(lambda: [t for t in self._call('Target.getTargets')['targetInfos']
                                  if t['type'] == 'page'], self.timeout, period=0.1)
        if not pages:
            raise AssertionError(f'chromium opened no page in {self.timeout:.0f} s')
        return pages[0]

    def _call(self, method, params=None):
        self._next_id += 1
        message = {'id': self._next_id, 'method': method, 'params': params or {}}
        if self._session:
            message['sessionId'] = self._session
        os.write(self._write_fd, json.dumps(message).encode() + b'\0')
        deadline = time.monotonic() + self.timeout
        while True:
            while b'\0' not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._read_fd], [], [], left)[0]:
                    raise AssertionError(f'chromium did not answer {method} in '
                                         f'{self.timeout:.0f} s')
                chunk = os.read(self._read_fd, 1 << 20)
                if not chunk:
                    raise AssertionError(f'chromium closed its protocol pipe during {method} '
                                         f'(exit {self._proc.poll()}):\n{self._stderr()}')
                self._buffer += chunk
            line, self._buffer = self._buffer.split(b'\0', 1)
            reply = json.loads(line)
            if reply.get('id') == self._next_id:
                if 'error' in reply:
                    raise AssertionError(f'chromium refused {method}: {reply["error"]}')
                return reply['result']

    def _stderr(self):
        try:
            with open(os.path.join(self._profile, 'stderr.txt'), 'rb') as f:
                return f.read()[-2000:].decode(errors='replace')
        except OSError:
            return ''

    def shot(self):
        """What the page shows now, as an HxWx3 uint8 BGR array."""
        import cv2
        import numpy as np
        data = base64.b64decode(self._call('Page.captureScreenshot', {'format': 'png'})['data'])
        image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise AssertionError('chromium sent a screenshot that is not a PNG')
        return image

    def shot_until(self, ok, timeout):
        """``(True, shot)`` for the first shot for which ``ok(shot)`` holds, else ``(False,
        the last shot)`` after ``timeout`` seconds."""
        last = []

        def look():
            last[:] = [self.shot()]
            return ok(last[0])
        return bool(wait_for(look, timeout, period=0.5)), last[0]

    def close(self):
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait(10)
        for fd in (self._write_fd, self._read_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._write_fd = self._read_fd = -1
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
