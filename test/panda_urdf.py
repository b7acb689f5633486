"""Panda as a real arm's description package gives it: a URDF with <ros2_control> tags.

Generated from Menagerie's Panda (``urdf_out``) plus a hand-written ``<ros2_control>``
block in the form of franka_description's: position command interfaces on the seven arm
joints and on ``finger_joint1``.
"""

import mujoco

from mujoco_hal_ros import menagerie
from mujoco_hal_ros.description.urdf_out import urdf_from_model

ARM = [f'joint{i}' for i in range(1, 8)]


def ros2_control_block(joints=ARM + ['finger_joint1'], kind='position'):
    parts = ['<ros2_control name="FrankaHardwareInterface" type="system">',
             '<hardware><plugin>franka_hardware/FrankaHardwareInterface</plugin></hardware>']
    for j in joints:
        parts.append(f'<joint name="{j}"><command_interface name="{kind}"/>'
                     '<state_interface name="position"/><state_interface name="velocity"/>'
                     '</joint>')
    parts.append('</ros2_control>')
    return ''.join(parts)


def panda_urdf(mesh_dir, block=None):
    """The URDF text, or None when Menagerie Panda is not installed."""
    path = menagerie.model_path('panda')
    if path is None:
        return None
    text = urdf_from_model(mujoco.MjModel.from_xml_path(path), name='panda', mesh_dir=mesh_dir)
    return text.replace('</robot>', (block or ros2_control_block()) + '\n</robot>')
