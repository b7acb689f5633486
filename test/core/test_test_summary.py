"""make test's summary line counts each test once, by its last attempt, counts the tests
that needed a rerun, and fails the run when more than a few did.

The xunit files are written by a real pytest run with the real pytest-rerunfailures (what
colcon test runs), on small generated tests: one passes, some fail once then pass, one
fails every time.
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SUMMARY = os.path.join(ROOT, 'scripts', 'test_summary.py')

FLAKY = '''
def test_flaky_{i}(tmp_path_factory):
    marker = os.path.join(MARKERS, 'flaky_{i}')
    if not os.path.exists(marker):
        open(marker, 'w').close()
        assert False, 'fails the first time only'
'''


def _build(tmp_path, flaky=0, failing=False):
    """A colcon-like build folder whose xunit file a real pytest run with reruns wrote."""
    pytest.importorskip('pytest_rerunfailures', reason='pytest-rerunfailures is a test extra')
    tests = tmp_path / 'tests'
    tests.mkdir()
    (tests / 'markers').mkdir()
    body = ['import os', f'MARKERS = {str(tests / "markers")!r}', '',
            'def test_passes():', '    assert True', '']
    body += [FLAKY.format(i=i) for i in range(flaky)]
    if failing:
        body += ['def test_always_fails():', '    assert False', '']
    (tests / 'test_generated.py').write_text('\n'.join(body))
    xml = tmp_path / 'build' / 'pkg' / 'test_results' / 'pkg' / 'test_core.xunit.xml'
    xml.parent.mkdir(parents=True)
    subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
                    '--reruns', '1', f'--junitxml={xml}', '-o', 'junit_family=xunit2',
                    str(tests)], capture_output=True, text=True, timeout=120, cwd=tests)
    assert xml.exists()
    return tmp_path / 'build'


def _summary(build, **env):
    out = subprocess.run([sys.executable, SUMMARY, str(build)], capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, **env))
    return out.returncode, out.stdout.splitlines()


def test_a_rerun_counts_once_and_is_listed(tmp_path):
    code, lines = _summary(_build(tmp_path, flaky=2, failing=True))
    assert lines[-1] == '3 passed, 1 failed, 0 skipped, 3 rerun', lines
    assert 'FAILED test_generated.test_always_fails' in lines
    assert 'RERUN test_generated.test_flaky_0 (passed on its rerun)' in lines
    assert code == 1


def test_a_few_reruns_pass(tmp_path):
    code, lines = _summary(_build(tmp_path, flaky=2))
    assert lines[-1] == '3 passed, 0 failed, 0 skipped, 2 rerun', lines
    assert code == 0


def test_more_than_five_reruns_fail_the_run(tmp_path):
    build = _build(tmp_path, flaky=6)
    code, lines = _summary(build)
    assert lines[-1] == '7 passed, 0 failed, 0 skipped, 6 rerun', lines
    assert any('6 tests needed a rerun, more than the 5 allowed' in line for line in lines)
    assert code == 1
    code, _lines = _summary(build, MAX_RERUNS='6')
    assert code == 0
