"""Start-up abuse: hostile device files, odd model paths, absurd rates and sizes.

Each ends the process within a few seconds, exit code 2, with one line naming the
parameter or key, no traceback, in bounded memory; a model under a path with spaces and
non-ASCII letters starts.
"""

import os
import time

import pytest

pytest.importorskip('rclpy')

from dds_helpers import assert_clean, start_sim  # noqa: E402

EXIT_S = 20.0           # import + refusal on a loaded 2-core machine (about 1 s idle)
MAX_RSS_KB = 1 << 20    # 1 GiB: a refused start never builds anything big

BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + ''.join(
    f'{c}: &{c} [' + ','.join([f'*{p}'] * 9) + ']\n'
    for p, c in zip('abcdefgh', 'bcdefghi', strict=True))

BOX = """<mujoco model="box"><worldbody><body name="b"><joint name="j" axis="0 0 1"/>
<geom type="box" size=".1 .1 .1"/></body></worldbody>
<actuator><position name="p" joint="j"/></actuator></mujoco>
"""


def files(tmp_path):
    (tmp_path / 'bomb.yaml').write_text(BOMB)
    (tmp_path / 'big.yaml').write_text('# ' + 'x' * (2 << 20) + '\n')
    (tmp_path / 'deep.yaml').write_text('device: ' + '[' * 5000 + ']' * 5000 + '\n')
    (tmp_path / 'empty.xml').write_text('')
    (tmp_path / 'a dir').mkdir()


CASES = [
    ('device_file:=bomb.yaml', 'alias'),
    ('device_file:=big.yaml', 'MAX_DEVICE_FILE_BYTES'),
    ('device_file:=deep.yaml', 'nested more than'),
    ('model:=a dir', 'parameter model'),
    ('model:=/dev/zero', 'parameter model'),
    ('model:=empty.xml', 'empty.xml'),
    ('publish_rate:=1e308', 'parameter publish_rate'),
    ('publish_rate:=-5.0', 'parameter publish_rate'),
    ('tf_rate:=.nan', 'parameter tf_rate'),
    ('diagnostics_rate:=.inf', 'parameter diagnostics_rate'),
    ('camera_width:=100000000', 'parameter camera_width'),
    ('camera_height:=-1', 'parameter camera_height'),
    ('camera_rate:=1e9', 'parameter camera_rate'),
]


def wait_rusage(proc, timeout):
    """(exit code, max RSS in kB) of the child, or None if it is still running."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss
        time.sleep(0.05)
    return None


@pytest.mark.parametrize('param, words', CASES, ids=[c[0] for c in CASES])
def test_hostile_start_exits_with_one_line(spawn, tmp_path, param, words):
    files(tmp_path)
    proc = start_sim(spawn, param, name='abuse')
    got = wait_rusage(proc, EXIT_S)
    out = spawn.output(proc)
    assert got is not None, f'{param}: still running after {EXIT_S} s:\n{out[-2000:]}'
    code, rss = got
    lines = [line for line in out.splitlines() if line.strip()]
    assert code == 2, out[-2000:]
    assert len(lines) == 1 and lines[0].startswith('sim_node: '), lines
    assert words in lines[0], lines
    assert len(lines[0]) < 1000
    assert_clean(out, param)
    assert rss < MAX_RSS_KB, f'{param}: {rss} kB'


def test_model_under_a_path_with_spaces_and_unicode_starts(spawn, tmp_path):
    folder = tmp_path / 'my models' / 'caf\u00e9 \u6a5f\u68b0'
    folder.mkdir(parents=True)
    (folder / 'box scene.xml').write_text(BOX)
    proc = start_sim(spawn, f'model:={folder / "box scene.xml"}', 'log_summary:=true',
                     name='unicode')
    end = time.monotonic() + 45.0
    while 'publishing:' not in spawn.output(proc) and time.monotonic() < end \
            and proc.poll() is None:
        time.sleep(0.1)
    out = spawn.output(proc)
    assert 'publishing:' in out, out[-2000:]
    assert_clean(out, 'unicode path')
