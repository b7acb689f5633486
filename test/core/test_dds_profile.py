"""sim_node's default Fast DDS profile: set only where the user chose nothing."""

import os

import pytest

from mujoco_hal_ros.ros import dds_profile

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')


def test_the_shipped_profile_is_found_and_set():
    env = {}
    path = dds_profile.use_default_profile(ROOT, env)
    assert path and os.path.isfile(path) and path.endswith(os.path.join('config', 'fastdds.xml'))
    assert set(env.values()) == {path}
    assert set(env) <= {dds_profile.NEW, dds_profile.OLD} and env
    text = open(path, encoding='utf-8').read()
    assert '<type>SHM</type>' in text and '<type>UDPv4</type>' in text


@pytest.mark.parametrize('library, variables', [
    ('libfastdds.so.3.2', ('FASTDDS_DEFAULT_PROFILES_FILE',)),      # Kilted: Fast DDS 3
    ('libfastrtps.so.2.14', ('FASTRTPS_DEFAULT_PROFILES_FILE',)),   # Jazzy: Fast DDS 2.14
    (None, ('FASTDDS_DEFAULT_PROFILES_FILE', 'FASTRTPS_DEFAULT_PROFILES_FILE'))])
def test_the_variable_the_installed_fast_dds_reads(tmp_path, library, variables):
    """Fast DDS 3's rmw warns on the old name; Fast DDS 2 ignores the new one (Jazzy then ran
    the defaults and a best-effort image reader got 7 of 80 frames)."""
    if library:
        (tmp_path / library).write_bytes(b'')
    env = {}
    path = dds_profile.use_default_profile(ROOT, env, dirs=[str(tmp_path)])
    assert env == dict.fromkeys(variables, path)


def test_the_library_is_looked_for_where_ros_keeps_it(tmp_path):
    env = {'LD_LIBRARY_PATH': f'/opt/a{os.pathsep}/opt/b', 'AMENT_PREFIX_PATH': '/opt/ros/x'}
    dirs = dds_profile.library_dirs(env)
    assert dirs[:3] == ['/opt/a', '/opt/b', os.path.join('/opt/ros/x', 'lib')]


def test_this_machine_reads_one_name():
    """The venv this suite runs in has one Fast DDS: exactly one variable is set for it."""
    env = {'AMENT_PREFIX_PATH': os.environ.get('AMENT_PREFIX_PATH', ''),
           'LD_LIBRARY_PATH': os.environ.get('LD_LIBRARY_PATH', '')}
    assert len(dds_profile.profile_variables(dds_profile.library_dirs(env))) == 1


@pytest.mark.parametrize('env', [
    {'FASTDDS_DEFAULT_PROFILES_FILE': '/mine.xml'},
    {'FASTRTPS_DEFAULT_PROFILES_FILE': '/mine.xml'},
    {'FASTDDS_BUILTIN_TRANSPORTS': 'UDPv4'},
    {'RMW_IMPLEMENTATION': 'rmw_cyclonedds_cpp'}])
def test_a_user_choice_is_left_alone(env):
    before = dict(env)
    assert dds_profile.use_default_profile(ROOT, env) is None
    assert env == before


def test_explicit_fast_dds_still_gets_it():
    env = {'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp'}
    assert dds_profile.use_default_profile(ROOT, env) is not None


def test_no_share_directory_sets_nothing(tmp_path):
    env = {}
    assert dds_profile.use_default_profile(str(tmp_path), env) is None and env == {}
