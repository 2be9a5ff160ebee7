"""Robot-in-the-loop RL session end to end: the tiny VLA acts on robosuite Lift behind the authenticated bridge,
a scripted operator takes over through the teleop adapter, the connection drops once, the learner updates
asynchronously."""

import functools
import socket
import threading
import time

import numpy as np
import pytest
import torch

from robots.bridge.adapters import SimAdapter
from robots.bridge.client import AuthError, BridgeClient
from robots.bridge.hitl import ScriptedTeleop
from robots.bridge.runner import ServerThread
from robots.bridge.safety import SafetyConfig
from robots.bridge.server import BridgeConfig, BridgeServer
from robots.env import RobosuiteConfig, make_env
from tasks.robot_manipulation.session import RobotSession, SessionConfig, training_rows
from vlrl.config import RolloutConfig, TrainerConfig

pytestmark = [pytest.mark.sim, pytest.mark.slow, pytest.mark.timeout(300)]
TOKEN = "session-token-0123456789abcdef"
MAX_TRANSLATION = 0.5
# The operator's actions; the third exceeds the translation limit and is clamped by the server.
HUMAN = np.array([[0, 0, 0.3, 0, 0, 0, -1], [0, 0.2, 0.3, 0, 0, 0, 1], [0.8, 0, 0, 0, 0, 0, 1],
                  [0, 0, -0.2, 0, 0, 0, 1]], dtype=np.float64)
CLAMPED = np.clip(HUMAN, -MAX_TRANSLATION, MAX_TRANSLATION)
CLAMPED[:, 6] = HUMAN[:, 6]


@pytest.fixture(scope="module")
def bridge():
    env_cfg = RobosuiteConfig(task="Lift", cameras=("agentview",), image_size=64, max_steps=100_000, reward_shaping=True)
    # The rate limit is opened up (max change 2 > any in-range jump) so the clamp a human action gets does not
    # depend on which action the tick before applied; the translation limit still fires on HUMAN[2].
    safety = SafetyConfig(max_translation=MAX_TRANSLATION, max_action_change=2.0)
    cfg = BridgeConfig(port=0, watchdog_s=1.0, safety=safety)
    server = BridgeServer(SimAdapter(functools.partial(make_env, env_cfg)), cfg, token=TOKEN, teleop=ScriptedTeleop(HUMAN))
    st = ServerThread(server)
    st.start()
    yield st
    st.stop()


def _wait(pred, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return False


def _in_episode(session, index, turns):
    ep = session.current
    return ep is not None and ep.info.get("index") == index and len(ep.turns) >= turns


def test_wrong_token_is_refused_and_the_robot_does_not_move(bridge):
    steps, n_rej = len(bridge.server.episode.steps), len(bridge.server.rejections)
    with pytest.raises(AuthError) as e:
        BridgeClient(bridge.uri(), "wrong-token-0123456789abcdef")
    assert e.value.code == "auth_failed"
    assert bridge.server.rejections[n_rej:] and bridge.server.rejections[-1][1] == "auth_failed"
    assert len(bridge.server.episode.steps) == steps


def test_session_with_human_takeover_dropped_connection_and_async_updates(bridge):
    server, teleop = bridge.server, bridge.server.teleop
    cfg = SessionConfig(uri=bridge.uri(), episodes=3, max_steps=12, episodes_per_update=1, interventions="demo",
                        reconnect_wait_s=0.2, keep_images=True, rollout=RolloutConfig(max_new_tokens=8),
                        trainer=TrainerConfig(lr=1e-3, micro_batch_size=16))
    session = RobotSession(cfg, token=TOKEN)
    before = {k: v.detach().clone() for k, v in session.model.state_dict().items()}
    log = {}

    def operator():  # episode 0: take over after 3 policy turns, drive until the script is done, hand back
        assert _wait(lambda: _in_episode(session, 0, 3))
        with BridgeClient(bridge.uri(), TOKEN, role="operator") as op:
            op.takeover(True)
            log["takeover_at"] = len(session.current.turns)
            assert _wait(lambda: teleop.remaining == 0, timeout=10)
            time.sleep(3.0 / server.cfg.control_hz)  # the last scripted action's tick completes
            op.takeover(False)

    def cable_cut():  # episode 1: the connection drops abruptly mid-episode
        assert _wait(lambda: _in_episode(session, 1, 3))
        log["cut_at"] = len(session.current.turns)
        session.client.ws.socket.shutdown(socket.SHUT_RDWR)

    threads = [threading.Thread(target=operator), threading.Thread(target=cable_cut)]
    for th in threads:
        th.start()
    t0 = time.monotonic()
    summary = session.run()
    wall = time.monotonic() - t0
    for th in threads:
        th.join(30)
    print(f"session wall {wall:.1f}s: {summary}")

    eps = session.episodes
    assert summary["episodes"] == 3 and not summary["connection_lost"]
    ep0, ep1, ep2 = eps

    # Human takeover: 4 human turns in a row, executed = the operator's actions after the server's clamps.
    src = [t.info["source"] for t in ep0.turns]
    human = [t for t in ep0.turns if t.info["source"] == "human"]
    assert len(human) == len(HUMAN) and "".join(s[0] for s in src).count("h" * len(HUMAN)) == 1
    assert src[:3] == ["policy"] * 3 and src[-1] == "policy"
    executed = np.array([t.info["action"] for t in human])
    np.testing.assert_allclose(executed, CLAMPED, atol=1e-6)
    np.testing.assert_allclose(np.array([t.info["requested"] for t in human]), HUMAN)
    assert "translation_limit" in human[2].info["safety"] and not human[0].info["safety"]
    server_human = np.array([s["action"] for e in server.episodes for s in e.steps if s["source"] == 1])
    np.testing.assert_allclose(server_human, CLAMPED, atol=1e-6)  # the robot did what the turns say
    for t, a in zip(human, CLAMPED):  # the demonstration: the executed action's tokens + EOS
        assert t.response_ids == session.tok.encode(a) + [session.eos_id] and t.logprobs == []
        assert t.observation.images[0].size == (64, 64)
    assert len(ep0.turns) == cfg.max_steps and ep0.info["end"] == "step_limit" and ep0.turns[-1].truncated

    # Policy turns: 7 constrained action tokens + EOS, sampling log-probs, the applied action.
    for t in [t for ep in eps for t in ep.turns if t.info["source"] == "policy"]:
        assert len(t.response_ids) == 8 and len(t.logprobs) == 8 and t.response_ids[-1] == session.eos_id
        assert all(session.tok.is_action_id(t.response_ids[:7]))
        assert len(t.info["action"]) == 7 and max(abs(v) for v in t.info["action"][:3]) <= MAX_TRANSLATION + 1e-9

    # The dropped connection ended episode 1 and kept its turns; the session reconnected for episode 2.
    assert ep1.info["end"] == "disconnect" and len(ep1.turns) >= log["cut_at"] >= 3 and ep1.turns[-1].truncated
    assert ep2.info["end"] == "step_limit" and len(ep2.turns) == cfg.max_steps
    assert any(e.end_reason == "disconnect" for e in server.episodes)

    # Learner: one update per episode; the first trained on the 4 demonstrations; weights changed and published.
    assert summary["updates"] == 3 == session.version
    assert session.updates[0]["demo_rows"] == len(HUMAN) and session.updates[0]["policy_rows"] == len(ep0.turns) - len(HUMAN)
    after = session.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    actor = session.actor_model.state_dict()
    assert all(torch.equal(after[k], actor[k]) for k in after)
    # Asynchronous: the robot kept acting while an update ran, and later turns used newer weights.
    turn_times = [t.info["t"] for ep in eps for t in ep.turns if t.info["source"] == "policy"]
    assert any(u["t_start"] < tt < u["t_end"] for u in session.updates for tt in turn_times)
    assert max(t.info["policy_version"] for t in ep2.turns) >= 1

    # interventions="exclude" drops the human turns from the training rows; "demo" keeps them as demo rows.
    human_obs = {id(t.observation) for t in human}
    rows, demo = training_rows(eps, [1.0] * len(eps), "exclude")
    assert demo == [] and not human_obs & {id(r.row.observation) for r in rows}
    assert len(rows) == summary["policy_turns"]
    rows, demo = training_rows(eps, [1.0] * len(eps), "demo", demo_advantage=0.5)
    assert {id(r.row.observation) for r in demo} == human_obs and all(r.advantage == 0.5 for r in demo)

    # The same session with the wrong token is refused before it can act.
    session.token = "wrong-token-0123456789abcdef"
    with pytest.raises(AuthError):
        session.connect()
