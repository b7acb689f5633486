"""The serialized state messages read back, through rclpy's own deserializer, as exactly the
messages they stand for (no Context needed: serialization is the middleware's type support).
"""

import numpy as np
import pytest
from rclpy.serialization import deserialize_message
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Image, JointState
from tf2_msgs.msg import TFMessage

from mujoco_hal_ros.fastpath import cdr
from mujoco_hal_ros.ros.sim.cameras import raw_images_ok
from mujoco_hal_ros.ros.sim.streams import raw_messages_ok

# names whose lengths exercise every string padding (0..3 bytes) and a non-ASCII one
NAMES = ['a', 'bb', 'ccc', 'dddd', 'joint_5', 'épaule']


def stamp(t):
    return t.sec, t.nanosec


def test_joint_state_round_trip_exact():
    rng = np.random.default_rng(0)
    pos, vel, eff = rng.standard_normal((3, len(NAMES)))
    packer = cdr.JointStateBytes(NAMES)
    msg = deserialize_message(packer.pack(12.3456789, pos, vel, eff), JointState)
    assert list(msg.name) == NAMES
    assert msg.header.frame_id == ''
    assert stamp(msg.header.stamp) == (12, 345678900)
    # bit-exact: the doubles are copied, not converted
    assert np.array_equal(msg.position, pos)
    assert np.array_equal(msg.velocity, vel)
    assert np.array_equal(msg.effort, eff)


def test_joint_state_template_is_rewritten_each_call():
    packer = cdr.JointStateBytes(['j'])
    first = packer.pack(1.0, [1.0], [2.0], [3.0])
    second = deserialize_message(packer.pack(2.5, [-1.0], [-2.0], [-3.0]), JointState)
    assert list(second.position) == [-1.0] and list(second.effort) == [-3.0]
    assert stamp(second.header.stamp) == (2, 500000000)
    # bytes already handed out are not changed by a later call
    assert list(deserialize_message(first, JointState).position) == [1.0]


def test_joint_state_with_no_joints():
    msg = deserialize_message(cdr.JointStateBytes([]).pack(0.0, [], [], []), JointState)
    assert list(msg.name) == [] and list(msg.position) == []


def test_transforms_round_trip_in_ros_quaternion_order():
    children = [f'link{i}' + 'x' * i for i in range(5)]
    packer = cdr.TransformsBytes(['world'] * 5, children)
    xyz = np.arange(15.0).reshape(5, 3) / 7
    xyzw = np.arange(20.0).reshape(5, 4) / 3
    msg = deserialize_message(packer.pack(3.000000001, xyz, xyzw), TFMessage)
    assert [t.child_frame_id for t in msg.transforms] == children
    for k, t in enumerate(msg.transforms):
        assert t.header.frame_id == 'world'
        assert stamp(t.header.stamp) == (3, 1)
        tr, rot = t.transform.translation, t.transform.rotation
        assert [tr.x, tr.y, tr.z] == xyz[k].tolist()
        assert [rot.x, rot.y, rot.z, rot.w] == xyzw[k].tolist()


def test_empty_tf_message_and_mismatched_frames():
    msg = deserialize_message(cdr.TransformsBytes([], []).pack(1.0, np.zeros((0, 3)),
                                                               np.zeros((0, 4))), TFMessage)
    assert list(msg.transforms) == []
    with pytest.raises(ValueError, match='one parent frame per child'):
        cdr.TransformsBytes(['world'], ['a', 'b'])


@pytest.mark.parametrize('seconds, expected', [
    (0.0, (0, 0)), (7.25, (7, 250000000)), (1.9999999999, (2, 0)), (-0.5, (0, 0)),
    (86400.000000002, (86400, 2))])
def test_clock_stamps_round_to_the_nanosecond_and_never_go_negative(seconds, expected):
    assert stamp(deserialize_message(cdr.clock_bytes(seconds), Clock).clock) == expected
    assert cdr.split_stamp(seconds) == expected


def test_this_middleware_reads_the_bytes_back():
    js = cdr.JointStateBytes(NAMES)
    tf = cdr.TransformsBytes(['world', 'world'], ['a', 'bb'])
    assert raw_messages_ok(js, tf, NAMES)
    # a template that disagrees with the names is caught, so the node falls back
    assert not raw_messages_ok(js, tf, NAMES[:-1])


def test_image_round_trip_rgb_and_depth():
    rgb = (np.arange(6 * 8 * 3) % 251).astype(np.uint8).reshape(6, 8, 3)
    msg = deserialize_message(cdr.ImageBytes(6, 8, 'rgb8', 24, 'cam_optical_frame')
                              .pack(4.75, rgb), Image)
    assert (msg.height, msg.width, msg.step, msg.encoding, msg.is_bigendian) == \
        (6, 8, 24, 'rgb8', 0)
    assert msg.header.frame_id == 'cam_optical_frame'
    assert stamp(msg.header.stamp) == (4, 750000000)
    assert bytes(msg.data) == rgb.tobytes()
    depth = np.linspace(0.1, 9.0, 6 * 8, dtype=np.float32).reshape(6, 8)
    msg = deserialize_message(cdr.ImageBytes(6, 8, '32FC1', 32, 'd').pack(0.5, depth), Image)
    assert np.array_equal(np.frombuffer(bytes(msg.data), np.float32).reshape(6, 8), depth)


def test_image_of_the_wrong_size_is_refused():
    packer = cdr.ImageBytes(6, 8, 'rgb8', 24, 'f')
    with pytest.raises(ValueError, match='expected 144 bytes of pixels, got 141'):
        packer.pack(0.0, np.zeros((47, 3), np.uint8))


def test_this_middleware_reads_packed_images_back():
    assert raw_images_ok()


def test_bottom_up_rows_are_flipped_while_packing():
    """OpenGL reads the bottom row first; the packed image has row 0 at the top."""
    top_down = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    packer = cdr.ImageBytes(4, 5, 'rgb8', 15, 'cam_optical_frame')
    flipped = packer.pack(3.5, np.ascontiguousarray(top_down[::-1]), bottom_up=True)
    assert flipped == packer.pack(3.5, top_down)
    msg = deserialize_message(flipped, Image)
    assert bytes(msg.data) == top_down.tobytes()
    depth = np.linspace(0.1, 2.0, 12, dtype=np.float32).reshape(3, 4)
    packer = cdr.ImageBytes(3, 4, '32FC1', 16, 'cam_optical_frame')
    msg = deserialize_message(packer.pack(1.0, np.ascontiguousarray(depth[::-1]),
                                          bottom_up=True), Image)
    assert np.array_equal(np.frombuffer(bytes(msg.data), np.float32).reshape(3, 4), depth)


def test_camera_info_restamped_without_touching_the_rest():
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import CameraInfo
    info = CameraInfo(width=640, height=480, distortion_model='plumb_bob', d=[0.0] * 5,
                      k=[500.0, 0.0, 319.5, 0.0, 500.0, 239.5, 0.0, 0.0, 1.0])
    info.header.frame_id = 'overhead_optical_frame'
    packer = cdr.HeaderFirstBytes(serialize_message(info))
    for seconds, expected in ((0.0, (0, 0)), (12.345678901, (12, 345678901))):
        msg = deserialize_message(packer.pack(seconds), CameraInfo)
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == expected
        assert msg.header.frame_id == 'overhead_optical_frame'
        assert list(msg.k) == list(info.k) and msg.distortion_model == 'plumb_bob'
    with pytest.raises(ValueError):
        cdr.HeaderFirstBytes(b'\x00\x00\x00\x00' + bytes(12))      # big-endian CDR
    with pytest.raises(ValueError):
        cdr.HeaderFirstBytes(cdr.ENCAPSULATION + bytes(4))          # no room for a stamp


def test_freed_frames_stay_with_the_process():
    """glibc takes both allocator settings (the sim_node and pool_node processes set them
    at start): a 0.9 MB frame buffer freed is reused, not unmapped and faulted back in."""
    import ctypes.util

    from mujoco_hal_ros.fastpath.process import keep_freed_memory
    if 'libc.so' not in (ctypes.util.find_library('c') or ''):
        pytest.skip('not glibc')
    assert keep_freed_memory() is True
