"""The one model-swapped event (``Device.swaps``): every cache of a model's addresses
follows a spawn, a delete or a load_world through it, told once, after the swap, with the
new model; a subscriber that fails does not keep the others stale."""

import pytest

from mujoco_hal_ros import errors
from mujoco_hal_ros.sim.events import ModelSwapped, Swaps

from test_scene_edits import BOX


def test_spawn_delete_and_load_world_are_each_told_once_with_the_new_model(bench):
    seen = []
    unsubscribe = bench.swaps.subscribe(seen.append)
    bodies = bench.model.nbody
    assert bench.spawn_entity(BOX, 'box1', position=[0.25, -0.15, 0.15])['code'] == errors.DONE
    assert len(seen) == 1
    event = seen[0]
    assert isinstance(event, ModelSwapped) and not event.world
    assert event.generation == bench.generation == bench.snapshot.generation
    assert event.model is bench.model and event.layout is bench.layout
    assert event.model.nbody == bodies + 1
    bench.delete_entity('box1')
    assert len(seen) == 2 and seen[1].generation == bench.generation
    bench.unload_world()
    assert len(seen) == 3 and seen[2].world
    unsubscribe()
    bench.spawn_entity(BOX, 'box2', position=[0.25, -0.15, 0.15])
    assert len(seen) == 3                       # unsubscribed: told nothing more


def test_a_refused_edit_tells_nobody(bench):
    seen = []
    bench.swaps.subscribe(seen.append)
    with pytest.raises(errors.DeviceError):
        bench.spawn_entity('<mujoco><worldbody><body><geom type="box"/></body></worldbody>'
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
