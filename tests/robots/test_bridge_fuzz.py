"""Property-based fuzzing of the bridge's message decoding, before and after authentication, against the real
server over loopback (fake arm env). Bounded: a fixed number of derandomized examples, a deadline per frame."""

import functools
import os
import sys
import time

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_envs import FakeArmEnv  # noqa: E402

from robots.bridge.adapters import SimAdapter
from robots.bridge.client import AuthError, BridgeClient, BridgeError
from robots.bridge.protocol import CLIENT_TYPES, decode
from robots.bridge.runner import ServerThread
from robots.bridge.server import BridgeConfig, BridgeServer

pytestmark = pytest.mark.timeout(180)
TOKEN = "fuzz-token-0123456789abcdef"
DEADLINE_S = 3.0  # every frame is answered or its connection closed within this (auth_timeout_s is far longer)
EPISODE_LEN = 5
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_leaf = (st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 64) - 1) | st.floats()
         | st.text(max_size=24) | st.binary(max_size=64))
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=6), max_leaves=24)
_array = st.fixed_dictionaries({
    "__nd__": st.sampled_from([1, 1, 0, "1"]), "dtype": st.sampled_from(["float32", "float64", "uint8", "object", "<f8"]),
    "shape": st.lists(st.integers(-2, 1 << 17), max_size=5), "data": st.binary(max_size=80)})
_valid_action = st.lists(st.floats(-2, 2), min_size=7, max_size=7) | st.binary(min_size=28, max_size=28).map(
    lambda b: {"__nd__": 1, "dtype": "float32", "shape": [7], "data": b})  # raw float32 bytes: NaN / inf too
_action = _valid_action | st.lists(st.floats() | st.integers(-5, 5) | st.booleans(), max_size=9) | _array | _value
_fields = {"seq": st.integers(-3, 1 << 40) | _leaf, "action": _action, "token": _value, "role": _value,
           "seed": st.integers(-5, 5) | _value, "init_state": _array | _value, "on": st.booleans() | _value,
           "success": st.booleans() | _value, "text": st.text(max_size=30) | _value}
# Mostly well-formed envelopes (version 1, a known type), so the per-type validation is reached.
_message = st.fixed_dictionaries({"v": st.just(1), "type": st.sampled_from(sorted(CLIENT_TYPES))}, optional=_fields)
_odd_message = st.fixed_dictionaries({"v": _leaf, "type": st.text(max_size=70) | _value}, optional=_fields)
_prefix = b"\x83" + b"".join(msgpack.packb(x) for x in ("v", 1, "type", "act", "action"))
_deep = st.integers(1, 3000).map(lambda d: _prefix + b"\x91" * d + b"\xc0") | st.integers(1, 1500).map(
    lambda d: _prefix + b"\x81\xa1k" * d + b"\xc0")
# Two families, each fuzzed on its own (a union would draw almost only from one of them).
MESSAGES = _message.map(msgpack.packb)
HOSTILE = st.one_of(_deep, _odd_message.map(msgpack.packb), st.binary(max_size=300), st.text(max_size=40))
FAMILIES = {"messages": MESSAGES, "hostile": HOSTILE}


@pytest.fixture(scope="module")
def bridge():
    cfg = BridgeConfig(port=0, auth_timeout_s=30.0, watchdog_s=5.0)
    st_ = ServerThread(BridgeServer(SimAdapter(functools.partial(FakeArmEnv, episode_len=EPISODE_LEN)), cfg, token=TOKEN))
    st_.start()
    yield st_
    st_.stop()


def _server_alive(bridge) -> None:
    assert bridge._thread.is_alive() and not bridge.server._loop_task.done()
    assert not bridge.server._watchdog_task.done()


@pytest.mark.parametrize("family", ["messages", "hostile"])
def test_pre_auth_frames_are_rejected_within_the_deadline(bridge, family):
    """Any first frame from an unauthenticated peer: an `auth_*` error and close 4401, within the deadline."""

    @FUZZ
    @given(frame=FAMILIES[family])
    def check(frame):
        with connect(bridge.uri(), open_timeout=DEADLINE_S) as ws:
            ws.send(frame)
            try:
                reply = decode(ws.recv(timeout=DEADLINE_S))
                assert reply["type"] == "error" and reply["code"].startswith("auth_"), reply
                ws.recv(timeout=DEADLINE_S)
                raise AssertionError("the connection stayed open after a rejection")
            except ConnectionClosed:
                pass
        assert ws.close_code == 4401, ws.close_code

    check()
    _server_alive(bridge)
    _legitimate_episode(bridge)


class _Clients:
    """One authenticated client per role, reconnected when the server closed it (bye, a second hello)."""

    def __init__(self, uri: str) -> None:
        self.uri, self.clients = uri, {}

    def get(self, role: str) -> BridgeClient:
        end = time.monotonic() + DEADLINE_S  # the server frees the policy slot just after a close
        while role not in self.clients:
            try:
                self.clients[role] = BridgeClient(self.uri, TOKEN, role=role, timeout_s=DEADLINE_S)
            except AuthError as e:
                if e.code != "busy" or time.monotonic() > end:
                    raise
                time.sleep(0.05)
        return self.clients[role]

    def drop(self, role: str) -> None:
        c = self.clients.pop(role)
        try:
            c.ws.close()
        except Exception:  # noqa: BLE001
            pass


@pytest.mark.parametrize("family", ["messages", "hostile"])
def test_post_auth_frames_are_answered_or_closed_within_the_deadline(bridge, family):
    """Any frame from an authenticated client (policy or operator): the server answers it, or closes the
    connection, within the deadline; a `status` request right after is answered (the connection is served)."""
    clients = _Clients(bridge.uri())

    @FUZZ
    @given(role=st.sampled_from(["policy", "operator"]), frame=FAMILIES[family])
    def check(role, frame):
        c = clients.get(role)
        c.pop_notices()
        try:
            c.send_raw(frame)
            reply = c.request("status")  # answered in order, after the fuzzed frame's own reply
        except BridgeError:
            # Closed on purpose (bye: 1000, second hello: 4400/4401), never by a failing handler (1011).
            assert c.ws.close_code in (1000, 4400, 4401), c.ws.close_code
            return clients.drop(role)
        assert reply["type"] == "status" and c.notices, "the fuzzed frame got no answer"

    try:
        check()
    finally:
        for role in list(clients.clients):
            clients.drop(role)
    _server_alive(bridge)
    _legitimate_episode(bridge)


def _legitimate_episode(bridge) -> None:
    """An operator clears whatever the fuzz left (e-stop, pause, takeover); a policy client completes an episode."""
    server = bridge.server
    with BridgeClient(bridge.uri(), TOKEN, role="operator") as op:
        for r in (op.clear_estop(), op.pause(False), op.takeover(False)):
            assert r["type"] == "ack"
    clients = _Clients(bridge.uri())
    pol = clients.get("policy")
    try:
        assert pol.reset(seed=0)["type"] == "obs"
        for _ in range(EPISODE_LEN):
            r = pol.act(np.zeros(7))
            assert r["type"] == "obs", r
        assert r["result"]["success"]
        end = time.monotonic() + DEADLINE_S  # the server closes the episode just after replying
        while not (server.episodes and server.episodes[-1].end_reason == "success") and time.monotonic() < end:
            time.sleep(0.01)
        assert server.episodes[-1].end_reason == "success" and len(server.episodes[-1].steps) == EPISODE_LEN
    finally:
        clients.drop("policy")
