"""Candidate lists, prompts and reference answers of the two CLS-RL variants."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

DEFAULT_QUESTION = "What type of object is in the photo?"
ALL_CLASSES_BELOW = 30  # fewer classes than this: the list names every class
MAX_CANDIDATES = 100
CANDIDATE_SHARE = 0.4
SUFFIX = {
    "cls_rl": "\n Please output the thinking process in <think> </think> and final answer in <answer> </answer> tags.",
    "no_thinking": "\n Please directly output the answer.",
}


def candidates(classnames: Sequence[str], label: str | int, seed: int) -> list[str]:
    """The class names offered to the model for one sample.

    classnames: the n class names the sample may belong to (distinct); label: the true class (a name in
    `classnames`, or its index); seed: identifies the draw (same (classnames, label, seed) -> same list).
    Fewer than 30 classes: every class, in the given order. Otherwise min(100, floor(0.4 n)) classes sampled
    without replacement; when the true class is not among them it replaces one drawn at random; the list
    is then shuffled. -> list[str] of length n or min(100, floor(0.4 n)), the true class always present.
    """
    names = list(classnames)
    if len(set(names)) != len(names):
        raise ValueError("class names must be distinct")
    true = names[label] if isinstance(label, int) else label
    if true not in names:
        raise ValueError(f"label {true!r} is not one of the {len(names)} classes")
    if len(names) < ALL_CLASSES_BELOW:
        return names
    rng = random.Random(f"candidates:{seed}:{true}")  # string seeds hash stably across runs and platforms
    k = min(MAX_CANDIDATES, math.floor(CANDIDATE_SHARE * len(names)))
    chosen = rng.sample(names, k)
    if true not in chosen:
        chosen[rng.randrange(k)] = true
    rng.shuffle(chosen)
    return chosen


def question_text(question: str, cands: Sequence[str]) -> str:
    """The question and the list, in the released code's format: '...\\nPlease choose one from list [ a, b ].'"""
    return f"{question}\nPlease choose one from list [ {', '.join(cands)} ]."


def prompt_text(question: str, cands: Sequence[str], mode: str) -> str:
    """The full user text of one sample for `mode` (cls_rl | no_thinking)."""
    return question_text(question, cands) + SUFFIX[mode]


def reference_answer_text(classname: str, mode: str) -> str:
    """The target completion of the supervised warm start: the reward's format with the true class
    (cls_rl: an empty think block, which the format rule accepts)."""
    return f"<think></think><answer>{classname}</answer>" if mode == "cls_rl" else classname
