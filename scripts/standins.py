#!/usr/bin/env python3
"""Which stand-in interface packages this machine needs: those whose real package is missing.

A stand-in is built only when importing the real package fails, so it can never shadow a
real install; an earlier stand-in of ours (marked by share/<pkg>/STANDIN) stays ours.
Prints one package directory a line.
"""

import argparse
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(os.path.dirname(HERE), 'standins')


def probe_of(pkg_dir):
    """The import that proves the real package exists (the stand-in's PROBE file)."""
    name = os.path.basename(pkg_dir.rstrip(os.sep))
    try:
        with open(os.path.join(pkg_dir, 'PROBE'), encoding='utf-8') as handle:
            for line in handle:
                if line.startswith('# probe: import '):
                    return line.split('import ', 1)[1].strip()
    except OSError:
        pass
    return f'{name}.msg'


def is_ours(module):
    """True when the importable package is a stand-in we built earlier."""
    root = module.split('.')[0]
    try:
        mod = importlib.import_module(root)
    except ImportError:
        return False
    path = os.path.dirname(getattr(mod, '__file__', '') or '')
    # <prefix>/lib/python3.X/site-packages/<pkg> -> <prefix>/share/<pkg>/STANDIN
    prefix = os.path.abspath(os.path.join(path, '..', '..', '..', '..'))
    return os.path.exists(os.path.join(prefix, 'share', root, 'STANDIN'))


def needed(standins=STANDINS):
    out = []
    for name in sorted(os.listdir(standins)):
        pkg_dir = os.path.join(standins, name)
        if not os.path.isfile(os.path.join(pkg_dir, 'package.xml')):
            continue
        module = probe_of(pkg_dir)
        try:
            importlib.import_module(module)
            real = not is_ours(module)
        except ImportError:
            real = False
        if not real:
            out.append(pkg_dir)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--standins', default=STANDINS)
    args = parser.parse_args(argv)
    for pkg_dir in needed(args.standins):
        print(pkg_dir)
    return 0


if __name__ == '__main__':
    sys.exit(main())
