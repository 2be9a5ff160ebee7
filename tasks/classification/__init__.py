"""Few-shot image classification with CLS-RL / No-Thinking-RL rewards. See README.md.

Task contract (vlrl/task.py): Config, make_env, num_examples, report; hooks episode_success,
reference_answer (supervised warm start, vlrl/sft.py) and markdown. `candidates(classnames, label, seed)`
is the candidate-list rule; the rewards live in rewards/classification.py.
"""

from __future__ import annotations

from .config import Config
from .data import get_view
from .env import ClassificationEnv
from .prompts import candidates, reference_answer_text
from .report import report, to_markdown

__all__ = ["Config", "ClassificationEnv", "candidates", "make_env", "num_examples", "report", "reference_answer",
           "episode_success", "markdown"]


def make_env(cfg: Config, split: str) -> ClassificationEnv:
    """A fresh env for `split`: "train" (the k-shot sample) or "eval" (cfg.eval_split, the test split by default)."""
    return ClassificationEnv(cfg, split)


def num_examples(cfg: Config, split: str) -> int:
    """Samples in the split (training seeds past it start another shuffled pass)."""
    return len(get_view(cfg, split).items)


def reference_answer(observation, cfg: Config) -> str:
    """The true class in the mode's answer format (cls_rl: `<think></think><answer>NAME</answer>`)."""
    return reference_answer_text(observation.info["label"], cfg.mode)


def episode_success(episode, cfg: Config) -> float:
    """1 when the answer is right. The default (total reward > 0) would count a well-formed wrong answer,
    which earns the format reward, as a success."""
    return float(bool(episode.turns) and episode.turns[0].rewards.get("accuracy") == 1.0)


def markdown(rep: dict, cfg: Config) -> str:
    return to_markdown(rep)
