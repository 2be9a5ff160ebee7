"""Config of the robot manipulation task (fields documented inline; YAML: configs/task/robot_manipulation.yaml)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

DENSE_KINDS = ("progress", "prm", "clip")


def parse_dense_spec(spec: str) -> tuple[str, str, str | None]:
    """"progress:DIR" | "prm:DIR" | "clip:ARCH[:PRETRAINED]" -> (kind, dir or arch, pretrained or None).

    Raises ValueError naming `task.dense_reward`. Directories are checked to exist (resolved like every
    repo path: as given, else relative to the repo root)."""
    err = "invalid config value for 'task.dense_reward': "
    kind, sep, rest = spec.partition(":")
    if kind not in DENSE_KINDS or not sep or not rest:
        raise ValueError(err + f"{spec!r}: expected progress:DIR, prm:DIR, clip:ARCH or clip:ARCH:PRETRAINED")
    if kind == "clip":
        arch, _, pretrained = rest.partition(":")
        if not arch:
            raise ValueError(err + f"{spec!r}: missing the open_clip architecture (clip:ARCH)")
        return kind, arch, pretrained or None
    from vlrl.config import resolve_path

    if not os.path.isdir(resolve_path(rest)):
        raise ValueError(err + f"{spec!r}: no model directory at {rest!r}")
    return kind, rest, None


@dataclass
class Config:
    name: str = "robot_manipulation"  # task name (run names, reports)
    module: str = "tasks.robot_manipulation"  # the task module the core imports
    env: str = "Lift"  # robosuite environment (Lift, Stack, PickPlaceCan: the ones with a scripted expert)
    camera: str = "agentview"  # camera shown to the policy
    image_size: int = 64  # camera height and width in pixels
    max_steps: int = 100  # env steps before the episode is truncated (rollout.max_turns also bounds it)
    instruction: str | None = None  # language instruction; null = robots.env's default for the env
    tokenizer_path: str = "assets/tiny-qwen2.5-vl"  # tokenizer of the POLICY model: maps action ids <-> text
    n_bins: int = 256  # action bins per dimension
    token_offset: int | None = None  # id of bin 0; null = the last n_bins ids of the tokenizer
    gripper_close_positive: bool = True  # actions' gripper convention (+1 closes: robosuite)
    stats_path: str | None = None  # action_stats.json (q01/q99); null = identity ([-1, 1], robosuite's range)
    invalid_penalty: float = 0.0  # reward added when a response is not exactly 7 action tokens (use <= 0)
    expert_labels: bool = True  # put the scripted expert's action in obs.info (reference_answer, BC)
    expert_prefix_max: int = 0  # reset runs the expert k ~ U{0..this} steps first: BC over whole demos / start-state curriculum
    demo_path: str | None = None  # frames.npz from tasks.robot_manipulation.demos: the train split serves these frames (BC with sft.py)
    constrained: bool = True  # constrained decoding: only action tokens (then EOS) can be sampled
    eval_episodes: int = 20  # evaluation episodes (seeds 0..n-1 of the eval split)
    dense_reward: str | None = None  # learned dense reward "progress:DIR" | "prm:DIR" | "clip:ARCH[:PRETRAINED]" -> rewards["dense"] per turn (dense.py); null = sparse success only
    dense_weight: float = 1.0  # rewards["dense"] = dense_weight * model's per-step reward (algo.reward_weights can weight "dense" again)

    def __post_init__(self):
        if self.image_size < 28:
            raise ValueError("invalid config value for 'task.image_size': must be >= 28")
        if self.max_steps < 1:
            raise ValueError("invalid config value for 'task.max_steps': must be >= 1")
        if self.n_bins < 2:
            raise ValueError("invalid config value for 'task.n_bins': must be >= 2")
        if self.expert_prefix_max < 0:
            raise ValueError("invalid config value for 'task.expert_prefix_max': must be >= 0")
        if self.invalid_penalty > 0:
            raise ValueError("invalid config value for 'task.invalid_penalty': must be <= 0 (a penalty)")
        if self.dense_reward is not None:
            parse_dense_spec(self.dense_reward)
        if not math.isfinite(self.dense_weight):
            raise ValueError("invalid config value for 'task.dense_weight': must be finite")
