"""Headless Chromium for the tests: a screenshot of a page, or the reason there is none.

Debian's ``chromium`` with the flags this machine's closed network needs (no background
connections, or Chromium's own connections are refused and the page never settles) and
SwiftShader for WebGL without a GPU. Each screenshot is a fresh browser with a fresh
profile, so nothing is cached between two shots of the same page.
"""

import os
import shutil
import subprocess
import tempfile

FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync',
         '--use-angle=swiftshader', '--enable-unsafe-swiftshader', '--hide-scrollbars',
         '--mute-audio']


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


def screenshot(url, width=800, height=600, settle_ms=20000, timeout=120.0):
    """The page at ``url`` as an HxWx3 uint8 BGR array, after ``settle_ms`` of page time."""
    import cv2
    folder = tempfile.mkdtemp(prefix='mujoco_hal_ros_chromium_')
    try:
        shot = os.path.join(folder, 'shot.png')
        result = subprocess.run(
            [chromium(), *FLAGS, f'--user-data-dir={folder}/profile', f'--screenshot={shot}',
             f'--window-size={width},{height}', f'--virtual-time-budget={settle_ms}', url],
            capture_output=True, text=True, timeout=timeout)
        if not os.path.isfile(shot):
            raise AssertionError(f'chromium wrote no screenshot (exit {result.returncode}):\n'
                                 f'{result.stderr[-2000:]}')
        image = cv2.imread(shot)
        if image is None:
            raise AssertionError(f'the screenshot is not a PNG: {shot}')
        return image
    finally:
        shutil.rmtree(folder, ignore_errors=True)
