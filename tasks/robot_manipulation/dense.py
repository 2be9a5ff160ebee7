"""Dense rewards for robot episodes from a learned reward model (rewards/): the `score_episodes` task hook.

The sparse ``success`` reward stays as the env gives it. With ``task.dense_reward`` set, the training
loop calls `score_episodes(episodes, cfg)` right after each rollout; it scores every episode in ONE
batched call of the reward model and adds ``turn.rewards["dense"] = task.dense_weight * r_t`` to turn t,
r_t being the model's reward for the transition o_t -> o_{t+1} (rewards/learned/base.py: frames o_0..o_T in,
T per-step rewards out). The core sums named sub-rewards with `algo.reward_weights` (weight 1 for a
name not listed), so a turn's reward is ``w_success * success + w_dense * dense_weight * r_t + ...``.

Specs (`load_reward_model`, one model per spec, cached for the process):

* ``progress:DIR``: a trained progress model (python -m rewards.learned.train_progress), VLAC-style
  r_t = (v_{t+1} - v_t) * 0.01 with v in percent;
* ``prm:DIR``: the task-completion PRM (python -m rewards.learned.train_prm), r_t = P(completed | o_{t+1});
* ``clip:ARCH`` / ``clip:ARCH:PRETRAINED``: VLM-RM CLIP reward (open_clip architecture, "tiny-clip"
  for tests; PRETRAINED an open_clip tag in the local cache or a checkpoint file; without it the
  weights are random: a baseline, not a signal). Goal prompt = the instruction.

Frames: o_0..o_{T-1} are the images the policy saw (each turn's observation); o_T, the frame after the
last action, is taken in this order from

1. the last turn's ``info["next_frame"]`` (the env sets it on the step that ends the episode: success or
   the env's own step limit),
2. the episode's ``info["bootstrap_observation"]`` image (run_episodes keeps the next observation when
   it cuts an episode at ``rollout.max_turns``, which the env does not know about),
3. else the last observation's frame repeated (no frame after the last action is known: a frame model
   scores o_{T-1} again, a progress model sees no change).

The model runs on the current CUDA device when there is one, else on the CPU.
"""

from __future__ import annotations

import functools

import numpy as np

from .config import Config, parse_dense_spec


def _device() -> str:
    import torch

    return f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"


@functools.lru_cache(maxsize=4)
def load_reward_model(spec: str):
    """The reward model (rewards.learned.base.RewardModel) for a `task.dense_reward` spec, loaded once per spec."""
    import torch

    from vlrl.config import resolve_path

    kind, target, pretrained = parse_dense_spec(spec)
    device = _device()
    # Random-weight models seed torch's global RNG; keep the training run's RNG stream untouched.
    with torch.random.fork_rng(devices=[]):
        if kind == "clip":
            from rewards.learned.clip_reward import ClipReward

            # a checkpoint file resolves against the repo root; an open_clip tag ("openai") passes unchanged
            return ClipReward(target, pretrained=resolve_path(pretrained) if pretrained else None, device=device)
        if kind == "progress":
            from rewards.learned.progress_model import ProgressReward

            return ProgressReward.load(resolve_path(target), device=device)
        from rewards.learned.prm import PRMReward

        return PRMReward.load(resolve_path(target), device=device)


def _frame(image) -> np.ndarray:
    return np.asarray(image.convert("RGB") if hasattr(image, "convert") else image, dtype=np.uint8)


def final_frame(ep) -> tuple[np.ndarray, str]:
    """o_T, the frame after the episode's last action, and where it came from: next_frame | bootstrap | repeat."""
    last = ep.turns[-1]
    if last.info.get("next_frame") is not None:
        return _frame(last.info["next_frame"]), "next_frame"
    boot = ep.info.get("bootstrap_observation")
    if boot is not None and boot.images:
        return _frame(boot.images[0]), "bootstrap"
    return _frame(last.observation.images[0]), "repeat"


def episode_frames(ep) -> np.ndarray:
    """uint8 [T+1, H, W, 3]: the T frames the policy saw, then `final_frame`."""
    frames = []
    for i, t in enumerate(ep.turns):
        if not t.observation.images:
            raise ValueError(f"dense reward: turn {i} of episode (seed {ep.seed}) has no camera image")
        frames.append(_frame(t.observation.images[0]))
    frames.append(final_frame(ep)[0])
    return np.stack(frames)


def score_episodes(episodes, cfg: Config) -> None:
    """Add ``rewards["dense"]`` (dense_weight * r_t) to every turn, in place; a no-op without `cfg.dense_reward`."""
    spec = getattr(cfg, "dense_reward", None)
    if not spec:
        return
    scored = [ep for ep in episodes if ep.turns]
    if not scored:
        return
    from rewards.learned.base import Query

    queries = [Query(episode_frames(ep), str(ep.turns[0].observation.info.get("instruction", ""))) for ep in scored]
    per_step = load_reward_model(spec)(queries)
    w = float(cfg.dense_weight)
    for ep, r in zip(scored, per_step):
        if len(r) != len(ep.turns):
            raise RuntimeError(f"dense reward: {len(r)} rewards for {len(ep.turns)} turns (spec {spec!r})")
        for turn, value in zip(ep.turns, r):
            turn.rewards["dense"] = w * float(value)
