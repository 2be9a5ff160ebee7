"""The benchmarks' single-image task as a vlrl task module (bench/common.py: SquareEnv).

Used by bench/memory_stability.py to drive the real training loop (`vlrl.train.run`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

_BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _BENCH not in sys.path:
    sys.path.insert(0, _BENCH)

import common as C  # noqa: E402


@dataclass
class Config:
    name: str = "square"  # task name
    module: str = "bench/square_task"  # task folder
    size: int = 56  # image side in pixels


def make_env(cfg: Config, split: str) -> C.SquareEnv:
    return C.SquareEnv(cfg.size)


def num_examples(cfg: Config, split: str):
    return None


def report(episodes, cfg: Config) -> dict:
    scores = [ep.turns[0].rewards["score"] for ep in episodes]
    return {"overall": sum(scores) / len(scores), "count": len(scores)}
