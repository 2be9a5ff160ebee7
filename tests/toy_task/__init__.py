"""A tiny verifiable image task for the core's own tests (not a product task).

The screen is a solid colour; the reward is the fraction of the response's characters that are
digits when the image is red, letters when it is blue. A random tiny model scores in between, so
groups have reward spread and a working update moves the reward.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image

from vlrl.episode import Episode, Observation, StepResult

COLORS = {"red": (220, 30, 30), "blue": (30, 30, 220)}


@dataclass
class Config:
    name: str = "toy"  # task name
    module: str = "tests/toy_task"  # task folder (a path works as well as a module name)
    size: int = 56  # image side in pixels
    corrupt_every: int = 0  # if > 0, reset(seed) raises OSError when seed % corrupt_every == 0 (robustness tests)
    turns: int = 1  # > 1: a multi-turn episode, scored every turn, done after this many turns (PPO tests)

    def __post_init__(self):
        if self.size < 28:
            raise ValueError("invalid config value for 'task.size': must be >= 28")


class ToyEnv:
    def __init__(self, cfg: Config, split: str):
        self.cfg, self.split, self.color, self.t = cfg, split, "red", 0

    def reset(self, seed: int) -> Observation:
        if self.cfg.corrupt_every and seed % self.cfg.corrupt_every == 0:
            raise OSError(f"image for seed {seed} is corrupt")
        rng = random.Random(seed * 2 + (self.split == "eval"))
        self.color, self.t = rng.choice(sorted(COLORS)), 0
        return self._observation()

    def _observation(self) -> Observation:
        image = Image.new("RGB", (self.cfg.size, self.cfg.size), COLORS[self.color])
        text = "answer" if self.cfg.turns == 1 else f"answer {self.t}"
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        return Observation(messages=messages, images=[image], info={"color": self.color})

    def step(self, response_text: str) -> StepResult:
        chars = [c for c in response_text if not c.isspace()]
        want = str.isdigit if self.color == "red" else str.isalpha
        score = sum(want(c) for c in chars) / len(chars) if chars else 0.0
        self.t += 1
        done = self.t >= self.cfg.turns
        return StepResult(None if done else self._observation(), {"score": score}, done,
                          info={"length": float(len(response_text)), "reason": None if chars else "empty"})


def make_env(cfg: Config, split: str) -> ToyEnv:
    return ToyEnv(cfg, split)


def num_examples(cfg: Config, split: str):
    return None


def reference_answer(obs: Observation, cfg: Config) -> str:
    return "123 456 789" if obs.info["color"] == "red" else "abc def"


def report(episodes: list[Episode], cfg: Config) -> dict:
    scores = [sum(t.rewards["score"] for t in ep.turns) / len(ep.turns) for ep in episodes]
    by_color: dict[str, list[float]] = {}
    for ep, s in zip(episodes, scores):
        by_color.setdefault(ep.turns[0].observation.info["color"], []).append(s)
    return {"overall": sum(scores) / len(scores), "count": len(scores),
            "breakdown": {c: sum(v) / len(v) for c, v in sorted(by_color.items())}}
