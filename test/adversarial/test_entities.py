"""Entity state writes under hostile values: all or nothing, and never a world reset."""

from hostile_helpers import FREE_BODY, hostile_vectors, names, refused, small_floats
from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from mujoco_hal_ros.sim.device import Device
from mujoco_hal_ros.sim.entities import Entities


@pytest.fixture(scope='module')
def world(tmp_path_factory):
    path = tmp_path_factory.mktemp('entities') / 'free.xml'
    path.write_text(FREE_BODY)
    dev = Device(model=str(path), keyframe='start', real_time_factor=0, start_paused=True)
    yield dev, Entities(dev)
    dev.close()


def maybe(strategy):
    return st.one_of(st.none(), strategy)


@settings(max_examples=150, deadline=None)
@given(name=names(['box', 'target', 'arm']), position=maybe(hostile_vectors(3)),
       quaternion=maybe(hostile_vectors(4)), linear=maybe(hostile_vectors(3)),
       angular=maybe(hostile_vectors(3)))
def test_set_state_refuses_hostile_values_and_changes_nothing(world, name, position,
                                                              quaternion, linear, angular):
    dev, entities = world
    dev.reset()
    before = dev.snapshot
    err = refused(lambda: entities.set_state(name, position=position, quaternion=quaternion,
                                             linear=linear, angular=angular))
    if err is None:
        dev.step(3)
        assert np.isfinite(dev.snapshot.qpos).all()
        assert dev.health()['unstable_events'] == 0, 'an accepted state reset the world'
        return
    after = dev.snapshot
    assert np.array_equal(after.qpos, before.qpos) and np.array_equal(after.qvel, before.qvel)
    assert np.array_equal(after.mocap_pos, before.mocap_pos)


@settings(max_examples=50, deadline=None)
@given(position=st.lists(small_floats(-5.0, 5.0), min_size=3, max_size=3),
       linear=st.lists(small_floats(-10.0, 10.0), min_size=3, max_size=3),
       angular=st.lists(small_floats(-10.0, 10.0), min_size=3, max_size=3))
def test_a_sane_state_is_accepted(world, position, linear, angular):
    dev, entities = world
    dev.reset()
    entities.set_state('box', position=position, quaternion=[1, 0, 0, 0], linear=linear,
                       angular=angular)
    entities.set_state('target', position=position)
    assert np.allclose(entities.state('box')['position'], position)
