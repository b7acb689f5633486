"""The reference pages under doc/ follow their sources of truth.

``doc/reference/device_file.md`` is generated from the key sets the device file parser
accepts (``scripts/gen_docs.py``): it must equal a fresh generation, and a key the parser
accepts without a description must stop the generator. The node pages need rclpy and a
node start: ``test/node/test_node_reference_docs.py``. The conformance tables take the whole
zoo (minutes) to regenerate; here they must at least list exactly the zoo's models, and
have only the battery's checks as columns, and fail only where ``zoo.KNOWN_FAILURES`` says
why.
"""

import importlib.util
import os
import re

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


def _gen_docs():
    spec = importlib.util.spec_from_file_location(
        'gen_docs', os.path.join(ROOT, 'scripts', 'gen_docs.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page(*parts):
    with open(os.path.join(ROOT, 'doc', *parts), encoding='utf-8') as f:
        return f.read()


def test_device_file_page_is_up_to_date():
    assert _page('reference', 'device_file.md') == _gen_docs().device_file_page(), (
        'doc/reference/device_file.md differs from the parser: run '
        '`python scripts/gen_docs.py device_file` and commit the page')


def test_a_new_device_file_key_without_a_description_stops_the_generator(monkeypatch):
    from mujoco_hal_ros.config import device_file
    monkeypatch.setattr(device_file, 'CONNECT_KEYS', device_file.CONNECT_KEYS | {'warp'})
    with pytest.raises(SystemExit, match='connect: warp has no description'):
        _gen_docs().device_file_page()


def test_every_device_file_key_is_on_the_page():
    page = _page('reference', 'device_file.md')
    for section, keys in _gen_docs()._device_key_sets().items():
        for key in keys:
            assert f'| `{key}` |' in page, f'{section}.{key} is not on the page'


def _table(text):
    """(header cells, {model: cells}) of the first Markdown table (its header: 'model')."""
    rows = [line for line in text.splitlines() if line.startswith('| ')]
    head = [c.strip() for c in rows[0].strip('|').split('|')]
    assert head[0] == 'model', rows[0]
    body = {}
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip('|').split('|')]
        if len(cells) == len(head):
            body[cells[0]] = cells
    return head, body


def _fails_are_known(head, body):
    """Every FAIL cell of a table is in zoo.KNOWN_FAILURES (with why), every cell a mark."""
    from mujoco_hal_ros.conformance import zoo
    for model, cells in body.items():
        for check, mark in zip(head[2:], cells[2:], strict=True):
            assert mark in ('pass', 'FAIL', 'skip'), f'{model} {check}: {mark!r}'
            assert mark != 'FAIL' or (model, check) in zoo.KNOWN_FAILURES, (
                f'{model} {check} fails in the table but is not in zoo.KNOWN_FAILURES: '
                'a new failure, or a fixed one whose table was not regenerated')


def test_mjcf_zoo_table_lists_the_zoo():
    from mujoco_hal_ros.conformance import battery, zoo
    head, body = _table(_page('conformance.md'))
    assert set(head[2:]) <= set(battery.CHECKS), head
    names = [z.name for z in zoo.models()]
    assert list(body) == names, (
        'doc/conformance.md lists other models than the zoo: regenerate the table with '
        '`python bench/conformance.py --markdown` (about 10 minutes)')
    _fails_are_known(head, body)


def test_urdf_zoo_table_lists_the_zoo():
    pytest.importorskip('cmeel', reason='example-robot-data (a test extra) is not installed')
    from mujoco_hal_ros.conformance import battery, urdf_zoo
    head, body = _table(_page('urdf_zoo.md'))
    assert set(head[2:]) <= set(battery.CHECKS), head
    names = [z.name for z in urdf_zoo.models()]
    assert sorted(body) == sorted(names), (
        'doc/urdf_zoo.md lists other models than the URDF zoo: regenerate it with '
        '`python bench/conformance.py --urdf --markdown` (about 10 minutes)')
    _fails_are_known(head, body)


def test_every_doc_page_is_linked_from_the_readme():
    readme = _page('..', 'README.md')
    pages = [p for p in os.listdir(os.path.join(ROOT, 'doc')) if p.endswith('.md')]
    pages += [f'reference/{p}' for p in os.listdir(os.path.join(ROOT, 'doc', 'reference'))]
    missing = [p for p in pages if f'(doc/{p})' not in readme]
    assert not missing, f'doc pages the README map does not link: {missing}'


def test_doc_links_resolve():
    bad = []
    for folder, _dirs, files in os.walk(os.path.join(ROOT, 'doc')):
        for name in files:
            if not name.endswith('.md'):
                continue
            text = open(os.path.join(folder, name), encoding='utf-8').read()
            for link in re.findall(r'\]\(([^)#\s]+)(?:#[^)]*)?\)', text):
                if '://' not in link and not os.path.exists(os.path.join(folder, link)):
                    bad.append(f'{os.path.relpath(os.path.join(folder, name), ROOT)}: {link}')
    assert not bad, f'broken links: {bad}'
