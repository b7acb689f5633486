"""robot_description: the URDF of the simulated robot, latched, as robot_state_publisher
publishes a real arm's.

rviz's RobotModel display and MoveIt read it from this topic. For a model loaded from
MJCF it is generated (``description.urdf_out``), with link names equal to the /tf frames;
for a model loaded from a URDF it is that URDF, unchanged, so the real arm's tools see the
description they already know. Meshes can be large, so the URDF is built off the start-up
path and published once it is ready (latched: late subscribers get it too).
"""

import threading

from std_msgs.msg import String

from .streams import TF_STATIC_QOS
from ...description.urdf_out import urdf_from_model


class DescriptionPublisher:
    """Publishes ``robot_description`` once, from ``urdf`` or generated from the model."""

    def __init__(self, node, model, frames, urdf=None):
        self.pub = node.create_publisher(String, 'robot_description', TF_STATIC_QOS)
        self.ready = threading.Event()
        self.text = None
        self._lock = threading.Lock()          # stop() waits for a publish in progress
        self._stopped = False
        self._log = node.get_logger()
        self._args = (model, frames.prefix, frames.world)
        self._thread = threading.Thread(target=self._run, args=(urdf,),
                                        name='sim_node-description', daemon=True)
        self._thread.start()

    def _run(self, urdf):
        try:
            model, prefix, world = self._args
            self.text = urdf if urdf else urdf_from_model(model, prefix=prefix, world=world)
            with self._lock:
                if not self._stopped:
                    self.pub.publish(String(data=self.text))
        except Exception as err:  # noqa: BLE001 - rviz loses the model; the device works
            if not self._stopped:
                self._log.error(f'robot_description: {type(err).__name__}: {err}')
        finally:
            self.ready.set()

    def describe(self):
        return ['robot_description']

    def stop(self, timeout=5.0):
        """No publish after this returns (the node is about to destroy its publishers)."""
        with self._lock:
            self._stopped = True
        self._thread.join(timeout)
