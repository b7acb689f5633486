"""sim_node's default Fast DDS profile: set only where the user chose nothing."""

import os

import pytest

from mujoco_hal_ros.ros import dds_profile

ROOT = os.path.join(os.path.dirname(__file__), '..', '..')


def test_the_shipped_profile_is_found_and_set():
    env = {}
    path = dds_profile.use_default_profile(ROOT, env)
    assert path and os.path.isfile(path) and path.endswith(os.path.join('config', 'fastdds.xml'))
    # Fast DDS 3 (Kilted) reads the first name, Fast DDS 2 (Jazzy) only the second
    assert env == {'FASTDDS_DEFAULT_PROFILES_FILE': path, 'FASTRTPS_DEFAULT_PROFILES_FILE': path}
    text = open(path, encoding='utf-8').read()
    assert '<type>SHM</type>' in text and '<type>UDPv4</type>' in text


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
