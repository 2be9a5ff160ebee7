"""The one data model that flows through rollout -> reward -> advantage -> loss.

An `Episode` is a list of `Turn`s. A single-turn task (GUI grounding, classification) is a one-turn
episode; a game or a robot run is a multi-turn one. A group is G consecutive episodes that started
from the same prompt / initial state (same `group_id`).

Rewards are named sub-scores, e.g. ``{"hit": 1.0, "iou": 0.31, "box": 0.1}``. A value of ``None``
means "could not score": the episode gets zero advantage and is counted in metrics.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from PIL import Image


@dataclass
class Observation:
    """What the policy sees at one turn.

    `messages` is a chat in the processor's format; image / video entries in it are placeholders
    (``{"type": "image"}``) filled, in order, from `images` / `videos`.
    """

    messages: list[dict]
    images: list[Image.Image] = field(default_factory=list)
    videos: list[list[Image.Image]] = field(default_factory=list)  # each a clip's frames (PIL images or [H, W, 3] arrays)
    # Sampled frames per second of each video (same order as `videos`; required when there are videos):
    # Qwen2.5-VL spaces the temporal M-RoPE positions by it (`second_per_grid_ts`).
    video_fps: list[float] = field(default_factory=list)
    # Where each video came from (a path), named in errors; optional.
    video_names: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)  # task-private data (ground truth etc.), never shown to the model
    # Extra keyword arguments for the processor call, e.g. {"images_kwargs": {"size": {...}}} when the
    # task has already resized the image to the frame its answers refer to.
    processor_kwargs: dict[str, Any] = field(default_factory=dict)
    # Constrained decoding: allowed_ids[j] (a range or a list of token ids) is what response position j
    # may hold; positions past the list are free. The engine samples only from these sets and the
    # training forward renormalises over the same sets, so rollout and training log-probs agree.
    allowed_ids: list | None = None
    # Derived data (the processor's encoding), filled by the rollout engine and reused by the trainer,
    # so each observation is preprocessed once however many episodes share it.
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # Multi-role episodes (games): who acts on this observation ("spy", "civilian", ...). The role picks
    # the EMA baseline of algo.advantage=role (vlrl/algos/roles.py) and groups the per-role metrics;
    # None: the task has a single role.
    role: str | None = None
    # Turns after the first: draw this many samples of this observation in the same batched generate
    # call; run_episodes steps the env with each in order (one Turn per sample), and the observation
    # returned by the last of those steps is the next one (e.g. an observer sampled G times).
    num_samples: int = 1

    def release(self, encoding_only: bool = False) -> None:
        """Free this observation's memory once nothing will encode it again: its cached encoding and, unless
        `encoding_only`, its images and videos. Messages, info and role stay, so reports still read the episode."""
        self.cache.clear()
        if not encoding_only:
            self.images, self.videos = [], []


@dataclass
class Turn:
    """One policy action and its consequences."""

    observation: Observation
    response_ids: list[int]  # sampled tokens, EOS included when the model stopped
    logprobs: list[float]  # per-token log-probs under the sampling policy ("old" log-probs)
    response_text: str = ""
    rewards: dict[str, float | None] = field(default_factory=dict)
    done: bool = False
    truncated: bool = False  # ended by a step limit, not by the task (bootstrap the value)
    value: float | None = None  # critic estimate for this turn's observation (PPO)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Episode:
    """A sequence of turns from one reset of an env."""

    turns: list[Turn] = field(default_factory=list)
    group_id: int = 0
    seed: int = 0
    info: dict[str, Any] = field(default_factory=dict)

    def total_reward(self, weights: dict[str, float] | None = None) -> float:
        """Weighted sum of all sub-rewards over all turns; NaN if any sub-reward is None."""
        total = 0.0
        for turn in self.turns:
            r = turn_reward(turn.rewards, weights)
            if math.isnan(r):
                return math.nan
            total += r
        return total


def turn_reward(rewards: dict[str, float | None], weights: dict[str, float] | None = None) -> float:
    """Weighted sum of named sub-rewards (weight 1 for names not in `weights`); NaN if any is None.

    Names starting with "_" are diagnostics, never summed.
    """
    total = 0.0
    for name, value in rewards.items():
        if name.startswith("_"):
            continue
        w = 1.0 if weights is None else weights.get(name, 1.0)
        if w == 0.0:
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return math.nan
        total += w * float(value)
    return total


@dataclass
class StepResult:
    """What an env returns after the policy acts."""

    observation: Observation | None  # next observation; None when done
    rewards: dict[str, float | None]
    done: bool
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class SampleError(ValueError):
    """`reset(seed)` cannot build this sample (unreadable image, box outside the image, ...).

    run_episodes skips the sample and counts it under `reason` (a short snake_case name); the message
    names the file and line / record. Any other OSError / ValueError is skipped too, counted under
    its class name."""

    def __init__(self, message: str, reason: str = "bad_sample"):
        super().__init__(message)
        self.reason = reason


class Env(Protocol):
    """What the policy talks to. One instance per running episode.

    `reset(seed)` must be deterministic in `seed`: the G episodes of a group are G envs reset with
    the same seed (or copies of one env after reset).
    """

    def reset(self, seed: int) -> Observation: ...

    def step(self, response_text: str) -> StepResult: ...

    # Optional: `step_ids(response_ids) -> StepResult`. run_episodes calls it instead of `step` when
    # present (action-token policies, where decoding ids to text and back is not exact).
