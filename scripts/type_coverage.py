#!/usr/bin/env python3
"""Print, per package of mujoco_hal_ros, how many public functions and methods carry full type
hints (every parameter but self/cls annotated, and a return annotation except on __init__),
and how many annotated parameters are ``Any``.

Why: issue 41 asks for public functions typed in every package; this is the measurement its
report quotes before and after. "Public" is what test/core/test_mypy.py checks: module
functions and the methods of classes whose names do not start with ``_``, skipping names
that start with ``_`` other than ``__init__``.

    python scripts/type_coverage.py [ROOT]
"""

import ast
import pathlib
import sys


def _public_functions(tree: ast.Module):
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not top.name.startswith('_'):
                yield top
        elif isinstance(top, ast.ClassDef) and not top.name.startswith('_'):
            for item in top.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        not item.name.startswith('_') or item.name == '__init__'):
                    yield item


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.arg]:
    a = fn.args
    params = a.posonlyargs + a.args + a.kwonlyargs
    if params and params[0].arg in ('self', 'cls'):
        params = params[1:]
    return params + [s for s in (a.vararg, a.kwarg) if s is not None]


def _is_any(node: ast.expr | None) -> bool:
    return node is not None and ast.unparse(node) in ('Any', 'typing.Any', 't.Any')


def measure(root: pathlib.Path) -> dict[str, tuple[int, int, int, int]]:
    """{package: (public functions, fully hinted, annotated parameters, of them Any)}."""
    out: dict[str, list[int]] = {}
    pkg_root = root / 'mujoco_hal_ros'
    for path in sorted(pkg_root.rglob('*.py')):
        rel = path.relative_to(pkg_root).parts
        pkg = rel[0] if len(rel) > 1 else '(top)'
        counts = out.setdefault(pkg, [0, 0, 0, 0])
        for fn in _public_functions(ast.parse(path.read_text(encoding='utf-8'))):
            params = _params(fn)
            counts[0] += 1
            if all(p.annotation is not None for p in params) and (
                    fn.returns is not None or fn.name == '__init__'):
                counts[1] += 1
            annotated = [p for p in params if p.annotation is not None]
            counts[2] += len(annotated)
            counts[3] += sum(_is_any(p.annotation) for p in annotated)
    return {k: (v[0], v[1], v[2], v[3]) for k, v in out.items()}


def main() -> None:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else
                        pathlib.Path(__file__).resolve().parent.parent)
    rows = measure(root)
    print(f'{"package":<14}{"public":>8}{"hinted":>8}{"share":>8}{"params":>8}{"Any":>6}')
    tot = [0, 0, 0, 0]
    for pkg, (n, h, p, a) in sorted(rows.items()):
        tot = [tot[0] + n, tot[1] + h, tot[2] + p, tot[3] + a]
        print(f'{pkg:<14}{n:>8}{h:>8}{100 * h / max(n, 1):>7.0f}%{p:>8}{a:>6}')
    n, h, p, a = tot
    print(f'{"total":<14}{n:>8}{h:>8}{100 * h / max(n, 1):>7.0f}%{p:>8}{a:>6}')


if __name__ == '__main__':
    main()
