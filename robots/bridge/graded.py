"""The graded real-world protocol VLAC describes, driven from the trainer side through a BridgeClient.

1. offline demo replay:   replay a recorded episode's actions from its first state (checks the demo still
                           reproduces; produces robot-side data without any policy)
2. return-and-explore:    reset to a state recorded at step k of an episode, then let the policy explore
3. human-guided explore:  the policy acts; an operator may pause or take over at any time (the server
                           labels those steps as interventions) and hands control back
Episodes are recorded server-side, including intervention labels and the reason each one ended.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from robots.bridge.client import BridgeClient

Policy = Callable[[dict], np.ndarray]


def _rollout(client: BridgeClient, policy: Policy, obs: dict, max_steps: int, wait_human_s: float) -> dict:
    """Run `policy` until success, timeout or max_steps; waits (does not count steps) while a human drives."""
    steps = refused = 0
    success = False
    deadline_human = None
    while steps < max_steps:
        reply = client.act(policy(obs))
        if reply["type"] == "refused" and reply["reason"] in ("stale", "superseded"):
            obs = client.observe()  # the server's loop fell behind: nothing was applied, try again
            continue
        if reply["type"] == "refused" and reply["reason"] in ("paused", "takeover"):
            refused += 1
            deadline_human = deadline_human or time.monotonic() + wait_human_s
            if time.monotonic() > deadline_human:
                break
            time.sleep(0.05)
            obs = client.observe()
            continue
        if reply["type"] != "obs":
            return {"steps": steps, "success": False, "stopped": reply.get("reason") or reply.get("code"),
                    "refused": refused}
        deadline_human = None
        obs, steps = reply, steps + 1
        if reply.get("result", {}).get("success"):
            success = True
            break
        if reply.get("result", {}).get("truncated"):
            break
    return {"steps": steps, "success": success, "stopped": None, "refused": refused, "obs": obs}


def replay_demo(client: BridgeClient, states: np.ndarray | None, actions: np.ndarray) -> dict:
    """Grade 1: reset to the demo's first recorded state (if any) and replay its actions open-loop."""
    obs = client.reset(init_state=None if states is None else np.asarray(states[0]))
    it = iter(np.asarray(actions))
    return _rollout(client, lambda _obs: next(it), obs, len(actions), wait_human_s=0.0) | {"start": obs}


def return_and_explore(client: BridgeClient, states: np.ndarray, step: int, policy: Policy, max_steps: int) -> dict:
    """Grade 2: return to the state recorded at `step`, then let the policy explore from there."""
    obs = client.reset(init_state=np.asarray(states[step]))
    return _rollout(client, policy, obs, max_steps, wait_human_s=0.0) | {"start": obs}


def human_guided(client: BridgeClient, policy: Policy, max_steps: int, seed: int | None = None,
                 wait_human_s: float = 60.0) -> dict:
    """Grade 3: the policy explores while an operator may pause/take over; waits up to wait_human_s for them."""
    obs = client.reset(seed=seed)
    return _rollout(client, policy, obs, max_steps, wait_human_s=wait_human_s) | {"start": obs}
