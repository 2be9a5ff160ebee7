"""A scripted operator for simulated robot-in-the-loop sessions: it watches the policy, takes over through the
bridge when the arm stalls, drives the task's scripted expert, and hands control back.

This stands in for the person of the graded protocol's third stage (human-guided exploration, `graded.py`). It is
three things the server and a client already know how to use:

* an adapter (`RobotAdapter`) wrapping the `SimAdapter`: after every policy step it records the proprioception
  (end-effector position, finger joints) and decides whether the arm stalled (`_stalled`): over the last `window`
  policy steps the hand stayed within `tol_m` and the fingers did not move, at least `min_step` steps into the
  episode; it asks for a takeover while the episode's allowance (`max_takeovers`) lasts, and logs every first
  stall of an episode either way (`stalls`; `max_takeovers=0` only watches);
* a teleop adapter (`action(obs)`): during a takeover it returns the expert's action for the simulator's current
  state (the expert reads privileged state, cube positions, as a person would read the scene) until the expert
  has closed the gripper on the object (it enters its `hand_back_phase`) or `max_drive_steps` passed, then holds;
* an operator client (`serve_forever`): it connects to the bridge as role "operator" with the token and sends
  `takeover on` / `takeover off` when the adapter asks, exactly as a person's console would. The server then
  streams every expert step to the policy client as a `human_step`, which the session keeps as a demonstration.

The adapter's methods run in the server's adapter thread and `action` in its event loop, one at a time (the server
awaits each); the operator client runs in its own thread and only reads the `want` flag they set.
"""

from __future__ import annotations

import collections
import threading
import time

import numpy as np
from websockets.exceptions import WebSocketException

from robots.bridge.adapters import SimAdapter
from robots.bridge.client import AuthError, BridgeClient, BridgeError
from robots.experts import SPECS, PickPlaceExpert, expert_view


class StallOperator:
    """Watch (adapter), drive (teleop) and take over / hand back (operator client) for one simulated robot."""

    action_mode = "delta_ee"

    def __init__(self, sim: SimAdapter, task: str, window: int = 10, tol_m: float = 0.02, min_step: int = 15,
                 max_takeovers: int = 1, max_drive_steps: int = 60, hand_back_phase: str = "lift",
                 gripper_tol_m: float = 0.002) -> None:
        if task not in SPECS:
            raise ValueError(f"no scripted expert for task {task!r} (have {sorted(SPECS)})")
        if window < 2 or tol_m <= 0 or min_step < window or max_takeovers < 0 or max_drive_steps < 1:
            raise ValueError(f"StallOperator: need window >= 2, tol_m > 0, min_step >= window, max_takeovers >= 0, "
                             f"max_drive_steps >= 1 (got {window}, {tol_m}, {min_step}, {max_takeovers}, "
                             f"{max_drive_steps})")
        self.sim, self.expert = sim, PickPlaceExpert(SPECS[task])
        self.window, self.tol_m, self.min_step = window, tol_m, min_step
        self.max_takeovers, self.max_drive_steps, self.hand_back_phase = max_takeovers, max_drive_steps, hand_back_phase
        self.gripper_tol_m = gripper_tol_m
        self.want = False  # what the operator client should make the server's takeover flag
        self.driving = False  # the expert is producing actions (between its first and its hand-back)
        self.log: list[dict] = []  # one record per takeover: episode, step it began, steps driven, why it ended
        self.stalls: list[dict] = []  # the first stall of each episode, taken over or not (max_takeovers=0: watch only)
        self.client: BridgeClient | None = None  # the operator connection while serve_forever runs
        self.reconnects = 0  # connections lost and retried by serve_forever
        self._episode = -1  # the first reset starts episode 0
        self._new_episode()

    def _new_episode(self) -> None:
        self._proprio: collections.deque = collections.deque(maxlen=self.window)
        self._policy_steps = self._takeovers = self._drive_steps = 0
        self._stall_seen = False
        self.want = self.driving = False

    # ---- adapter (the server's adapter thread) ------------------------------------------------------------
    def start(self) -> dict:
        return self.sim.start()

    def observe(self) -> dict:
        return self.sim.observe()

    def apply(self, action: np.ndarray) -> dict:
        result = self.sim.apply(action)
        if not self.want:  # a policy step (a takeover's steps are the expert's)
            self._policy_steps += 1
            self._proprio.append(np.asarray(self.sim.observe()["proprio"], dtype=np.float64))
            if self._stalled():
                if not self._stall_seen:
                    self._stall_seen = True
                    self.stalls.append({"episode": self._episode, "policy_step": self._policy_steps})
                if self._takeovers < self.max_takeovers:
                    self._takeovers += 1
                    self.log.append({"episode": self._episode, "policy_step": self._policy_steps})
                    self.want = True
        return result

    def _stalled(self) -> bool:
        """The hand stayed in a box of diagonal < tol_m and the fingers (proprio[-2:]) within gripper_tol_m over the
        last `window` policy steps: not closing on the object either (a grasp holds the arm still for ~10 steps)."""
        if self._policy_steps < self.min_step or len(self._proprio) < self.window:
            return False
        p = np.stack(self._proprio)
        span = p.max(axis=0) - p.min(axis=0)
        return float(np.linalg.norm(span[:3])) < self.tol_m and float(np.max(span[-2:])) < self.gripper_tol_m

    def hold(self) -> None:
        self.sim.hold()

    def estop(self) -> None:
        self.want = self.driving = False
        self.sim.estop()

    def reset(self, seed=None, init_state=None) -> dict:
        if self.driving and self.log:
            self.log[-1].update(driven=self._drive_steps, ended="episode_end")
        obs = self.sim.reset(seed=seed, init_state=init_state)
        self._episode += 1
        self._new_episode()
        return obs

    def get_state(self):
        return self.sim.get_state()

    def close(self) -> None:
        self.sim.close()

    # ---- teleop (the server's event loop, only while its takeover flag is on) --------------------------------
    def action(self, obs: dict) -> np.ndarray | None:
        if not self.want:
            return None  # handing back (or an episode ended mid-takeover): hold until the flag is off
        if not self.driving:
            self.expert.reset()
            self.driving, self._drive_steps = True, 0
        a = self.expert.act(expert_view(self.sim.env))
        self._drive_steps += 1
        if self.expert.phase == self.hand_back_phase or self._drive_steps >= self.max_drive_steps:
            self.log[-1].update(driven=self._drive_steps, ended=self.expert.phase)
            self.want = self.driving = False
            self._proprio.clear()  # judge the policy afresh from where the expert left the arm
        return a

    # ---- operator client (its own thread) --------------------------------------------------------------------
    def serve_forever(self, uri: str, token: str, stop: threading.Event, poll_s: float = 0.01,
                      reconnect_attempts: int = 5, reconnect_wait_s: float = 0.5) -> None:
        """Connect as the operator and mirror `want` onto the server's takeover flag until `stop` is set.

        A dropped connection is reconnected (up to `reconnect_attempts` failures in a row; a refused token is never
        retried) and `want` is sent again at once: an operator that silently went away would leave stalls logged as
        takeovers that never happened."""
        failures = 0
        while not stop.is_set():
            try:
                with BridgeClient(uri, token, role="operator") as op:
                    self.client, failures = op, 0
                    on = None  # unknown after a (re)connect: send the current wish
                    while not stop.is_set():
                        if self.want != on:
                            on = self.want
                            reply = op.takeover(on)
                            if reply.get("type") != "ack":
                                raise RuntimeError(f"the bridge refused takeover={on}: {reply}")
                        time.sleep(poll_s)
                    if on:
                        op.takeover(False)
                    return
            except AuthError as e:
                if e.code != "busy":
                    raise
                failures += 1
            except (BridgeError, OSError, WebSocketException):
                failures += 1
            self.reconnects += 1
            if failures > reconnect_attempts:
                raise RuntimeError(f"operator: the bridge at {uri} is unreachable after {failures} attempts")
            time.sleep(reconnect_wait_s)
