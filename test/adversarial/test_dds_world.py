"""Scene edits over DDS against sim_node in its own process: a burst of 100 spawns at one
pose, and oversized models. Every request is answered, the node's memory stays bounded (the
untrusted models are read in its sandbox process, not in it), and /clock keeps going."""

import time

import pytest

rclpy = pytest.importorskip('rclpy')
pytest.importorskip('simulation_interfaces.srv', reason='simulation_interfaces is not '
                    'installed and its stand-in was not built (run scripts/setup.sh)')

from dds_helpers import Client, start_sim  # noqa: E402
from helpers import wait_for  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from simulation_interfaces import srv as si  # noqa: E402
from simulation_interfaces.msg import Result  # noqa: E402

from mujoco_hal_ros.ros.qos import REQUEST_QOS  # noqa: E402

BOX = ('<mujoco><worldbody><body name="box"><freejoint/>'
       '<geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body></worldbody></mujoco>')
MILLION = ('<mujoco><worldbody>' + '<replicate count="100" offset="0.01 0 0">' * 3 +
           '<geom size=".001"/>' + '</replicate>' * 3 + '</worldbody></mujoco>')
# a small arena: the pile overflows it within a few tens of boxes
SMALL_ARENA = """<mujoco>
  <size memory="1M"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="arm"><joint name="hinge" axis="0 0 1"/>
      <geom type="capsule" size=".02" fromto="0 0 0 .2 0 0"/></body>
  </worldbody>
  <actuator><position name="turn" joint="hinge" kp="5"/></actuator>
</mujoco>
"""
MATCH_S = 2.0
ANSWER_S = 180.0


def rss_mb(pid):
    with open(f'/proc/{pid}/status') as handle:
        for line in handle:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture
def client():
    c = Client(budget=400.0)
    yield c
    c.close()


def spawn_request(name, resource=BOX):
    req = si.SpawnEntity.Request(name=name)
    req.entity_resource.resource_string = resource
    req.initial_pose.pose.position.x, req.initial_pose.pose.position.z = 0.3, 0.3
    return req


def test_a_burst_of_spawns_and_oversized_models_leave_the_node_running(spawn, client,
                                                                       tmp_path):
    model = tmp_path / 'small.xml'
    model.write_text(SMALL_ARENA)
    proc = start_sim(spawn, f'model:={model}', 'camera_rate:=1.0', 'publish_rate:=20.0')
    client.wait_graph(['/spawn_entity', '/load_world', '/clock'], proc, spawn)
    clock = []
    client.node.create_subscription(Clock, '/clock', lambda m: clock.append(
        m.clock.sec + m.clock.nanosec * 1e-9), 10)
    cli = client.node.create_client(si.SpawnEntity, '/spawn_entity', qos_profile=REQUEST_QOS)
    load = client.node.create_client(si.LoadWorld, '/load_world', qos_profile=REQUEST_QOS)
    assert cli.wait_for_service(timeout_sec=20.0) and load.wait_for_service(timeout_sec=20.0)
    time.sleep(MATCH_S)      # the server must have found the client's reply reader too
    start_rss = rss_mb(proc.pid)
    # 100 small free boxes at one pose, sent at once
    futures = [cli.call_async(spawn_request(f'b{i}')) for i in range(100)]
    answered = client.answers(futures, ANSWER_S)
    assert answered == 100, f'{answered} of 100 spawns answered'
    results = [f.result().result for f in futures]
    ok = [r for r in results if r.result == Result.RESULT_OK]
    refused = [r for r in results if r.result != Result.RESULT_OK]
    assert ok, 'not one spawn landed'
    assert refused, 'the pile never overflowed the arena: the test proves nothing'
    assert all('<size memory=' in r.error_message for r in refused), \
        refused[0].error_message
    assert proc.poll() is None, spawn.output(proc)[-3000:]
    # oversized models: a million geoms by nested replicate, a 200k-body world file
    before = rss_mb(proc.pid)
    r = client.wait(cli.call_async(spawn_request('pile', MILLION)), ANSWER_S)
    assert r.result.result != Result.RESULT_OK and 'world_max_geoms' in r.result.error_message
    big = tmp_path / 'bodies.xml'
    with open(big, 'w') as handle:
        handle.write('<mujoco><worldbody>')
        for i in range(200_000):
            handle.write(f'<body pos="{i % 100} {i // 100} 0"><geom size=".1"/></body>')
        handle.write('</worldbody></mujoco>')
    req = si.LoadWorld.Request()
    req.world_resource.uri = f'file://{big}'
    r = client.wait(load.call_async(req), ANSWER_S)
    assert r.result.result != Result.RESULT_OK and 'world_max_bodies' in \
        r.result.error_message
    after = rss_mb(proc.pid)
    assert after - before < 100, f'the node grew from {before:.0f} to {after:.0f} MB'
    assert after - start_rss < 300, f'the node grew from {start_rss:.0f} to {after:.0f} MB'
    # still running: /clock goes on, and a sane spawn lands
    assert wait_for(lambda: clock, 20.0), 'no /clock'
    t = clock[-1]
    assert wait_for(lambda: clock[-1] > t, 20.0), '/clock stopped'
    r = client.wait(cli.call_async(spawn_request('last')), ANSWER_S)
    assert r.result.result != Result.RESULT_OK or r.entity_name == 'last'
    assert proc.poll() is None, spawn.output(proc)[-3000:]
    out = spawn.output(proc)
    assert 'Traceback' not in out and 'INTERNAL_ERROR' not in out, out[-3000:]
