#!/usr/bin/env python3
"""Print colcon's test results as the line CI reads: 'N passed, N failed, N skipped'.

colcon test-result counts CTest's own Test.xml (one entry per test tier) beside pytest's
xunit files, so its summary double-counts. Cases come from the xunit files; a tier that
CTest saw fail without a failing case (pytest crashed, timed out, or collected nothing)
counts as one failure more. Exit status is non-zero on any failure or when nothing ran.
"""

import glob
import os
import sys
import xml.etree.ElementTree as ET


def main(build_base='build'):
    passed = failed = skipped = 0
    failures = []
    failing_files = set()
    for path in sorted(glob.glob(os.path.join(build_base, '*', 'test_results', '**', '*.xml'),
                                 recursive=True)):
        root = ET.parse(path).getroot()
        for case in root.iter('testcase'):
            name = f'{case.get("classname")}.{case.get("name")}'
            if case.find('failure') is not None or case.find('error') is not None:
                failed += 1
                failures.append(name)
                failing_files.add(os.path.basename(path).split('.')[0])
            elif case.find('skipped') is not None:
                skipped += 1
            else:
                passed += 1
    latest = {}
    for path in glob.glob(os.path.join(build_base, '*', 'Testing', '*', 'Test.xml')):
        package = path.split(os.sep)[-4]
        if package not in latest or os.path.getmtime(path) > os.path.getmtime(latest[package]):
            latest[package] = path   # CTest keeps one folder per run; read the newest
    for path in latest.values():
        for test in ET.parse(path).getroot().iter('Test'):
            tier = test.findtext('Name')
            if test.get('Status') == 'failed' and tier not in failing_files:
                failed += 1
                failures.append(f'{tier}: the tier failed with no failing case (crash, '
                                'timeout or no tests); see log/latest_test')
    for name in failures[:50]:
        print(f'FAILED {name}')
    print(f'{passed} passed, {failed} failed, {skipped} skipped')
    return 1 if failed or passed == 0 else 0


if __name__ == '__main__':
    sys.exit(main(*sys.argv[1:]))
