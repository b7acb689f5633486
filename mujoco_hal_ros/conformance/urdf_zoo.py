"""The URDF zoo: every robot example-robot-data ships, as a ROS user hands it over.

Each URDF is loaded the way ``sim_node robot_description:=...`` loads it
(``description.urdf_in.model_from_urdf``, ``package://`` meshes found through the wheel's
share folder), zero-config. The arms also come with a ``<ros2_control>`` block written the
way a real driver's xacro writes one (a position command interface and position, velocity
and effort state interfaces per joint; mimic joints carry state interfaces only), because
users bring both. The same battery as the MJCF zoo runs on each (``conformance.battery``).
"""

import glob
import os
import sys
import xml.etree.ElementTree as ET

from .model import ZooModel

# Joints are sampled at most this far (rad) from mid-range, as a planner's goals for an
# arm on a table are: UR joints turn +-2 pi, and 70 % of that folds the arm through the
# floor its base stands on.
SPAN = 0.5 * 3.141592653589793 + 0.3
SHARE_MISSING = 'example-robot-data is not installed (pip install the test extras)'

# file stem -> kind, for every URDF of example-robot-data 6.0.0. Humanoids and quadrupeds
# are 'legged' (the URDF root is fixed to the world, as MuJoCo's importer and a URDF
# without a floating joint make it: the battery holds and reads them); flying bases are
# 'other'.
KINDS = {
    'panda': 'arm', 'panda_collision': 'arm', 'ur3': 'arm', 'ur3_gripper': 'arm',
    'ur3_robot': 'arm', 'ur3_joint_limited_robot': 'arm', 'ur5_robot': 'arm',
    'ur5_gripper': 'arm', 'ur5_joint_limited_robot': 'arm', 'ur10_robot': 'arm',
    'ur10_joint_limited_robot': 'arm', 'kinova': 'arm', 'xarm7': 'arm', 'z1': 'arm',
    'so100': 'arm', 'so101': 'arm', 'talos_left_arm': 'arm', 'baxter': 'arm',
    'double_pendulum': 'arm', 'double_pendulum_continuous': 'arm',
    'double_pendulum_simple': 'arm', 'TwoDofs': 'arm', 'finger_edu': 'arm',
    'tiago': 'arm', 'tiago_dual': 'arm', 'tiago_no_hand': 'arm', 'tiago_pro': 'arm',
    'pr2': 'arm', 'b1-z1': 'arm', 'anymal-kinova': 'arm', 'centauro': 'arm',
    'allegro_left_hand': 'hand', 'allegro_right_hand': 'hand',
    'a1': 'legged', 'anymal': 'legged', 'b1': 'legged', 'go1': 'legged', 'go2': 'legged',
    'hyq_no_sensors': 'legged', 'laikago': 'legged', 'quadruped': 'legged',
    'solo': 'legged', 'solo12': 'legged', 'bolt': 'legged',
    'alex_nub_hands': 'legged', 'alex_psyonic_hands': 'legged', 'alex_sake_hands': 'legged',
    'alexander_v1.lowerBodyOnly': 'legged', 'g1_29dof_rev_1_0': 'legged',
    'g1_29dof_with_hand_rev_1_0': 'legged', 'human': 'legged', 'icub': 'legged',
    'icub_reduced': 'legged', 'romeo': 'legged', 'romeo_laas_small': 'legged',
    'romeo_small': 'legged', 'simple_humanoid': 'legged',
    'simple_humanoid_classical': 'legged', 'talos_full_v2': 'legged',
    'talos_full_v2_box': 'legged', 'talos_reduced': 'legged', 'talos_reduced_box': 'legged',
    'talos_reduced_corrected': 'legged',
    'iris': 'other', 'iris_simple': 'other', 'quadrotor_base': 'other',
    'borinot_flying_arm_2': 'other', 'hextilt_flying_arm_5': 'other',
}
# Arms whose URDF also runs with a driver's <ros2_control> block (the fixed-base arms).
WITH_ROS2_CONTROL = ('panda', 'ur5_robot', 'ur10_robot', 'ur3_gripper', 'kinova', 'xarm7',
                     'z1', 'so100', 'so101', 'talos_left_arm', 'baxter', 'double_pendulum')


def share_dir() -> str | None:
    """``<site-packages>/cmeel.prefix/share`` of the example-robot-data wheel, or None."""
    for base in sys.path:
        share = os.path.join(base or '.', 'cmeel.prefix', 'share')
        if os.path.isdir(os.path.join(share, 'example-robot-data', 'robots')):
            return share
    return None


def urdf_paths(share: str | None = None) -> list[str]:
    """Every URDF of the wheel, sorted by path."""
    share = share or share_dir()
    if share is None:
        return []
    return sorted(glob.glob(os.path.join(share, 'example-robot-data', 'robots', '*', '*',
                                         '*.urdf')))


def _stem(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def models() -> list[ZooModel]:
    """One ZooModel per URDF (``urdf_<stem>``), and one with a <ros2_control> block per
    arm of WITH_ROS2_CONTROL (``urdf_<stem>_rc``). An unlisted URDF (a newer wheel) is an
    'other', so it still starts, holds and reports effort."""
    share = share_dir()
    if share is None:
        return [ZooModel(f'urdf_{stem}', None, kind, missing=SHARE_MISSING)
                for stem, kind in KINDS.items()]
    out: list[ZooModel] = []
    rc: list[ZooModel] = []
    paths = urdf_paths(share)
    stems = [_stem(p) for p in paths]
    for path, stem in zip(paths, stems, strict=True):
        # two packages ship an anymal.urdf: the second is named by its package
        name = f'urdf_{stem}' if stems.count(stem) == 1 or path == paths[stems.index(stem)] \
            else f'urdf_{stem}_{path.split(os.sep)[-3]}'
        zm = ZooModel(name, path, KINDS.get(stem, 'other'), urdf=True, span=SPAN)
        out.append(zm)
        if stem in WITH_ROS2_CONTROL:
            rc.append(ZooModel(f'{name}_rc', path, zm.kind, urdf=True, span=SPAN,
                               ros2_control=True, base=zm.name))
    return out + rc


def mimic_followers(root: ET.Element) -> dict[str, tuple[str, float, float]]:
    """joint -> (leader, multiplier, offset) for every ``<mimic>`` joint of a URDF."""
    out = {}
    for joint in root.findall('joint'):
        mimic = joint.find('mimic')
        name, leader = joint.get('name'), mimic.get('joint') if mimic is not None else None
        if mimic is not None and leader and name is not None:   # URDF joints have names
            out[name] = (leader, float(mimic.get('multiplier', 1.0)),
                         float(mimic.get('offset', 0.0)))
    return out


def with_ros2_control(urdf: str) -> str:
    """The URDF with the <ros2_control> block a driver's xacro adds (any block it had is
    replaced): one per movable joint; a mimic joint declares its leader and gets state
    interfaces only, as ros2_control's mimic joints do."""
    root = ET.fromstring(urdf)
    for old in root.findall('ros2_control'):
        root.remove(old)
    followers = mimic_followers(root)
    block = ET.SubElement(root, 'ros2_control', name=f'{root.get("name")}_system',
                          type='system')
    hw = ET.SubElement(block, 'hardware')
    ET.SubElement(hw, 'plugin').text = 'mock_components/GenericSystem'
    for joint in root.findall('joint'):
        if joint.get('type') not in ('revolute', 'continuous', 'prismatic'):
            continue
        name = joint.get('name')
        if name is None:
            raise ValueError('a URDF <joint> without a name')
        entry = ET.SubElement(block, 'joint', name=name)
        if name in followers:
            leader, mult, off = followers[name]
            ET.SubElement(entry, 'param', name='mimic').text = leader
            ET.SubElement(entry, 'param', name='multiplier').text = repr(mult)
            ET.SubElement(entry, 'param', name='offset').text = repr(off)
        else:
            cmd = ET.SubElement(entry, 'command_interface', name='position')
            lim = joint.find('limit')
            if lim is not None and lim.get('lower') and lim.get('upper') and \
                    joint.get('type') != 'continuous':
                ET.SubElement(cmd, 'param', name='min').text = lim.get('lower')
                ET.SubElement(cmd, 'param', name='max').text = lim.get('upper')
        for state in ('position', 'velocity', 'effort'):
            ET.SubElement(entry, 'state_interface', name=state)
    return ET.tostring(root, encoding='unicode')


def materialize(zm: ZooModel, folder: str | None) -> str:
    """The MJCF path ``model_from_urdf`` writes for this zoo entry (notes on ``zm``)."""
    from ..description.urdf_in import model_from_urdf
    if zm.path is None:      # what open(None) raised before: a zoo entry without a file
        raise TypeError(f'zoo model {zm.name!r} has no file: {zm.missing}')
    with open(zm.path, encoding='utf-8') as handle:
        text = handle.read()
    if zm.ros2_control:
        text = with_ros2_control(text)
    share = share_dir()          # None (the wheel missing) is no package root
    roots = ([share] if share is not None else []) + [
        r for r in os.environ.get('ROS_PACKAGE_PATH', '').split(os.pathsep) if r]
    # The battery checks joints: a wheeled robot's base is bolted down here, as it always
    # was (base:=auto would free TIAGo's); its base is the mobile tier's to check.
    path, notes = model_from_urdf(text, package_roots=roots, base='fixed',
                                  base_dir=os.path.dirname(zm.path),
                                  cache_dir=os.path.join(folder, 'urdf') if folder else None)
    zm.notes[:] = notes
    return path
