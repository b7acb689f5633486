#!/usr/bin/env python3
"""Print colcon's test results as the line CI reads: 'N passed, N failed, N skipped, N rerun'.

colcon test-result counts CTest's own Test.xml (one entry per test tier) beside pytest's
xunit files, so its summary double-counts. Cases come from the xunit files; a tier that
CTest saw fail without a failing case (pytest crashed, timed out, or collected nothing)
counts as one failure more.

Reruns. A test that fails is run once more (pytest-rerunfailures). The plugin writes each
earlier attempt as one more ``<testcase>`` of the same class and name, with no outcome in it,
before the last one, whose outcome is the test's; (older releases wrote a ``<rerun>``
element or ``rerun`` property instead, counted the same way). Each test counts once, by
its last attempt, and 'rerun' counts the tests that needed more than one: those that then
passed are listed as RERUN, since a test that often needs a second go is a race to fix.

Exit status is non-zero on any failure, when nothing ran, or when more than MAX_RERUNS
(default 5; the environment variable of that name changes it) tests needed a rerun.
"""

import collections
import glob
import os
import sys
import xml.etree.ElementTree as ET

MAX_RERUNS = 5


def _outcome(case):
    if case.find('failure') is not None or case.find('error') is not None:
        return 'failed'
    if case.find('skipped') is not None:
        return 'skipped'
    return 'passed'


def _extra_runs(case):
    """Reruns recorded inside one testcase (older pytest-rerunfailures releases)."""
    runs = len(case.findall('rerun')) + len(case.findall('rerunFailure'))
    for prop in case.iter('property'):
        if prop.get('name') in ('rerun', 'reruns') and str(prop.get('value', '')).isdigit():
            runs = max(runs, int(prop.get('value')))
    return runs


def cases(path):
    """{(classname, name): (outcome, attempts)} of one xunit file, in file order."""
    attempts = collections.OrderedDict()
    for case in ET.parse(path).getroot().iter('testcase'):
        key = (case.get('classname'), case.get('name'))
        attempts.setdefault(key, []).append(case)
    out = collections.OrderedDict()
    for key, seen in attempts.items():
        out[key] = (_outcome(seen[-1]), len(seen) + sum(_extra_runs(c) for c in seen))
    return out


def summarize(build_base='build', max_reruns=None):
    """(lines to print, exit status) for the test results under ``build_base``."""
    if max_reruns is None:
        max_reruns = int(os.environ.get('MAX_RERUNS', MAX_RERUNS))
    counts = collections.Counter()
    failures, reran = [], []
    failing_files = set()
    for path in sorted(glob.glob(os.path.join(build_base, '*', 'test_results', '**', '*.xml'),
                                 recursive=True)):
        for (classname, name), (outcome, attempts) in cases(path).items():
            full = f'{classname}.{name}'
            counts[outcome] += 1
            if attempts > 1:
                counts['rerun'] += 1
                if outcome == 'passed':
                    reran.append(full)
            if outcome == 'failed':
                failures.append(full)
                failing_files.add(os.path.basename(path).split('.')[0])
    latest = {}
    for path in glob.glob(os.path.join(build_base, '*', 'Testing', '*', 'Test.xml')):
        package = path.split(os.sep)[-4]
        if package not in latest or os.path.getmtime(path) > os.path.getmtime(latest[package]):
            latest[package] = path   # CTest keeps one folder per run; read the newest
    for path in latest.values():
        for test in ET.parse(path).getroot().iter('Test'):
            tier = test.findtext('Name')
            if test.get('Status') == 'failed' and tier not in failing_files:
                counts['failed'] += 1
                failures.append(f'{tier}: the tier failed with no failing case (crash, '
                                'timeout or no tests); see log/latest_test')
    lines = [f'FAILED {name}' for name in failures[:50]]
    lines += [f'RERUN {name} (passed on its rerun)' for name in reran[:50]]
    if counts['rerun'] > max_reruns:
        lines.append(f'{counts["rerun"]} tests needed a rerun, more than the {max_reruns} '
                     'allowed: fix the races behind them (each is listed above)')
    lines.append(f'{counts["passed"]} passed, {counts["failed"]} failed, '
                 f'{counts["skipped"]} skipped, {counts["rerun"]} rerun')
    bad = counts['failed'] or counts['passed'] == 0 or counts['rerun'] > max_reruns
    return lines, 1 if bad else 0


def main(build_base='build'):
    lines, status = summarize(build_base)
    print('\n'.join(lines))
    return status


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
