"""The one model-swapped event (``Device.swaps``): every cache of a model's addresses
follows a spawn, a delete or a load_world through it, told once, after the swap, with the
new model; a subscriber that fails does not keep the others stale."""

import mujoco
import pytest
from test_scene_edits import BOX

from mujoco_hal_ros import errors
from mujoco_hal_ros.sim.events import ModelSwapped, Swaps


def test_spawn_delete_and_load_world_are_each_told_once_with_the_new_model(bench):
    seen = []
    unsubscribe = bench.swaps.subscribe(seen.append)
    bodies = bench.model.nbody
    assert bench.scene.spawn(BOX, 'box1', position=[0.25, -0.15, 0.15])['code'] == errors.DONE
    assert len(seen) == 1
    event = seen[0]
    assert isinstance(event, ModelSwapped) and not event.world
    assert event.generation == bench.generation == bench.snapshot.generation
    assert event.model is bench.model and event.layout is bench.layout
    assert event.model.nbody == bodies + 1
    bench.scene.delete('box1')
    assert len(seen) == 2 and seen[1].generation == bench.generation
    bench.scene.unload_world()
    assert len(seen) == 3 and seen[2].world
    unsubscribe()
    bench.scene.spawn(BOX, 'box2', position=[0.25, -0.15, 0.15])
    assert len(seen) == 3                       # unsubscribed: told nothing more


def test_a_refused_edit_tells_nobody(bench):
    seen = []
    bench.swaps.subscribe(seen.append)
    with pytest.raises(errors.DeviceError):
        bench.scene.spawn('<mujoco><worldbody><body><geom type="box"/></body></worldbody>'
                          '</mujoco>', 'broken')
    assert seen == []


def test_a_failing_subscriber_does_not_keep_the_others_stale():
    swaps = Swaps()
    told = []

    def broken(_event):
        raise RuntimeError('a broken cache')
    swaps.subscribe(broken)
    swaps.subscribe(told.append)
    event = ModelSwapped(3, None, None, False)
    swaps.emit(event)
    assert told == [event]
    with pytest.raises(TypeError):
        swaps.subscribe('not callable')


def test_what_runs_is_one_value_the_swap_replaces_whole(bench):
    """``device.swap.current`` (``sim.swap.ModelState``): a refused swap leaves the very same
    value; a swap puts a new one in, and everything the device reads comes from it."""
    before = bench.swap.current
    with pytest.raises(errors.DeviceError):
        bench.swap.replace_model('not a model')
    with pytest.raises(errors.DeviceError):     # would take the arm's actuators away
        bench.swap.replace_model(mujoco.MjModel.from_xml_string(BOX))
    assert bench.swap.current is before and bench.model is before.model
    bench.scene.spawn(BOX, 'box3', position=[0.25, -0.15, 0.15])
    after = bench.swap.current
    assert after is not before and after.model is not before.model
    assert after.generation == bench.generation == bench.snapshot.generation == \
        before.generation + 1
    # the device's reads are the new value's, and the stepper steps its data
    assert (bench.model, bench.layout, bench.data) == (after.model, after.layout, after.data)
    assert bench.on_physics(lambda s: s.data is after.data and s.model is after.model)
    # IK follows the new model; the device file and keyframe stay (an edit, not a world)
    assert after.planner is not before.planner and after.planner.model is after.model
    assert after.spec is before.spec and after.keyframe == before.keyframe
    bench.scene.delete('box3')
    assert bench.swap.current.model.nbody == before.model.nbody
