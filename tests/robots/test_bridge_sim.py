"""Bridge over loopback with the robosuite simulator behind it: auth, safety, watchdog, e-stop, HITL, fuzz."""

import functools
import subprocess
import time

import msgpack
import numpy as np
import pytest
from websockets.sync.client import connect

from robots.bridge.adapters import SimAdapter
from robots.bridge.client import AuthError, BridgeClient
from robots.bridge.protocol import encode
from robots.bridge.runner import ServerThread
from robots.bridge.server import BridgeConfig, BridgeServer
from robots.env import RobosuiteConfig, make_env
from robots.recorder import read_episodes

pytestmark = [pytest.mark.sim, pytest.mark.timeout(180)]
TOKEN = "test-token-0123456789abcdef"
HZ, WATCHDOG = 20.0, 0.2


def _server(tmp_path, **cfg_kw):
    env_cfg = RobosuiteConfig(task="Lift", cameras=("agentview",), image_size=32, max_steps=100_000)
    cfg = BridgeConfig(port=0, control_hz=HZ, watchdog_s=WATCHDOG, record_path=str(tmp_path / "episodes.h5"), **cfg_kw)
    return BridgeServer(SimAdapter(functools.partial(make_env, env_cfg)), cfg, token=TOKEN)


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    st = ServerThread(_server(tmp_path_factory.mktemp("bridge")))
    st.start()
    yield st
    st.stop()


@pytest.fixture()
def policy(bridge):
    """A fresh policy client on a clean server state (estop cleared, new episode)."""
    with BridgeClient(bridge.uri(), TOKEN, role="operator") as op:
        op.clear_estop(), op.pause(False), op.takeover(False)
    c = BridgeClient(bridge.uri(), TOKEN)
    assert c.reset(seed=0)["type"] == "obs"
    yield c
    try:
        c.close()
    except Exception:
        pass


def _wait(pred, timeout=3.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_unauthenticated_and_wrong_token_rejected_and_robot_never_moves(bridge, policy):
    server = bridge.server
    before = policy.observe()["proprio"]
    steps = len(server.episode.steps)
    policy.close()  # free the policy slot so the rejection is about auth, not "busy"
    n_rej = len(server.rejections)
    with connect(bridge.uri()) as ws:  # no hello: straight to an action
        ws.send(encode("act", seq=1, action=np.ones(7, np.float32)))
        assert msgpack.unpackb(ws.recv(timeout=5))["code"] == "auth_failed"
        with pytest.raises(Exception):
            ws.recv(timeout=5)
    assert ws.close_code == 4401
    with pytest.raises(AuthError):
        BridgeClient(bridge.uri(), "wrong-token-0123456789abcdef")
    with connect(bridge.uri()) as ws:  # silent client: auth timeout
        assert msgpack.unpackb(ws.recv(timeout=5))["code"] == "auth_timeout"
    assert len(server.rejections) == n_rej + 3
    time.sleep(0.2)
    assert len(server.episode.steps) == steps
    with BridgeClient(bridge.uri(), TOKEN) as c:
        assert np.allclose(c.observe()["proprio"], before)


def test_step_returns_binary_images_and_clamps_out_of_limit_actions(bridge, policy):
    reply = policy.act([5, 0, 0, 0, 0, 0, 3])
    assert reply["type"] == "obs" and reply["images"]["agentview"].shape == (32, 32, 3)
    assert reply["images"]["agentview"].dtype == np.uint8
    assert "translation_limit" in reply["safety"] and "gripper_limit" in reply["safety"]
    applied = bridge.server.episode.steps[-1]["action"]
    assert np.all(np.abs(applied) <= 1.0) and applied[0] <= 0.5 + 1e-6  # rate-limited from rest


def test_nan_and_bad_shape_actions_refused(bridge, policy):
    steps = len(bridge.server.episode.steps)
    for bad in ([np.nan] * 7, [np.inf] * 7, [0.0] * 3):
        r = policy.act(bad)
        assert r["type"] == "error" and r["code"] == "bad_action"
    assert policy.request("act", action=[0, 0, 0, 0, 0, 0, "x"])["code"] == "bad_action"
    time.sleep(0.15)
    assert len(bridge.server.episode.steps) == steps


def test_watchdog_halts_within_deadline(bridge, policy):
    for _ in range(3):
        assert policy.act(np.zeros(7))["type"] == "obs"
    t0 = time.monotonic()
    assert _wait(lambda: bridge.server.halted, timeout=2.0)
    assert bridge.server.watchdog_latency_s <= WATCHDOG + 1.0 / HZ + 0.05
    assert time.monotonic() - t0 < WATCHDOG + 0.5
    steps = len(bridge.server.episode.steps)
    time.sleep(0.2)
    assert len(bridge.server.episode.steps) == steps  # halted: nothing applied
    assert policy.status()["halted"] and any(n["type"] == "halted" for n in policy.notices)
    assert policy.act(np.zeros(7))["type"] == "obs"  # a valid command resumes
    assert bridge.server.episode.events[-1]["kind"] in ("resume_after_watchdog", "watchdog")


def test_estop_within_one_tick_and_needs_operator_and_reset(bridge, policy):
    policy.act(np.zeros(7))
    assert policy.estop()["type"] == "ack"
    assert _wait(lambda: bridge.server.estopped, timeout=1.0)
    assert bridge.server.estop_latency_s <= 1.0 / HZ + 0.1
    r = policy.act(np.zeros(7))
    assert r["type"] == "refused" and r["reason"] == "estopped"
    assert bridge.server.episodes[-1].end_reason == "estop"
    assert policy.request("clear_estop")["code"] == "operator_only"
    with BridgeClient(bridge.uri(), TOKEN, role="operator") as op:
        op.clear_estop()
    assert policy.act(np.zeros(7))["reason"] == "needs_reset"
    policy.reset(seed=1)
    assert policy.act(np.zeros(7))["type"] == "obs"


def test_dropped_connection_ends_episode_and_keeps_data(bridge, policy):
    for _ in range(4):
        policy.act([0.2, 0, 0, 0, 0, 0, -1])
    policy.ws.socket.close()  # abrupt: no bye, no close handshake
    assert _wait(lambda: not bridge.server.status()["policy_connected"], timeout=5)
    ep = bridge.server.episodes[-1]
    assert ep.end_reason == "disconnect" and len(ep.steps) == 4 and ep.success is False
    bridge.server.flush_writes()
    saved = read_episodes(bridge.server.cfg.record_path)[-1]
    assert saved["end_reason"] == "disconnect" and saved["actions"].shape == (4, 7)
    assert saved["images"]["agentview"].shape == (4, 32, 32, 3) and saved["states"].shape[0] == 4


def test_operator_pause_takeover_label_and_mark(bridge, policy):
    with BridgeClient(bridge.uri(), TOKEN, role="operator") as op:
        policy.act(np.zeros(7))
        op.pause(True)
        assert policy.act(np.zeros(7))["reason"] == "paused"
        op.pause(False)
        op.takeover(True)
        assert policy.act(np.zeros(7))["reason"] == "takeover"
        n = len(bridge.server.episode.steps)
        for _ in range(3):  # the newest teleop command wins each tick; a slow tick may merge two
            op.teleop([0, 0, 0.3, 0, 0, 0, -1])
            time.sleep(1.5 / HZ)
        assert _wait(lambda: len(bridge.server.episode.steps) >= n + 1)
        op.takeover(False)
        op.label("operator moved the arm up")
        op.mark(False)
    ep = bridge.server.episodes[-1]
    assert ep.end_reason == "marked" and ep.success is False
    sources = [s["source"] for s in ep.steps]
    assert sources[0] == 0 and sources[-1] == 1 and any(s["intervention"] for s in ep.steps)
    kinds = [e["kind"] for e in ep.events]
    assert {"pause", "takeover", "label", "mark"} <= set(kinds)


def test_fuzzed_messages_never_crash_the_server(bridge, policy):
    rng = np.random.default_rng(0)
    for i in range(150):
        kind = i % 5
        if kind == 0:
            frame = rng.bytes(int(rng.integers(0, 200)))
        elif kind == 1:
            frame = msgpack.packb({"v": 1, "type": "act", "action": rng.bytes(8)})
        elif kind == 2:
            frame = msgpack.packb({"v": 1, "type": ["x"], "seq": "y"})
        elif kind == 3:
            frame = msgpack.packb({"v": 1, "type": "reset", "init_state": {"__nd__": 1, "dtype": "float64",
                                                                          "shape": [1 << 15, 1 << 15], "data": b""}})
        else:
            frame = "{\"type\": \"act\"}"
        policy.send_raw(frame)
    for _ in range(10):  # pre-auth garbage on fresh connections
        with connect(bridge.uri()) as ws:
            ws.send(rng.bytes(64))
    assert _wait(lambda: bridge.server.bad_messages >= 150, timeout=10)
    assert policy.act(np.zeros(7))["type"] == "obs"  # same connection still served
    r = policy.reset(init_state=np.zeros(5))  # well-formed but impossible state
    assert r["type"] == "error" and r["code"] == "reset_failed"
    assert policy.act(np.zeros(7))["reason"] == "needs_reset"
    assert policy.reset(seed=0)["type"] == "obs" and policy.act(np.zeros(7))["type"] == "obs"


def test_bind_and_tls(tmp_path):
    with pytest.raises(ValueError, match="without TLS"):
        _server(tmp_path, host="0.0.0.0")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    st = ServerThread(_server(tmp_path, tls_cert=str(cert), tls_key=str(key)))
    st.start()
    try:
        assert st.uri().startswith("wss://")
        with BridgeClient(st.uri(), TOKEN, cafile=str(cert)) as c:
            assert c.act(np.zeros(7))["type"] == "obs"
    finally:
        st.stop()


def test_graded_protocol_replay_return_explore_and_human_guided(bridge, policy):
    import threading

    from robots.bridge.graded import human_guided, replay_demo, return_and_explore

    acts = np.array([[0.4, 0, 0, 0, 0, 0, -1], [0.4, 0.2, 0, 0, 0, 0, -1], [0, 0.4, 0, 0, 0, 0, -1]] * 2)
    for a in acts:
        policy.act(a)
    policy.reset(seed=5)
    demo = bridge.server.episodes[-1]
    states = np.stack([s["state"] for s in demo.steps])
    recorded = np.stack([s["action"] for s in demo.steps])
    proprio = np.stack([s["proprio"] for s in demo.steps])
    # 1. offline replay from the recorded first state reproduces the demo.
    r = replay_demo(policy, states, recorded)
    assert r["steps"] == len(acts) and np.allclose(r["start"]["proprio"], proprio[0], atol=1e-5)
    replayed = bridge.server.episode.steps
    assert np.allclose(np.stack([s["proprio"] for s in replayed]), proprio, atol=2e-3)
    # 2. return to step 3, then explore.
    r = return_and_explore(policy, states, 3, lambda obs: np.zeros(7), max_steps=2)
    # (observations lag the state by one physics substep while moving: ~0.1 mm)
    assert np.allclose(r["start"]["proprio"], proprio[3], atol=1e-3) and r["steps"] == 2
    # 3. human-guided: the operator takes over mid-way, then hands back.
    with BridgeClient(bridge.uri(), TOKEN, role="operator") as op:
        out = {}
        th = threading.Thread(target=lambda: out.update(human_guided(policy, lambda o: np.zeros(7), 25, seed=1)))
        th.start()
        time.sleep(0.3)
        op.takeover(True)
        for _ in range(3):
            op.teleop([0, 0, 0.3, 0, 0, 0, -1])
            time.sleep(0.1)
        op.takeover(False)
        th.join(30)
    assert out["steps"] == 25 and out["refused"] > 0
    src = [s["source"] for s in bridge.server.episode.steps]
    assert 0 in src and 1 in src
