"""Bursts from many clients at once over DDS: every request is answered.

rclpy's default service queue keeps 10 requests: 30 ``hold`` requests at once were
answered 10 times and the rest were lost with no reply and no log (``ros/qos.py``). The
clients here keep as many replies as the node does: with Fast DDS every client of a service
receives every reply and keeps the last ``depth`` of them, so a default client (10) in a
burst of 30 can lose its own reply to the others' whatever the server does.
"""

import time

import pytest

rclpy = pytest.importorskip('rclpy')

from dds_helpers import Client, start_sim  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from mujoco_hal_ros.ros.qos import REQUEST_QOS  # noqa: E402
from mujoco_hal_ros.srv import Describe  # noqa: E402

MATCH_S = 2.0


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


def burst(client, srv_type, name, count):
    """``count`` clients, each sending one request at the same moment; how many answered."""
    clients = [client.node.create_client(srv_type, name, qos_profile=REQUEST_QOS)
               for _ in range(count)]
    try:
        for c in clients:
            assert c.wait_for_service(timeout_sec=20.0), f'{name} not offered'
        # wait_for_service says the client found the server, not that the server found the
        # client's reply reader: a reply sent before that is dropped by the middleware.
        time.sleep(MATCH_S)
        futures = [c.call_async(srv_type.Request()) for c in clients]
        answered = client.answers(futures, 30.0)
        return answered, [f.result() for f in futures if f.done()]
    finally:
        for c in clients:
            client.node.destroy_client(c)


def test_bursts_of_hold_reset_and_describe_are_all_answered(spawn, client):
    proc = start_sim(spawn, 'camera_rate:=1.0')
    client.wait_graph(['/hold', '/reset', '/describe'], proc, spawn)
    answered, results = burst(client, Trigger, '/hold', 30)
    assert answered == 30, f'{answered} of 30 hold requests answered'
    assert all(r.success for r in results)
    answered, results = burst(client, Trigger, '/reset', 50)
    assert answered == 50, f'{answered} of 50 reset requests answered'
    answered, results = burst(client, Describe, '/describe', 50)
    assert answered == 50, f'{answered} of 50 describe requests answered'
    assert all(r.id for r in results)
