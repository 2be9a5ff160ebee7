"""Bridge safety guarantees against the real server over loopback (a fake arm env: no simulator needed), and
SIGINT / SIGTERM of the real `python -m robots.bridge` process with the simulator behind it.

Each test names the guarantee it checks (robots/README.md, "Safety guarantees")."""

import functools
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_envs import FakeArmEnv  # noqa: E402

from robots.bridge.adapters import SimAdapter
from robots.bridge.client import BridgeClient, BridgeError
from robots.bridge.protocol import decode
from robots.bridge.runner import ServerThread
from robots.bridge.server import BridgeConfig, BridgeServer

pytestmark = pytest.mark.timeout(120)
TOKEN = "safety-token-0123456789abcdef"
ZERO = np.zeros(7)


class CountingAdapter(SimAdapter):
    """A SimAdapter over a fake arm that counts the motion-causing calls it receives."""

    def __init__(self, step_s: float = 0.0) -> None:
        super().__init__(functools.partial(FakeArmEnv, step_s=step_s))
        self.resets = self.applies = 0

    def apply(self, action):
        self.applies += 1
        return super().apply(action)

    def reset(self, seed=None, init_state=None):
        self.resets += 1
        return super().reset(seed, init_state)


@pytest.fixture()
def serve():
    """serve(step_s=..., **BridgeConfig fields) -> a running ServerThread; all are stopped after the test."""
    started = []

    def make(step_s: float = 0.0, **cfg_kw) -> ServerThread:
        cfg_kw.setdefault("watchdog_s", 5.0)
        st = ServerThread(BridgeServer(CountingAdapter(step_s), BridgeConfig(port=0, **cfg_kw), token=TOKEN))
        st.start()
        started.append(st)
        return st

    yield make
    for st in started:
        st.stop()


def _wait(pred, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def test_estop_refuses_reset_act_and_teleop_until_cleared_then_needs_reset(serve):
    """E-stop: once acknowledged, act / reset / teleop are refused (before the next tick applies it); after
    clear_estop nothing moves (policy or teleop) until a reset."""
    st = serve(control_hz=2.0)  # 0.5 s between ticks: the reset always arrives before the tick that applies the e-stop
    server, adapter = st.server, st.server.adapter
    with BridgeClient(st.uri(), TOKEN) as pol, BridgeClient(st.uri(), TOKEN, role="operator") as op:
        for attempt in range(3):
            assert pol.reset(seed=0)["type"] == "obs" and pol.act(ZERO)["type"] == "obs"
            resets, applies = adapter.resets, adapter.applies
            assert pol.estop()["type"] == "ack"
            r = pol.reset(seed=1)
            assert (r["type"], r.get("reason")) == ("refused", "estopped"), attempt
            assert op.reset(seed=1)["reason"] == "estopped"
            assert pol.act(ZERO)["reason"] == "estopped"
            op.takeover(True)
            assert op.teleop(ZERO)["reason"] == "estopped"
            assert _wait(lambda: server.estopped)
            assert adapter.resets == resets and adapter.applies == applies
            op.clear_estop()
            assert pol.act(ZERO)["reason"] == "needs_reset"
            assert op.teleop(ZERO)["reason"] == "needs_reset"
            time.sleep(1.2)  # two ticks during the takeover: a teleop adapter must not move the robot either
            assert adapter.applies == applies and not server.episode.steps
            op.takeover(False)


def test_teleop_outside_takeover_is_refused_and_takeover_starts_from_hold(serve):
    """Teleop: commands sent while no takeover is active are answered with an error and never queued."""
    st = serve()
    server = st.server
    with BridgeClient(st.uri(), TOKEN, role="operator") as op:
        r = op.teleop([0, 0, 0.3, 0, 0, 0, -1])
        assert (r["type"], r.get("code")) == ("error", "not_in_takeover")
        steps = len(server.episode.steps)
        op.takeover(True)
        time.sleep(0.3)  # 6 ticks of takeover without a teleop command: hold
        assert len(server.episode.steps) == steps
        assert op.teleop([0, 0, 0.3, 0, 0, 0, -1])["type"] == "ack"
        assert _wait(lambda: len(server.episode.steps) == steps + 1)
        op.takeover(False)


def test_wrong_length_teleop_is_answered_with_an_error(serve, caplog):
    """Teleop: validated like policy actions (length, finiteness) and answered; nothing reaches the control tick."""
    st = serve()
    server = st.server
    with BridgeClient(st.uri(), TOKEN, role="operator") as op:
        op.takeover(True)
        for bad in ([0.1] * 3, [0.1] * 8, [np.nan] * 7):
            r = op.teleop(bad)
            assert (r["type"], r.get("code")) == ("error", "bad_action"), bad
        time.sleep(0.3)
        op.takeover(False)
    assert not server.episode.steps
    assert not [r for r in caplog.records if "control tick failed" in r.getMessage()]


def test_slow_executor_does_not_trip_the_watchdog(serve):
    """Watchdog: client silence counts from the reply; a step slower than watchdog_s (within the command
    deadline) is not silence. After the last reply, silence trips it on time."""
    st = serve(step_s=0.35, watchdog_s=0.2, control_hz=20.0)  # each step takes 0.35 s > watchdog_s
    server = st.server
    with BridgeClient(st.uri(), TOKEN) as pol:
        pol.reset(seed=0)
        for _ in range(6):
            r = pol.act(ZERO)
            assert r["type"] == "obs", r
        kinds = [e["kind"] for e in server.episode.events]
        assert "watchdog" not in kinds and not any(n["type"] == "halted" for n in pol.notices)
        t_reply = time.monotonic()
        assert _wait(lambda: server.halted, timeout=2.0)
        assert time.monotonic() - t_reply < 0.2 + 0.15 and server.watchdog_latency_s < 0.2 + 0.1
        assert [e["kind"] for e in server.episode.events].count("watchdog") == 1


def test_command_deadline_halts_a_slow_executor(serve):
    """Watchdog: an executor slower than command_deadline_s halts (event `deadline`, `halted` notice); the command
    is still answered and a valid command resumes."""
    st = serve(step_s=0.6, watchdog_s=0.2, command_deadline_s=0.3)
    server = st.server
    with BridgeClient(st.uri(), TOKEN) as pol:
        pol.reset(seed=0)
        assert pol.act(ZERO)["type"] == "obs"
        assert any(n["type"] == "halted" and n.get("reason") == "deadline" for n in pol.pop_notices())
        assert [e["kind"] for e in server.episode.events] == ["deadline"]
        assert server.episode.events[0]["exec_s"] > 0.3


def test_second_hello_with_a_wrong_token_is_refused_and_closed(serve):
    """Auth: a `hello` after authentication is refused and the connection closed (a wrong token is logged)."""
    st = serve()
    pol = BridgeClient(st.uri(), TOKEN)
    r = pol.request("hello", token="wrong-token-0123456789abcdef", role="policy")
    assert (r["type"], r.get("code")) == ("error", "auth_failed")
    with pytest.raises(BridgeError):
        pol.observe()
    assert pol.ws.close_code == 4401 and st.server.rejections[-1][1] == "auth_failed"


def test_no_empty_episodes_after_a_disconnect(serve):
    """Episodes: a disconnect keeps the steps; the watchdog does not run without a policy client, and no 0-step
    episode is recorded."""
    st = serve(watchdog_s=0.3)
    server = st.server
    pol = BridgeClient(st.uri(), TOKEN)
    pol.reset(seed=0)
    for _ in range(3):
        pol.act(ZERO)
    pol.ws.socket.close()
    assert _wait(lambda: not server.status()["policy_connected"])
    time.sleep(1.0)  # > 3 x watchdog_s without a client
    assert server.episode.events == [] and not server.halted
    with BridgeClient(st.uri(), TOKEN) as pol:
        pol.reset(seed=1)
        pol.act(ZERO)
        pol.reset(seed=2)
    assert [len(ep.steps) for ep in server.episodes] == [3, 1]
    assert [ep.end_reason for ep in server.episodes] == ["disconnect", "reset"]
    assert "watchdog" not in [e["kind"] for e in server.episodes[0].events]


def test_deeply_nested_pre_auth_frame_is_an_auth_failure_with_one_log_line(serve, caplog):
    """Pre-auth decoding: nesting depth and decoded size are bounded; a hostile first frame is an auth failure
    (4401) with one log line, never an exception in the handler."""
    st = serve()
    server = st.server
    head = b"\x83" + b"".join(msgpack.packb(x) for x in ("v", 1, "type", "hello", "token"))
    frames = [head + b"\x91" * 600 + b"\xc0",  # 600 nested lists, ~620 bytes
              head + b"\x81\xa1k" * 300 + b"\xc0",  # 300 nested maps
              head + b"\xc4\x00" + b"\x00" * 100_000]  # a large first frame
    caplog.set_level(logging.INFO)
    for frame in frames:
        caplog.clear()
        with connect(st.uri()) as ws:
            ws.send(frame)
            reply = decode(ws.recv(timeout=5))
            assert reply["type"] == "error" and reply["code"].startswith("auth_"), reply
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=5)
        assert ws.close_code == 4401
        time.sleep(0.05)
        # websockets' own INFO lines (connection open / closed) aside: one warning, no traceback anywhere.
        records = [r for r in caplog.records if r.name.startswith("robots") or r.levelno >= logging.WARNING]
        assert len(records) == 1 and records[0].name.startswith("robots"), [r.getMessage()[:200] for r in records]
        assert not any(r.exc_info for r in caplog.records) and len(records[0].getMessage()) < 300
    assert len(server.rejections) == len(frames)
    with BridgeClient(st.uri(), TOKEN) as pol:
        assert pol.reset(seed=0)["type"] == "obs" and pol.act(ZERO)["type"] == "obs"


# ---- the real server process: SIGINT and SIGTERM ----------------------------------------------------------------


def _lines(stream, out: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        out.put(line)


@pytest.mark.sim
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_shutdown_signal_keeps_the_episode_in_progress(tmp_path, sig):
    """Shutdown: SIGTERM (process managers, containers) and SIGINT both hold the robot and write the partial
    episode with reason `shutdown`; the process exits 0."""
    from robots.recorder import read_episodes

    record = tmp_path / "episodes.h5"
    env = {**os.environ, "VLRL_BRIDGE_TOKEN": TOKEN}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.Popen([sys.executable, "-m", "robots.bridge", "--task", "Lift", "--image-size", "32", "--port",
                             "0", "--record", str(record)], cwd=root, env=env, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    try:
        port, log = None, []
        deadline = time.monotonic() + 90
        while port is None and time.monotonic() < deadline:
            try:
                log.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, "".join(log)
                continue
            m = re.search(r"bridge listening on 127\.0\.0\.1:(\d+)", log[-1])
            port = int(m.group(1)) if m else None
        assert port, "".join(log)
        with BridgeClient(f"ws://127.0.0.1:{port}", TOKEN) as pol:
            assert pol.reset(seed=0)["type"] == "obs"
            for _ in range(5):
                assert pol.act([0.2, 0, 0, 0, 0, 0, -1])["type"] == "obs"
            proc.send_signal(sig)
            assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    eps = read_episodes(record)
    assert [(ep["end_reason"], int(ep["num_steps"])) for ep in eps] == [("shutdown", 5)]
    assert eps[0]["actions"].shape == (5, 7) and eps[0]["images"]["agentview"].shape == (5, 32, 32, 3)
