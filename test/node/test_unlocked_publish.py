"""Images published through rcl with the GIL released arrive as exactly the bytes packed,
from ``bytes`` and from a packer's reused array, and the plain rclpy path stays as it was."""

import threading

import numpy as np
import pytest

rclpy = pytest.importorskip('rclpy')

from helpers import SpinThread, wait_for  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402

from mujoco_hal_ros.fastpath import cdr  # noqa: E402
from mujoco_hal_ros.fastpath.unlocked_publish import BytesPublisher  # noqa: E402


@pytest.fixture
def pair(ctx):
    """A publisher and a raw subscriber on one topic, spun in the background."""
    node = rclpy.create_node('unlocked_publish_test', context=ctx)
    received = []
    lock = threading.Lock()

    def take(raw):
        with lock:
            received.append(raw)
    pub = node.create_publisher(Image, 'unlocked/image_raw', 10)
    node.create_subscription(Image, 'unlocked/image_raw', take, 10, raw=True)
    ex = SingleThreadedExecutor(context=ctx)
    ex.add_node(node)
    spinner = SpinThread(ex, 60.0)
    try:
        wait_for(lambda: pub.get_subscription_count() > 0, 10.0)
        yield pub, received
    finally:
        spinner.stop(5.0)
        ex.shutdown(timeout_sec=2.0)
        node.destroy_node()


def _frames():
    rng = np.random.default_rng(1)
    return [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(3)]


def test_bytes_and_reused_arrays_arrive_intact(pair):
    pub, received = pair
    out = BytesPublisher(pub)
    assert out.unlocked                     # rclpy's librcl and handle pointer found here
    packer = cdr.ImageBytes(48, 64, 'rgb8', 192, 'cam_optical_frame')
    frames = _frames()
    sent = [packer.pack(1.0, frames[0])]
    out.publish(sent[0])
    for i, frame in enumerate(frames[1:], start=2):
        # the same array object each time, rewritten in place: rcl copies it before returning
        in_place = packer.pack_in_place(float(i), np.ascontiguousarray(frame[::-1]),
                                        bottom_up=True)
        sent.append(in_place.tobytes())
        out.publish(in_place)
    wait_for(lambda: len(received) >= 3, 10.0)
    assert received[:3] == sent
    for raw, frame, t in zip(received, frames, (1, 2, 3), strict=True):
        msg = deserialize_message(raw, Image)
        assert bytes(msg.data) == frame.tobytes() and msg.header.stamp.sec == t


def test_without_the_rcl_call_it_is_rclpys_publish(pair):
    pub, received = pair
    out = BytesPublisher(pub)
    out._rcl = None                         # as where librcl or the handle pointer is absent
    assert not out.unlocked
    packer = cdr.ImageBytes(48, 64, 'rgb8', 192, 'f')
    frame = _frames()[0]
    out.publish(packer.pack_in_place(4.0, frame))
    out.publish(packer.pack(5.0, frame))
    wait_for(lambda: len(received) >= 2, 10.0)
    assert [deserialize_message(r, Image).header.stamp.sec for r in received[:2]] == [4, 5]


@pytest.mark.parametrize('bad', ['text', bytearray(8), np.zeros(8, np.float32),
                                 np.zeros((2, 4), np.uint8), np.zeros(16, np.uint8)[::2]])
def test_anything_but_serialized_bytes_is_refused(pair, bad):
    pub, received = pair
    with pytest.raises(TypeError):
        BytesPublisher(pub).publish(bad)
    assert received == []


def test_packing_in_place_checks_the_size():
    packer = cdr.ImageBytes(2, 2, 'rgb8', 6, 'f')
    with pytest.raises(ValueError):
        packer.pack_in_place(0.0, np.zeros((2, 3, 3), np.uint8))
    with pytest.raises(ValueError):
        packer.pack_in_place(0.0, np.zeros((2, 2, 3), np.uint8)[:, ::-1])   # not contiguous
