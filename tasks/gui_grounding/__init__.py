"""GUI grounding with GUI-G1 rewards on synthetic screens (or your own JSONL). See README.md.

Task contract (vlrl/task.py): Config, make_env, num_examples, report; hooks sample_weights,
episode_success (for the seed curriculum), reference_answer (for the supervised warm start,
vlrl/sft.py), markdown, dump_examples.
"""

from __future__ import annotations

from .config import Config, ScoringConfig
from .data import make_source
from .difficulty import group_weights
from .env import GroundingEnv
from .report import dump_annotated, report, to_markdown

__all__ = ["Config", "ScoringConfig", "GroundingEnv", "make_env", "num_examples", "reference_answer", "report",
           "sample_weights", "episode_success", "markdown", "dump_examples"]


def make_env(cfg: Config, split: str) -> GroundingEnv:
    """A fresh env for `split` ("train" or "eval"); train and eval layouts are disjoint."""
    return GroundingEnv(cfg, split)


def num_examples(cfg: Config, split: str) -> int | None:
    """None (infinite) for synthetic training; the example count otherwise."""
    src = make_source(cfg, split)
    return src.size


def reference_answer(obs, cfg: Config) -> str:
    """The target answer for the warm start: the GT box in the model frame, GUI-G1's JSON format
    (integers: every integer 0..1023 is one token of the tiny model). A reading example
    (`describe_prob`) answers with the target's name instead."""
    if "describe" in obs.info:
        return obs.info["describe"]
    x1, y1, x2, y2 = (int(round(v)) for v in obs.info["gt_box"])
    box = f'[{{"bbox_2d": [{x1}, {y1}, {x2}, {y2}]}}]'
    return box if cfg.prompt == "fast" else f"<think></think>{box}"


def sample_weights(group, cfg: Config) -> list[float]:
    """Full per-episode loss weights of one group: area weight x group success factor.

    The area weight is each observation's ``info["sample_weight"]``; the success factor
    ``1 + success_beta * (1 - 2p)`` uses the group's hit rate p (see difficulty.py). Use this
    result instead of (not on top of) ``info["sample_weight"]``.
    """
    if cfg.difficulty == "off" and cfg.success_beta == 0.0:
        return [1.0] * len(group)
    base = [float(ep.turns[0].observation.info.get("sample_weight", 1.0)) for ep in group]
    if cfg.difficulty == "off":
        base = [1.0] * len(group)
    hits = [_hit(ep, cfg) for ep in group]
    return group_weights(base, hits, cfg.success_beta)


def episode_success(ep, cfg: Config) -> float:
    """1 if the answer's box centre is inside the target (the click hits), else 0. The core's default
    (total reward > 0) would count any answer with some IoU or box-shape credit as a success."""
    return float(ep.turns[0].info.get("hit", 0.0))


def _hit(ep, cfg) -> float:
    turn = ep.turns[0]
    if "hit" in turn.info:
        return float(turn.info["hit"])
    from .env import analyse_answer

    return analyse_answer(turn.response_text or "", turn.observation.info, cfg.big_box_fraction)["hit"]


def markdown(rep: dict, cfg: Config) -> str:
    """The report as a Markdown table (written next to the JSON by vlrl/evaluate.py)."""
    return to_markdown(rep)


def dump_examples(episodes, out_dir, cfg) -> list[str]:
    """Annotated images (GT green, prediction red) for a person to look at."""
    return dump_annotated(episodes, str(out_dir), limit=len(episodes), big_box_fraction=cfg.big_box_fraction)
