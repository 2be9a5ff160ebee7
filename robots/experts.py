"""Scripted expert policies: waypoints over object poses (pick, lift, optionally place), and demo recording.

Experts read the simulator's raw observation (object positions, end-effector position) and output the
common 7-d action (OSC_POSE delta, normalised; gripper -1 open / +1 closed) with a P-controller towards
the current waypoint. They give demos for warm starts and reward-model training without downloads.

    python -m robots.experts --task Lift --episodes 20 --out demos/lift.h5
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, replace

import numpy as np

from robots.env import RobosuiteConfig, make_env
from robots.recorder import Episode, HDF5Recorder

PHASES = ("hover", "descend", "grasp", "lift", "carry", "lower", "release", "retreat", "done")


@dataclass
class PickPlaceSpec:
    """Waypoints of a pick(-and-place) expert, relative to object poses from the raw observation."""

    obj: str
    """Raw-obs key of the object position to grasp (e.g. cube_pos)."""
    target: str | None = None
    """Raw-obs key of the place target position; None = pick and lift only."""
    grasp_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Grasp point relative to the object position (metres)."""
    place_offset: tuple[float, float, float] = (0.0, 0.0, 0.08)
    """Release point relative to the target position."""
    hover: float = 0.10
    """Approach height above grasp / release points."""
    lift: float = 0.15
    """Height above the grasp point to lift to."""
    kp: float = 12.0
    """Proportional gain: action = kp * position error (1 action unit = 5 cm)."""
    tol: float = 0.012
    """Waypoint reached when every axis is within this (metres)."""
    grip_steps: int = 20
    """Steps spent closing / opening the gripper (12 was too few to hold LIBERO's cream cheese)."""
    min_open: float = 0.0
    """Finger opening (sum of the two finger joints, metres) required before descending: robosuite's Panda
    gripper opens slowly (its command ramps by 0.01 per step), and half-open fingers land on wide objects."""
    yaw: float = 0.0
    """Gripper yaw (radians, about world z) relative to its start, e.g. to keep the hand clear of neighbours."""
    phase_timeout: int = 80
    """Steps before a phase gives up waiting and moves on (avoids stalling forever)."""


# Experts per task. LIBERO object names follow the scene's bddl file.
SPECS = {
    "Lift": PickPlaceSpec(obj="cube_pos", grasp_offset=(0, 0, -0.005)),
    "Stack": PickPlaceSpec(obj="cubeA_pos", target="cubeB_pos", grasp_offset=(0, 0, -0.005), place_offset=(0, 0, 0.05)),
    # The bin is near the arm's reach: looser tolerance and short phases, drop from above the bin.
    "PickPlaceCan": PickPlaceSpec(obj="Can_pos", target="Can_bin_pos", place_offset=(0, 0, 0.15), tol=0.03,
                                  phase_timeout=40),
    # The cream cheese box lies flat (8 x 4 x 2 cm, long side along x); grasping 2 cm off-centre keeps the hand
    # clear of the tomato sauce bottle that stands next to it in several init states.
    "libero_object/1": PickPlaceSpec(obj="cream_cheese_1_pos", target="basket_1_pos", grasp_offset=(-0.02, 0, 0.0),
                                     place_offset=(0, 0, 0.15), min_open=0.07),
}


class PickPlaceExpert:
    """A phase machine over the spec's waypoints; call reset() at episode start, then act(raw_obs)."""

    def __init__(self, spec: PickPlaceSpec) -> None:
        self.spec = spec
        self.reset()

    def reset(self) -> None:
        self.phase, self.k = "hover", 0
        self._grasp: np.ndarray | None = None
        self._yaw0: float | None = None

    def _goal(self, raw: dict) -> tuple[np.ndarray, float]:
        s = self.spec
        grasp = np.asarray(raw[s.obj]) + s.grasp_offset
        if self.phase in ("hover", "descend") or self._grasp is None:
            self._grasp = grasp  # freeze the grasp point once the gripper closes
        g = self._grasp
        up = np.array([0, 0, 1.0])
        place = (np.asarray(raw[s.target]) + s.place_offset) if s.target else g + up * s.lift
        return {
            "hover": (g + up * s.hover, -1), "descend": (g, -1), "grasp": (g, 1), "lift": (g + up * s.lift, 1),
            "carry": (place + up * s.hover if s.target else g + up * s.lift, 1), "lower": (place, 1),
            "release": (place, -1), "retreat": (place + up * s.hover, -1), "done": (place + up * s.hover, -1),
        }[self.phase]

    def act(self, raw: dict) -> np.ndarray:
        s = self.spec
        goal, grip = self._goal(raw)
        err = goal - np.asarray(raw["robot0_eef_pos"])
        self.k += 1
        reached = np.all(np.abs(err) < s.tol) or self.k > s.phase_timeout
        if self.phase in ("grasp", "release"):
            reached = self.k >= s.grip_steps
        yaw = _yaw(raw["robot0_eef_quat"])
        if self._yaw0 is None:
            self._yaw0 = yaw
        yaw_err = float(np.angle(np.exp(1j * (self._yaw0 + s.yaw - yaw))))  # wrapped to [-pi, pi]
        if self.phase == "hover" and self.k <= s.phase_timeout:
            q = np.asarray(raw["robot0_gripper_qpos"])
            reached = reached and float(q[0] - q[1]) >= s.min_open and abs(yaw_err) < 0.05
        if reached and self.phase != "done":
            nxt = PHASES[PHASES.index(self.phase) + 1]
            if s.target is None and nxt == "carry":
                nxt = "done"  # lift-only task: hold the object up
            self.phase, self.k = nxt, 0
        a = np.zeros(7)
        a[:3] = np.clip(s.kp * err, -1, 1)
        a[5] = np.clip(yaw_err / 0.5 * 0.6, -1, 1)  # 1 rotation unit = 0.5 rad about world z
        a[6] = grip
        return a


def _yaw(quat_xyzw) -> float:
    """Heading of the gripper's x axis in the world xy plane."""
    x, y, z, w = np.asarray(quat_xyzw, dtype=np.float64)
    return float(np.arctan2(2 * (x * y + w * z), 1 - 2 * (y * y + z * z)))


def expert_view(env) -> dict:
    """The env's raw observation plus target poses the raw obs lacks (PickPlace bin centres)."""
    raw = dict(env.raw_obs)
    inner = getattr(env, "_env", None)
    bins = getattr(inner, "target_bin_placements", None)
    if bins is not None:
        for name, idx in inner.object_to_id.items():
            raw[f"{name.capitalize()}_bin_pos"] = np.asarray(bins[idx])
    return raw


def run_episode(env, expert: PickPlaceExpert, seed: int | None = None, init_state=None,
                record: bool = False, hold_after_success: int = 0) -> tuple[bool, int, Episode | None]:
    """Roll out the expert until success or the env's step limit; optionally record the episode."""
    obs = env.reset(seed=seed, init_state=init_state)
    expert.reset()
    ep = Episode(language=obs["instruction"], meta={"seed": seed, "expert": type(expert).__name__}) if record else None
    success, steps = False, 0
    while True:
        action = expert.act(expert_view(env))
        state = env.get_state() if record else None
        nobs, rew, term, trunc, info = env.step(action)
        steps += 1
        if ep is not None:
            ep.add_step(obs, action, reward=rew, state=state, source="policy")
        obs = nobs
        if term:
            success = True
            if hold_after_success <= 0:
                break
            hold_after_success -= 1
        if trunc:
            break
    if ep is not None:
        ep.end("success" if success else "timeout", success)
    return success, steps, ep


def expert_success_rate(task: str, episodes: int, env_cfg=None, out: str | None = None, seed: int = 0) -> dict:
    """Run the task's expert for `episodes` seeds (LIBERO: init states 0..n-1); optionally write HDF5 demos."""
    if env_cfg is None:
        env_cfg = _default_env_cfg(task)
    env = make_env(env_cfg)
    rec = HDF5Recorder(out) if out else None
    expert = PickPlaceExpert(SPECS[task])
    results, t0 = [], time.perf_counter()
    try:
        for i in range(episodes):
            libero = "/" in task
            ok, steps, ep = run_episode(env, expert, seed=seed + i, init_state=i if libero else None,
                                        record=rec is not None)
            results.append({"seed": seed + i, "success": ok, "steps": steps})
            if rec is not None:
                rec.write(ep)
    finally:
        env.close()
    n_ok = sum(r["success"] for r in results)
    return {"task": task, "episodes": episodes, "successes": n_ok, "success_rate": n_ok / max(episodes, 1),
            "mean_steps": float(np.mean([r["steps"] for r in results])), "elapsed_s": time.perf_counter() - t0,
            "results": results}


def _default_env_cfg(task: str):
    if "/" in task:
        from robots.libero_env import LiberoConfig  # noqa: PLC0415

        suite, tid = task.split("/")
        return LiberoConfig(suite=suite, task_id=int(tid), image_size=64, hard_reset=False)
    return RobosuiteConfig(task=task, image_size=64, max_steps=250)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="measure / record scripted experts")
    p.add_argument("--task", default="Lift", choices=sorted(SPECS))
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--no-cameras", action="store_true")
    p.add_argument("--out", default=None, help="HDF5 file for the demos")
    a = p.parse_args(argv)
    cfg = _default_env_cfg(a.task)
    if a.no_cameras:
        cfg = replace(cfg, cameras=())
    r = expert_success_rate(a.task, a.episodes, cfg, a.out)
    print(json.dumps({k: v for k, v in r.items() if k != "results"}))


if __name__ == "__main__":
    main()
