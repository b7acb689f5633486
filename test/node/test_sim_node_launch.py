"""Launch arguments -> nodes (launch_args), the rviz config, and the launch files themselves."""

import importlib.util
import os

import pytest
import yaml

from mujoco_hal_ros.errors import ConfigError
from mujoco_hal_ros.ros import launch_args as la
from mujoco_hal_ros.ros.sim.params import share_dir

SHARE = share_dir()


def launch_file(name):
    for base in (os.path.join(os.path.dirname(__file__), '..', '..', 'launch'),
                 os.path.join(SHARE or '', 'launch')):
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path):
            return path
    pytest.fail(f'{name} not found in the source tree or the share directory')


def test_defaults_run_the_bench_arm_at_real_time():
    node = la.sim_node({})
    assert (node['package'], node['executable'], node['namespace']) == \
        ('mujoco_hal_ros', 'sim_node', '')
    assert node['parameters'] == [{'real_time_factor': 1.0, 'publish_rate': 100.0,
                                   'publish_clock': True, 'log_summary': True,
                                   'frame_prefix': ''}]


def test_namespace_gives_a_frame_prefix_and_files_pass_through():
    node = la.sim_node({'namespace': 'arm1', 'model': '/m/scene.xml',
                        'device_file': '/d/arm.yaml', 'real_time_factor': '0',
                        'publish_clock': 'false'})
    params = node['parameters'][0]
    assert node['namespace'] == '/arm1'
    assert params['frame_prefix'] == 'arm1/' and params['real_time_factor'] == 0.0
    assert params['model'] == '/m/scene.xml' and params['device_file'] == '/d/arm.yaml'
    assert params['publish_clock'] is False
    explicit = la.sim_parameters({'namespace': '/a/b', 'frame_prefix': 'left_'})
    assert explicit['frame_prefix'] == 'left_'
    assert la.sim_parameters({'namespace': '/a/b'})['frame_prefix'] == 'a/b/'


@pytest.mark.parametrize('args, where', [
    ({'real_time_factor': 'fast'}, 'launch argument real_time_factor'),
    ({'real_time_factor': '-1'}, 'launch argument real_time_factor'),
    ({'rviz': 'maybe'}, 'launch argument rviz'),
    ({'namespace': '1arm'}, 'launch argument namespace'),
    ({'publish_rate': '0'}, 'launch argument publish_rate'),
    ({'modle': 'x.xml'}, 'unknown launch argument modle'),
])
def test_bad_launch_arguments_say_which(args, where):
    with pytest.raises(ConfigError) as info:
        la.sim_launch(args, SHARE)
    assert where in str(info.value)


def test_bringup_swaps_the_simulation_for_a_driver_under_the_same_names(tmp_path):
    sim = la.bringup_launch({'namespace': 'arm'}, SHARE)
    assert [n['executable'] for n in sim] == ['sim_node']
    params = tmp_path / 'driver.yaml'
    params.write_text('driver:\n  ros__parameters:\n    port: /dev/ttyUSB0\n')
    real = la.bringup_launch({'use_sim': 'false', 'namespace': 'arm',
                              'driver_package': 'my_driver', 'driver_executable': 'driver',
                              'driver_params': str(params)}, SHARE)
    assert len(real) == 1
    assert (real[0]['package'], real[0]['executable']) == ('my_driver', 'driver')
    assert real[0]['namespace'] == sim[0]['namespace'] == '/arm'
    assert real[0]['parameters'] == [str(params)]
    with pytest.raises(ConfigError, match='driver_package'):
        la.bringup_launch({'use_sim': 'false'}, SHARE)
    with pytest.raises(ConfigError, match='file not found'):
        la.bringup_launch({'use_sim': 'false', 'driver_package': 'p', 'driver_executable': 'e',
                           'driver_params': str(tmp_path / 'missing.yaml')}, SHARE)


def test_one_controllers_file_configures_sim_and_real_alike():
    swap = os.path.join(SHARE, 'config', 'arm_controller_swap.yaml')
    args = {'namespace': 'arm', 'controllers_file': swap}
    sim = la.bringup_launch(args, SHARE)
    assert sim[0]['parameters'][0]['controllers_file'] == swap
    real = la.bringup_launch(dict(args, use_sim='false', driver_package='my_driver',
                                  driver_executable='ros2_control_node'), SHARE)
    assert real[0]['parameters'] == [swap]


def test_rviz_config_shows_the_scene_without_a_robot_model(tmp_path):
    base = la.rviz_config('', SHARE)
    with open(base, encoding='utf-8') as f:
        cfg = yaml.safe_load(f)
    manager = cfg['Visualization Manager']
    assert manager['Global Options']['Fixed Frame'] == 'world'
    collision = [d for d in manager['Displays'] if d['Name'] == 'Collision geoms']
    assert collision[0]['Topic']['Value'] == '/collision_markers'
    assert collision[0]['Enabled'] is False                  # as rviz's RobotModel: off
    displays = {d['Class']: d for d in manager['Displays'] if d['Name'] != 'Collision geoms'}
    assert {'rviz_default_plugins/Grid', 'rviz_default_plugins/TF',
            'rviz_default_plugins/MarkerArray', 'rviz_default_plugins/Image'} <= set(displays)
    robot = displays['rviz_default_plugins/RobotModel']         # robot_description, latched
    assert robot['Description Topic']['Value'] == '/robot_description'
    assert robot['Description Topic']['Durability Policy'] == 'Transient Local'
    markers = displays['rviz_default_plugins/MarkerArray']['Topic']
    assert markers['Value'] == '/scene_markers'
    assert markers['Durability Policy'] == 'Transient Local'
    assert displays['rviz_default_plugins/Image']['Topic']['Value'] == '/overhead/image_raw'
    # namespaced: a private copy with the topics moved under the namespace
    path = la.rviz_config('/arm1', SHARE, out_dir=str(tmp_path))
    with open(path, encoding='utf-8') as f:
        moved = yaml.safe_load(f)
    displays = {d['Class']: d for d in moved['Visualization Manager']['Displays']
                if d['Name'] != 'Collision geoms'}
    assert displays['rviz_default_plugins/MarkerArray']['Topic']['Value'] == \
        '/arm1/scene_markers'
    assert displays['rviz_default_plugins/Image']['Topic']['Value'] == \
        '/arm1/overhead/image_raw'
    assert displays['rviz_default_plugins/RobotModel']['Description Topic']['Value'] == \
        '/arm1/robot_description'
    nodes = la.sim_launch({'rviz': 'true'}, SHARE)
    assert nodes[1]['executable'] == 'rviz2' and nodes[1]['arguments'] == ['-d', base]
    assert nodes[1]['parameters'] == [{'use_sim_time': True}]     # /tf is on sim time
    real = la.bringup_launch({'rviz': 'true', 'use_sim': 'false', 'driver_package': 'p',
                              'driver_executable': 'e'}, SHARE)
    assert real[1]['parameters'] == [{'use_sim_time': False}]


def test_urdf_launch_arguments_reach_sim_node(tmp_path):
    urdf = tmp_path / 'arm.urdf'
    urdf.write_text('<robot name="r"/>')
    params = la.sim_parameters({'robot_description': str(urdf), 'scene': '/s/table.xml',
                                'publish_tf': 'false'})
    assert params['robot_description'] == str(urdf) and params['scene'] == '/s/table.xml'
    assert params['publish_tf'] is False
    assert la.sim_parameters({'robot_description': 'topic'})['robot_description'] == 'topic'
    assert 'publish_tf' not in la.sim_parameters({})


def test_launch_parameters_are_what_sim_node_accepts():
    rclpy = pytest.importorskip('rclpy')
    from rclpy.parameter import Parameter

    from mujoco_hal_ros.ros.sim.sim_node import SimNode
    ctx = rclpy.Context()
    rclpy.init(context=ctx, args=[])
    try:
        params = la.sim_parameters({'namespace': 'arm1', 'log_summary': 'false',
                                    'publish_clock': 'false'})
        node = SimNode(context=ctx, namespace='/arm1', parameter_overrides=[
            Parameter(k, value=v) for k, v in params.items()])
        try:
            assert node.frames.body_frames[1] == 'arm1/base'
            assert node.get_namespace() == '/arm1'
        finally:
            node.destroy_node()
    finally:
        rclpy.shutdown(context=ctx)


@pytest.mark.parametrize('name, declared', [('sim.launch.py', la.SIM_ARGS),
                                            ('bringup.launch.py', la.BRINGUP_ARGS)])
def test_launch_files_declare_every_argument(name, declared):
    if importlib.util.find_spec('launch_ros') is None:
        pytest.skip('launch_ros is not installed here (no wheel on PyPI); launch_args, which '
                    'holds the logic, is tested above')
    from launch.actions import DeclareLaunchArgument
    spec = importlib.util.spec_from_file_location(name.replace('.', '_'), launch_file(name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    desc = module.generate_launch_description()
    names = {e.name for e in desc.entities if isinstance(e, DeclareLaunchArgument)}
    assert names == set(declared)


@pytest.mark.parametrize('name', ['sim.launch.py', 'bringup.launch.py'])
def test_launch_files_parse_and_use_only_what_launch_args_has(name):
    """Where launch_ros is missing, still catch a typo in the thin launch files."""
    import ast
    with open(launch_file(name), encoding='utf-8') as f:
        tree = ast.parse(f.read(), name)
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == 'launch_args'}
    assert used and all(hasattr(la, attr) for attr in used), used
    assert any(isinstance(n, ast.FunctionDef) and n.name == 'generate_launch_description'
               for n in tree.body)


def test_rviz_image_display_follows_the_model(tmp_path):
    """The Image display shows the built-in arm's camera only on the built-in arm; another
    model gets none unless rviz_image names one, moved under the namespace like the rest."""
    def displays(path):
        with open(path, encoding='utf-8') as f:
            cfg = yaml.safe_load(f)
        return {d['Class']: d for d in cfg['Visualization Manager']['Displays']
                if d['Name'] != 'Collision geoms'}
    assert la.rviz_image({}) == 'overhead/image_raw'
    assert la.rviz_image({'model': '/some/scene.xml'}) == ''
    assert la.rviz_image({'model': '/s.xml', 'rviz_image': '/wrist/image_raw'}) == \
        'wrist/image_raw'
    other = displays(la.rviz_config('', SHARE, out_dir=str(tmp_path), image=''))
    assert 'rviz_default_plugins/Image' not in other
    assert other['rviz_default_plugins/MarkerArray']['Topic']['Value'] == '/scene_markers'
    named = displays(la.rviz_config('/arm2', SHARE, out_dir=str(tmp_path),
                                    image='wrist/image_raw'))
    assert named['rviz_default_plugins/Image']['Topic']['Value'] == '/arm2/wrist/image_raw'
    nodes = la.sim_launch({'rviz': 'true', 'model': '/some/scene.xml'}, SHARE)
    assert 'rviz_default_plugins/Image' not in displays(nodes[1]['arguments'][1])


def test_sim_launch_runs_and_serves_the_robot(tmp_path):
    """The launch file itself, run by launch (as launch_testing does): sim_node comes up,
    publishes joint_states and robot_description. Skipped where launch_ros is missing."""
    if importlib.util.find_spec('launch_ros') is None:
        pytest.skip('launch_ros is not installed here (no wheel on PyPI): the launch file '
                    'runs only on a ROS 2 install; launch_args, which holds its logic, is '
                    'tested above')
    import subprocess
    import sys
    script = (
        'import asyncio, launch, sys\n'
        'from launch.launch_description_sources import PythonLaunchDescriptionSource\n'
        'ls = launch.LaunchService()\n'
        f'ls.include_launch_description(launch.actions.IncludeLaunchDescription('
        f'PythonLaunchDescriptionSource({launch_file("sim.launch.py")!r})))\n'
        'sys.exit(ls.run())\n')
    proc = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        from helpers import stop_process
        rclpy = pytest.importorskip('rclpy')
        from rclpy.qos import DurabilityPolicy, QoSProfile
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        ctx = rclpy.Context()
        rclpy.init(context=ctx)
        node = rclpy.create_node('launch_check', context=ctx)
        got = {'js': [], 'desc': []}
        node.create_subscription(JointState, 'joint_states', got['js'].append, 10)
        node.create_subscription(String, 'robot_description', got['desc'].append,
                                 QoSProfile(depth=1,
                                            durability=DurabilityPolicy.TRANSIENT_LOCAL))
        import time
        end = time.monotonic() + 60.0
        while not (got['js'] and got['desc']) and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.2)
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        assert got['js'] and got['desc']
    finally:
        stop_process(proc)


def test_moveit_controllers_name_what_sim_node_serves():
    """config/moveit_controllers.yaml targets the actions sim_node serves on Panda."""
    with open(os.path.join(SHARE, 'config', 'moveit_controllers.yaml'), encoding='utf-8') as f:
        cfg = yaml.safe_load(f)['moveit_simple_controller_manager']
    arm, hand = cfg['arm_controller'], cfg['gripper_controller']
    assert (arm['type'], arm['action_ns']) == ('FollowJointTrajectory',
                                               'follow_joint_trajectory')
    assert arm['joints'] == [f'joint{i}' for i in range(1, 8)]
    assert (hand['type'], hand['action_ns'], hand['joints']) == ('GripperCommand',
                                                                 'gripper_cmd',
                                                                 ['finger_joint1'])
