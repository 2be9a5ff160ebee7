"""The scripted stall-takeover operator (robots/bridge/sim_operator.py) on a point-arm fake simulator: the stall rule,
the expert drive and its hand-back, the episode bookkeeping, and a takeover through a real authenticated bridge."""

import socket
import threading
import time

import numpy as np
import pytest

from robots.bridge.adapters import SimAdapter
from robots.bridge.client import BridgeClient
from robots.bridge.runner import ServerThread
from robots.bridge.server import BridgeConfig, BridgeServer
from robots.bridge.sim_operator import StallOperator

TOKEN = "operator-test-token-0123456789abcdef"
OPEN, CLOSED = 0.04, 0.0


class PointArm:
    """A hand that moves 1 cm per action unit and two fingers that open / close 4 mm per step, over a cube."""

    def __init__(self) -> None:
        self.cube = np.array([0.0, 0.0, 0.82])
        self.reset()

    def reset(self, seed=None, init_state=None):
        self.eef, self.finger, self.t = self.cube + [0.03, -0.02, 0.05], OPEN, 0
        return self._obs()

    @property
    def raw_obs(self) -> dict:
        return {"robot0_eef_pos": self.eef.copy(), "robot0_eef_quat": np.array([0.0, 0.0, 0.0, 1.0]),
                "robot0_gripper_qpos": np.array([self.finger, -self.finger]), "cube_pos": self.cube.copy()}

    def _obs(self) -> dict:
        proprio = np.concatenate([self.eef, np.zeros(3), [self.finger, -self.finger]]).astype(np.float32)
        return {"images": {"cam": np.zeros((4, 4, 3), np.uint8)}, "proprio": proprio, "instruction": "lift the cube"}

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)
        self.eef = self.eef + np.clip(a[:3], -1, 1) * 0.01
        target = CLOSED if a[6] > 0 else OPEN
        self.finger += float(np.clip(target - self.finger, -0.004, 0.004))
        self.t += 1
        return self._obs(), 0.0, False, self.t >= 1000, {}

    def get_state(self):
        return np.concatenate([self.eef, [self.finger]])

    def close(self):
        pass


def _operator(**kw) -> StallOperator:
    op = StallOperator(SimAdapter(PointArm), "Lift", **kw)
    op.start()
    op.reset(seed=0)
    return op


HOLD = np.zeros(7)
HOLD[6] = -1.0  # keep the fingers open: the stalled BC policy's failure (pressing down, gripper open)


def test_a_still_arm_with_still_fingers_is_a_stall_after_min_step():
    op = _operator(window=10, min_step=15)
    for step in range(1, 15):
        op.apply(HOLD)
        assert not op.want, f"asked for a takeover at policy step {step}, before min_step"
    op.apply(HOLD)
    assert op.want and op.log == [{"episode": 0, "policy_step": 15}] and op.stalls == [{"episode": 0, "policy_step": 15}]


def test_closing_fingers_on_a_still_arm_is_not_a_stall():
    op = _operator(window=10, min_step=10)
    grasp = HOLD.copy()
    grasp[6] = 1.0  # fingers close 4 mm per step: the 10-step window sees 36 mm of motion
    for _ in range(10):
        op.apply(grasp)
    assert not op.want and op.stalls == []
    for _ in range(10):  # closed: nothing moves any more, and that is a stall
        op.apply(grasp)
    assert op.want


def test_a_moving_arm_is_not_a_stall():
    op = _operator(window=10, min_step=10)
    move = HOLD.copy()
    move[0] = 0.3  # 3 mm per step: 27 mm over the window, more than tol_m
    for _ in range(40):
        op.apply(move)
    assert not op.want and op.stalls == []


def test_watch_only_logs_the_first_stall_of_each_episode_and_never_takes_over():
    op = _operator(max_takeovers=0)
    for _ in range(40):
        op.apply(HOLD)
    op.reset(seed=1)
    for _ in range(20):
        op.apply(HOLD)
    assert not op.want and op.log == []
    assert op.stalls == [{"episode": 0, "policy_step": 15}, {"episode": 1, "policy_step": 15}]


def test_the_expert_drives_to_the_grasp_then_hands_back_once_per_episode():
    op = _operator()
    for _ in range(15):
        op.apply(HOLD)
    assert op.want
    arm = op.sim.env
    steps = 0
    while op.want:
        a = op.action(op.observe())
        op.apply(a)  # the server applies the teleop action (want is set, so it is not a policy step)
        steps += 1
        assert steps <= op.max_drive_steps
    assert op.expert.phase == "lift" and arm.finger == pytest.approx(CLOSED)
    assert np.all(np.abs(arm.eef - (arm.cube + [0, 0, -0.005])) < 0.02), "the hand closed away from the cube"
    assert op.log == [{"episode": 0, "policy_step": 15, "driven": steps, "ended": "lift"}]
    assert op.action(op.observe()) is None  # handed back: hold until the server's flag is off
    for _ in range(30):  # a second stall in the same episode: the allowance (1) is spent
        op.apply(HOLD)
    assert not op.want and len(op.log) == 1


def test_a_reset_during_a_takeover_ends_it_and_starts_a_fresh_episode():
    op = _operator(max_drive_steps=60)
    for _ in range(15):
        op.apply(HOLD)
    for _ in range(3):
        op.apply(op.action(op.observe()))
    op.reset(seed=5)
    assert not op.want and not op.driving
    assert op.log == [{"episode": 0, "policy_step": 15, "driven": 3, "ended": "episode_end"}]
    for _ in range(15):
        op.apply(HOLD)
    assert op.want and op.log[-1] == {"episode": 1, "policy_step": 15}


def test_bad_settings_are_refused_with_their_values():
    with pytest.raises(ValueError, match="no scripted expert"):
        StallOperator(SimAdapter(PointArm), "Door")
    with pytest.raises(ValueError, match="min_step >= window"):
        StallOperator(SimAdapter(PointArm), "Lift", window=10, min_step=5)


@pytest.mark.timeout(120)
def test_a_stall_is_taken_over_and_handed_back_through_the_authenticated_bridge_after_a_dropped_connection():
    op = StallOperator(SimAdapter(PointArm), "Lift", window=5, min_step=5, max_drive_steps=60)
    server = ServerThread(BridgeServer(op, BridgeConfig(port=0, watchdog_s=5.0), token=TOKEN, teleop=op))
    server.start()
    stop = threading.Event()
    op_thread = threading.Thread(target=op.serve_forever, args=(server.uri(), TOKEN, stop), daemon=True)
    op_thread.start()
    try:
        deadline = time.monotonic() + 30
        while op.client is None and time.monotonic() < deadline:
            time.sleep(0.01)
        op.client.ws.socket.shutdown(socket.SHUT_RDWR)  # the operator's cable is cut before the policy starts
        with BridgeClient(server.uri(), TOKEN, role="policy") as policy:
            assert policy.reset(seed=0)["type"] == "obs"
            replies, deadline = [], time.monotonic() + 60
            while time.monotonic() < deadline:  # the stalled policy keeps sending HOLD
                r = policy.act(HOLD)
                replies.append(r.get("type") if r.get("type") == "obs" else r.get("reason"))
                if "takeover" in replies and replies[-1] == "obs":
                    break  # control came back
                if r.get("type") != "obs":
                    time.sleep(0.02)
            human = [n for n in policy.pop_notices() if n.get("type") == "human_step"]
    finally:
        stop.set()
        op_thread.join(10)
        server.stop()
    assert replies[:5] == ["obs"] * 5 and "takeover" in replies and replies[-1] == "obs"
    assert op.log and op.log[0]["ended"] == "lift" and len(human) == op.log[0]["driven"]
    assert human[-1]["action"][6] > 0  # the expert handed back holding the gripper closed
    assert op.reconnects == 1  # the cut connection was replaced, and the takeover above went through it
