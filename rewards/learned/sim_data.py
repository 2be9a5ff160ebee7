"""Simulated episodes for reward-model training and evaluation: scripted experts and perturbed/failed variants.

For every seed the clean expert runs first (the reference), then optional perturbed variants of the
same scene:

* ``expert``      the scripted expert; it keeps holding for `hold` steps after success (done frames).
* ``noisy``       expert actions + Gaussian noise (sometimes succeeds, often not).
* ``early_stop``  the expert until a random step, then it freezes in place (stagnation, never succeeds).
* ``drop``        the expert until the object is lifted, then it opens the gripper (the object falls).
* ``policy``      a policy's own rollout (`generate(..., policy=...)`; for a VLA checkpoint such as
                  assets/tiny-vla-lift: ``python -m tasks.robot_manipulation.record_reward_data --policy DIR``):
                  the failure modes of the policy a reward model will score in RL, which no scripted
                  perturbation reproduces. Not in the default kinds.

Each episode keeps T+1 frames (observation before every action, plus the final one), the env's success
flag per frame, the gripper command per action, end-effector / object positions and finger opening per
frame (for pseudo-labels), and a progress label in [0, 1] per frame:

* successful episodes (success at the final frame): normalised frame index t / t_success (1 after the
  first success frame);
* failed episodes: the progress of the nearest frame (in end-effector / object / finger state) of the
  same seed's clean expert episode, so a frozen arm keeps its progress and a dropped object loses it.

    python -m rewards.learned.sim_data --task Lift --seeds 0-39 --out data/rewards/lift.npz
    python -m tasks.robot_manipulation.record_reward_data --task Lift --seeds 1000-1029 --kinds expert,policy \
        --policy assets/tiny-vla-lift --out data/rewards/lift_policy.npz
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field

import numpy as np

KINDS = ("expert", "noisy", "early_stop", "drop")  # the default kinds
ALL_KINDS = KINDS + ("policy",)
# Steps a non-expert episode may run past the expert's success step before it is cut.
OVERRUN = {"noisy": 30, "policy": 40}
# Raw-observation key of the manipulated object per task (the expert's spec has it too).
OBJECT_KEYS = {"Lift": "cube_pos", "Stack": "cubeA_pos"}


@dataclass
class SimEpisode:
    """One recorded episode (arrays over T+1 frames unless noted)."""

    frames: np.ndarray  # uint8 [T+1, H, W, 3]
    instruction: str
    task: str
    kind: str
    seed: int
    success: np.ndarray  # bool [T+1]: the env's success predicate at each frame
    gripper_cmd: np.ndarray  # float32 [T]: action[6] (-1 open, +1 close)
    eef_pos: np.ndarray  # float32 [T+1, 3]
    obj_pos: np.ndarray  # float32 [T+1, 3]
    finger: np.ndarray  # float32 [T+1]: finger opening (sum of |finger joint positions|)
    progress: np.ndarray = field(default=None)  # float32 [T+1] in [0, 1]

    @property
    def succeeded(self) -> bool:
        """Success at the final frame (a lifted-then-dropped object is a failure)."""
        return bool(len(self.success) and self.success[-1])

    def __len__(self) -> int:
        return len(self.frames)


def frame_index_progress(success: np.ndarray) -> np.ndarray:
    """t / t_s up to the first success frame t_s, then 1 (all zeros if there is no success)."""
    T1 = len(success)
    hits = np.flatnonzero(success)
    if len(hits) == 0:
        return np.zeros(T1, dtype=np.float32)
    ts = int(hits[0])
    if ts == 0:
        return np.ones(T1, dtype=np.float32)
    return np.minimum(np.arange(T1, dtype=np.float32) / ts, 1.0).astype(np.float32)


def state_features(eef: np.ndarray, obj: np.ndarray, finger: np.ndarray, obj_weight: float = 3.0) -> np.ndarray:
    """Per-frame features for aligning a perturbed episode with its reference (metres; object weighted)."""
    return np.concatenate([eef, obj_weight * obj, finger[:, None]], axis=1)


def aligned_progress(feats: np.ndarray, ref_feats: np.ndarray, ref_progress: np.ndarray) -> np.ndarray:
    """Progress of the nearest reference frame for each frame (ties: the earliest frame)."""
    d = ((feats[:, None, :] - ref_feats[None, :, :]) ** 2).sum(-1)  # [T1, R]
    return ref_progress[np.argmin(d, axis=1)].astype(np.float32)


def _episode_from(rec: dict, task: str, instruction: str, kind: str, seed: int) -> SimEpisode:
    return SimEpisode(
        frames=np.stack(rec["frames"]).astype(np.uint8), instruction=instruction, task=task, kind=kind, seed=seed,
        success=np.array(rec["success"], dtype=bool), gripper_cmd=np.array(rec["grip"], dtype=np.float32),
        eef_pos=np.array(rec["eef"], dtype=np.float32), obj_pos=np.array(rec["obj"], dtype=np.float32),
        finger=np.array(rec["finger"], dtype=np.float32),
    )


def rollout(env, expert, task: str, seed: int, kind: str, rng: np.random.Generator, max_steps: int,
            hold: int = 10, camera: str = "agentview", ref_len: int | None = None, noise: float = 0.4,
            policy=None) -> SimEpisode:
    """Run one episode of `kind` on `seed` (see the module docstring); `policy(obs) -> action` for kind "policy"."""
    from robots.experts import expert_view  # noqa: PLC0415

    obs = env.reset(seed=seed)
    expert.reset()
    okey = OBJECT_KEYS[task]
    rec = {k: [] for k in ("frames", "success", "grip", "eef", "obj", "finger")}

    def add(obs, success):
        raw = env.raw_obs
        rec["frames"].append(obs["images"][camera])
        rec["success"].append(success)
        rec["eef"].append(np.asarray(raw["robot0_eef_pos"], dtype=np.float32))
        rec["obj"].append(np.asarray(raw[okey], dtype=np.float32))
        rec["finger"].append(float(np.abs(raw["robot0_gripper_qpos"]).sum()))

    add(obs, False)
    stop_at = None
    if kind == "early_stop":
        n = ref_len or max_steps
        stop_at = int(rng.integers(max(1, n // 5), max(2, (4 * n) // 5)))
    dropped_after, lifted_for, frozen = None, 0, None
    if kind == "drop":
        dropped_after = int(rng.integers(0, 3))  # before the object reaches the success height
    held, t = 0, 0
    while t < max_steps:
        a = policy(obs) if kind == "policy" else expert.act(expert_view(env))
        if kind == "noisy":
            a = a.copy()
            a[:3] += rng.normal(0.0, noise, 3)
            if rng.random() < 0.03:
                a[6] = -a[6]
        elif kind == "early_stop" and t >= stop_at:
            if frozen is None:
                frozen = float(a[6])
            a = np.zeros(7)
            a[6] = frozen
        elif kind == "drop":
            if expert.phase in ("lift", "carry", "done"):
                lifted_for += 1
            if lifted_for > dropped_after:
                a = a.copy()
                a[6] = -1.0
        obs, _, term, trunc, _ = env.step(np.clip(a, -1, 1))
        t += 1
        rec["grip"].append(float(np.clip(a[6], -1, 1)))
        add(obs, bool(term))
        if term and kind in ("expert", "noisy", "policy"):
            held += 1
            if held > hold:
                break
        if kind != "expert" and ref_len is not None and t >= ref_len + OVERRUN.get(kind, 15):
            break
    return _episode_from(rec, task, env.instruction, kind, seed)


def label_progress(episodes: list[SimEpisode]) -> None:
    """Fill `progress` (see the module docstring); failed episodes align with the same seed's expert."""
    refs = {(e.task, e.seed): e for e in episodes if e.kind == "expert" and e.succeeded}
    for e in episodes:
        if e.succeeded:
            e.progress = frame_index_progress(e.success)
    for e in episodes:
        if e.succeeded:
            continue
        ref = refs.get((e.task, e.seed))
        if ref is None:
            e.progress = np.zeros(len(e), dtype=np.float32)
            continue
        e.progress = aligned_progress(state_features(e.eef_pos, e.obj_pos, e.finger),
                                      state_features(ref.eef_pos, ref.obj_pos, ref.finger), ref.progress)


def generate(task: str = "Lift", seeds=range(4), kinds=KINDS, image_size: int = 84, max_steps: int = 160,
             hold: int = 10, log=print, policy=None, camera: str = "agentview") -> list[SimEpisode]:
    """Episodes for every seed and kind (the clean expert of a seed always runs first), with frames from
    `camera` at `image_size` px (a reward model scores the frames of the camera it was trained on: record the
    policy's camera to use it as a dense reward for that policy).

    `policy` (kind "policy"): a callable on the env's observation dict with attributes `camera` and
    `image_size`, the camera it was trained on (the robot task's VLA loader gives one); that camera is
    rendered at its own size beside the recorded frames."""
    from robots.env import RobosuiteConfig, make_env  # noqa: PLC0415
    from robots.experts import SPECS, PickPlaceExpert  # noqa: PLC0415

    bad = [k for k in kinds if k not in ALL_KINDS]
    if bad:
        raise ValueError(f"unknown episode kinds {bad}; choose from {ALL_KINDS}")
    cameras, sizes = (camera,), ()
    if "policy" in kinds:
        if policy is None:
            raise ValueError("kind 'policy' needs a policy callable (for a VLA checkpoint: "
                             "python -m tasks.robot_manipulation.record_reward_data --policy DIR)")
        if policy.camera != camera:
            cameras, sizes = (camera, policy.camera), (image_size, policy.image_size)
        elif policy.image_size != image_size:
            raise ValueError(f"policy camera {camera} at {policy.image_size} px != recorded frames at {image_size} px: "
                             f"pass --image-size {policy.image_size}")
    env = make_env(RobosuiteConfig(task=task, cameras=cameras, camera_sizes=sizes, image_size=image_size,
                                   max_steps=max_steps + 50))
    expert = PickPlaceExpert(SPECS[task])
    out: list[SimEpisode] = []
    t0 = time.perf_counter()
    try:
        for seed in seeds:
            rng = np.random.default_rng(10_000 + seed)
            ref = rollout(env, expert, task, seed, "expert", rng, max_steps, hold, camera=camera)
            out.append(ref)
            ref_len = int(np.flatnonzero(ref.success)[0]) if ref.succeeded else len(ref) - 1
            for kind in kinds:
                if kind == "expert":
                    continue
                out.append(rollout(env, expert, task, seed, kind, rng, max_steps, hold, camera=camera,
                                   ref_len=ref_len, policy=policy))
            log(f"[sim_data] {task} seed {seed}: " + ", ".join(
                f"{e.kind}={'ok' if e.succeeded else 'fail'}/{len(e) - 1}" for e in out if e.seed == seed)
                + f"  ({time.perf_counter() - t0:.0f}s)")
    finally:
        env.close()
    label_progress(out)
    return out


_ARRAYS = ("frames", "success", "gripper_cmd", "eef_pos", "obj_pos", "finger", "progress")


def save(episodes: list[SimEpisode], path: str, meta: dict | None = None) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    arrays = {f"{i}/{k}": getattr(e, k) for i, e in enumerate(episodes) for k in _ARRAYS}
    index = [{"instruction": e.instruction, "task": e.task, "kind": e.kind, "seed": e.seed} for e in episodes]
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, __index__=json.dumps(index), __meta__=json.dumps(meta or {}), **arrays)
    os.replace(tmp, path)


def load(path: str) -> list[SimEpisode]:
    with np.load(path) as z:
        index = json.loads(str(z["__index__"]))
        return [SimEpisode(**d, **{k: z[f"{i}/{k}"] for k in _ARRAYS}) for i, d in enumerate(index)]


def parse_seeds(s: str) -> list[int]:
    """'0-9,20,30-31' -> [0..9, 20, 30, 31]."""
    out = []
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def arg_parser(description: str = "record expert + perturbed episodes for reward models") -> argparse.ArgumentParser:
    """The recording options shared by this CLI and the policy-recording one of the robot task."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--task", default="Lift", choices=sorted(OBJECT_KEYS))
    p.add_argument("--seeds", default="0-3")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, from {','.join(ALL_KINDS)}")
    p.add_argument("--image-size", type=int, default=84)
    p.add_argument("--camera", default="agentview", help="the camera whose frames are recorded (a reward model scores "
                   "this camera: use the policy's, e.g. robot0_eye_in_hand, for a dense reward in its RL)")
    p.add_argument("--max-steps", type=int, default=160)
    p.add_argument("--out", required=True)
    return p


def record(a: argparse.Namespace, policy=None, t0: float | None = None) -> dict:
    """Record the episodes `a` (from `arg_parser`) asks for, save them to `a.out`; returns the summary printed.

    `policy`: the callable kind "policy" needs (see `generate`); `t0`: start of the wall time in the
    saved metadata (default now), so that loading the policy counts."""
    t0 = time.perf_counter() if t0 is None else t0
    eps = generate(a.task, parse_seeds(a.seeds), a.kinds.split(","), a.image_size, a.max_steps, policy=policy,
                   camera=a.camera)
    meta = {"argv": vars(a), "wall_s": time.perf_counter() - t0,
            "policy_invalid_actions": getattr(policy, "invalid", None)}
    save(eps, a.out, meta)
    n_ok = sum(e.succeeded for e in eps)
    summary = {"episodes": len(eps), "successes": n_ok, "frames": int(sum(len(e) for e in eps)),
               "wall_s": round(meta["wall_s"], 1), "out": a.out}
    print(json.dumps(summary))
    return summary


def main(argv: list[str] | None = None) -> None:
    record(arg_parser().parse_args(argv))


if __name__ == "__main__":
    main()
