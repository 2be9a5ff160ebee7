"""Task-completion PRM (VLA-RL style): "The task is {task}, is it completed?" -> P(yes) on the VLM.

Trained on pseudo-labels from automatically extracted segments (rewards.learned.segments: gripper events and
object-state changes, no success signal). Prompts per episode: the task instruction (labels of its
task kind), sub-task prompts (e.g. "grasp the red cube": grasp labels), and other tasks' instructions
(label 0). `PRMReward` serves it through the common interface: the per-step reward is P(completed | o_t)
(``dense``), that probability only on the last step (``terminal``), or its change (``delta``).
"""

from __future__ import annotations

import numpy as np
import torch

from rewards.learned.base import FrameRewardModel
from rewards.learned.metrics import f1_score
from rewards.learned.pairs import MISMATCH_EVAL, MISMATCH_TRAIN
from rewards.learned.segments import pseudo_labels
from rewards.learned.vlm_reward import VLMReward, VLMRewardConfig

PRM_CONFIG = VLMRewardConfig(n_images=1, prompt="<image>The task is {instruction}, is it completed?",
                             outputs=("completed",), signed=())

# Pseudo-label kind of each prompt, per sim task: the task's own instruction first, then sub-tasks.
PROMPTS = {
    "Lift": {"lift the red cube": "lift", "grasp the red cube": "grasp"},
    "Stack": {"stack the red cube on top of the green cube": "place", "grasp the red cube": "grasp"},
    "Synthetic": {"lift the red cube": "lift", "grasp the red cube": "grasp"},
}


def episode_labels(ep) -> dict[str, np.ndarray]:
    """Pseudo-labels [T1] per prompt of the episode's task (cached on the episode)."""
    cache = getattr(ep, "_prm_labels", None)
    if cache is None:
        cache = {p: pseudo_labels(k, ep.gripper_cmd, ep.obj_pos) for p, k in PROMPTS[ep.task].items()}
        ep._prm_labels = cache
    return cache


def sample_prm(episodes, n: int, rng: np.random.Generator, mismatch: float = 0.15, positive: float = 0.4,
               mismatch_instructions=MISMATCH_TRAIN) -> list[tuple[int, int, str, float]]:
    """n samples (episode, frame, prompt, label); about `positive` of the matched ones are positives."""
    out = []
    for _ in range(n):
        e = int(rng.integers(len(episodes)))
        ep = episodes[e]
        labels = episode_labels(ep)
        if rng.random() < mismatch:
            others = [s for s in mismatch_instructions if s not in labels]
            out.append((e, int(rng.integers(len(ep))), others[int(rng.integers(len(others)))], 0.0))
            continue
        prompts = list(labels)
        prompt = prompts[0] if rng.random() < 0.7 else prompts[int(rng.integers(len(prompts)))]
        y = labels[prompt]
        want = rng.random() < positive
        pool = np.flatnonzero(y >= 0.5) if want else np.flatnonzero(y < 0.5)
        if len(pool) == 0:
            pool = np.arange(len(y))
        t = int(pool[int(rng.integers(len(pool)))])
        out.append((e, t, prompt, float(y[t])))
    return out


def batch_from_samples(episodes, samples):
    frames = np.stack([episodes[e].frames[t] for e, t, _, _ in samples])
    return frames, [(k,) for k in range(len(samples))], [s for _, _, s, _ in samples], np.array([[y] for *_, y in samples], np.float32)


@torch.no_grad()
def frame_probs(model: VLMReward, frames: np.ndarray, prompt: str, batch_size: int = 128) -> np.ndarray:
    out = []
    for s in range(0, len(frames), batch_size):
        f = frames[s : s + batch_size]
        out.append(model.predict(f, [(k,) for k in range(len(f))], [prompt] * len(f))[:, 0])
    return np.concatenate(out) if out else np.zeros(0)


def evaluate_prm(model: VLMReward, episodes, threshold: float = 0.5, every: int = 2,
                 thresholds=(0.5, 0.7, 0.9)) -> dict:
    """F1 of P(completed) >= threshold on every `every`-th frame of the episodes: against the pseudo-labels
    of the task prompt and of the sub-task prompts, and against the env's own success flags (task prompt);
    the mean probability under unseen other-task instructions (should be ~0). `f1_at` gives the task
    prompt's F1 at other thresholds (from the same probabilities)."""
    model.eval()
    per_prompt: dict[str, tuple[list, list]] = {}
    succ_t, mism = [], []
    for ep in episodes:
        idx = np.arange(0, len(ep), every)
        labels = episode_labels(ep)
        for k, (prompt, y) in enumerate(labels.items()):
            p = frame_probs(model, ep.frames[idx], prompt)
            name = "task" if k == 0 else prompt
            per_prompt.setdefault(name, ([], []))
            per_prompt[name][0].append(p)
            per_prompt[name][1].append(y[idx])
            if k == 0:
                succ_t.append(ep.success[idx])
        mism.append(frame_probs(model, ep.frames[idx[::2]], MISMATCH_EVAL[ep.seed % len(MISMATCH_EVAL)]))
    res = {}
    for name, (ps, ys) in per_prompt.items():
        p, y = np.concatenate(ps), np.concatenate(ys)
        f = f1_score(p >= threshold, y >= 0.5)
        res[name] = {"f1": f["f1"], "precision": f["precision"], "recall": f["recall"], "positives": f["positives"],
                     "n": f["n"], "accuracy": float(((p >= threshold) == (y >= 0.5)).mean()),
                     "f1_at": {str(t): f1_score(p >= t, y >= 0.5)["f1"] for t in thresholds}}
    p_task = np.concatenate(per_prompt["task"][0])
    f = f1_score(p_task >= threshold, np.concatenate(succ_t))
    res["task_vs_env_success"] = {"f1": f["f1"], "precision": f["precision"], "recall": f["recall"], "positives": f["positives"],
                                  "f1_at": {str(t): f1_score(p_task >= t, np.concatenate(succ_t))["f1"] for t in thresholds}}
    res["mismatch_unseen_mean_prob"] = float(np.concatenate(mism).mean())
    res["threshold"] = threshold
    return res


class PRMReward(FrameRewardModel):
    """Per-step rewards from the PRM: dense (P(completed | o_t)), terminal (only the last step) or delta."""

    def __init__(self, model: VLMReward, mode: str = "dense", batch_size: int = 64, cache_size: int = 8192) -> None:
        super().__init__(cache_size)
        if mode not in ("dense", "terminal", "delta"):
            raise ValueError(f"mode must be dense, terminal or delta, got {mode!r}")
        self.model, self.mode, self.batch_size = model.eval(), mode, batch_size

    @classmethod
    def load(cls, directory: str, device: str = "cpu", **kw) -> "PRMReward":
        return cls(VLMReward.load(directory, device), **kw)

    def _score(self, frames: np.ndarray, instructions: list[str]) -> np.ndarray:
        return self.model.predict(frames, [(k,) for k in range(len(frames))], instructions)[:, 0]

    def _to_rewards(self, scores: np.ndarray) -> np.ndarray:
        if self.mode == "terminal":
            out = np.zeros_like(scores)
            if len(out):
                out[-1] = scores[-1]
            return out
        if self.mode == "delta":
            return np.diff(np.concatenate([[0.0], scores]))
        return scores
