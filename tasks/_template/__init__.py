"""A complete minimal task: name the colour of the square. Copy this folder to start a new task.

    python vlrl/train.py task.module=path/to/this/folder trainer.steps=2    # its config: task.yaml beside it

The contract (vlrl/task.py): `Config`, `make_env`, `num_examples`, `report` are required; hooks such as
`reference_answer` (for the supervised warm start, vlrl/sft.py) are optional. Every hook takes the task
config last. Reward functions that other tasks could reuse belong in rewards/ (e.g. rewards/gui.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image

from vlrl.config import opt
from vlrl.episode import Episode, Observation, StepResult

COLORS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 60, 220)}


@dataclass
class Config:
    name: str = opt("colour_template", "task name in logs and reports")
    module: str = opt("tasks/_template", "where the task lives (set from task.module)")
    image_size: int = opt(56, "image side in pixels")
    eval_examples: int = opt(60, "held-out examples (seeds 0..N-1 of the eval split)")

    def __post_init__(self):
        if self.image_size < 28:
            raise ValueError("invalid config value for 'task.image_size': must be >= 28 (one 28-pixel patch)")


class ColourEnv:
    """One-turn episodes: reset shows a square, step scores the answer and ends the episode."""

    def __init__(self, cfg: Config, split: str):
        self.cfg, self.split, self.colour = cfg, split, ""

    def reset(self, seed: int) -> Observation:
        rng = random.Random(f"{self.split}:{seed}")  # disjoint train / eval draws, same seed -> same screen
        self.colour = rng.choice(sorted(COLORS))
        size = self.cfg.image_size
        image = Image.new("RGB", (size, size), "white")
        side = rng.randint(size // 3, size - 4)
        x, y = rng.randint(0, size - side), rng.randint(0, size - side)
        image.paste(COLORS[self.colour], (x, y, x + side, y + side))
        text = f"What colour is the square? Answer with one word: {', '.join(sorted(COLORS))}."
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        return Observation(messages=messages, images=[image], info={"colour": self.colour})

    def step(self, response_text: str) -> StepResult:
        answer = response_text.strip().lower().rstrip(".")
        correct = float(answer == self.colour)
        return StepResult(None, {"correct": correct}, True, info={"answer": answer})


def make_env(cfg: Config, split: str) -> ColourEnv:
    return ColourEnv(cfg, split)


def num_examples(cfg: Config, split: str) -> int | None:
    return cfg.eval_examples if split == "eval" else None  # training draws fresh squares without end


def report(episodes: list[Episode], cfg: Config) -> dict:
    by_colour: dict[str, list[float]] = {}
    for ep in episodes:
        by_colour.setdefault(ep.turns[0].observation.info["colour"], []).append(ep.turns[0].rewards["correct"])
    scores = [s for v in by_colour.values() for s in v]
    return {"overall": sum(scores) / max(len(scores), 1), "count": len(scores),
            "breakdown": {c: sum(v) / len(v) for c, v in sorted(by_colour.items())}}


def reference_answer(observation: Observation, cfg: Config) -> str:
    return observation.info["colour"]
