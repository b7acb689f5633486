"""The fast paths: every speed measure that bypasses a plain library call, in one place.

Each one has a plain equivalent, and one process-wide switch decides which runs:

- ``cdr`` packs joint_states, /tf, /clock, camera images and camera_info as CDR bytes
  (plain: rclpy message objects);
- ``unlocked_publish`` publishes those bytes through librcl without the GIL (plain:
  ``Publisher.publish``);
- ``sched`` gives periodic threads a short EEVDF slice or SCHED_FIFO (plain: the
  scheduling the thread was started with);
- ``raster`` runs Mesa's software rasteriser threads at SCHED_IDLE (plain: normal
  priority);
- ``process`` hands the GIL over sooner and keeps freed large buffers (plain: CPython's
  and glibc's defaults).

Where the switch is read: the publishers, which have a second code path, ask
``enabled()`` once when they are built, so each stream's two paths sit side by side in one
place; the tuning functions (``sched``, ``raster``, ``process``) ask it themselves and do
nothing when it is off, so a thread that calls them (the stepper's, a GL thread) needs no
branch of its own. Off exists to prove the fast paths change nothing a subscriber can see:
``test/node/test_fast_paths.py`` runs one scenario both ways and compares the bytes.

sim_node sets it from its ``fast_paths`` parameter before it builds anything. It is one
value per process (scheduling and the allocator are), so nodes sharing a process share it.
"""

_ENABLED = True


def configure(enabled: bool) -> None:
    """Turn the fast paths on (the default) or off for everything built from now on.

    Publishers already built keep the path they chose; threads already tuned keep their
    scheduling.
    """
    global _ENABLED
    if not isinstance(enabled, bool):
        raise TypeError(f'fast paths are on or off: expected a bool, got {enabled!r}')
    _ENABLED = enabled


def enabled() -> bool:
    """Whether the fast paths are on."""
    return _ENABLED
