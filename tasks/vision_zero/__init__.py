"""Vision-Zero "Who is the spy" self-play (`task=vision_zero`); see README.md.

Each episode is one game of N players (one policy) over R clue rounds and a decision stage
(tasks/vision_zero/env.py); its turns carry roles ("spy", "civilian", "observer" or "voter"), trained with
per-role EMA baselines (algo.advantage=role, vlrl/algos/roles.py) under the Iterative-SPO schedule
(selfplay.py, schedule.py). Image pairs: tasks.vision_zero.pairs (grid, chart, CLEVR, local edits);
the grounded clue language: language.py; rewards: rewards/vision_zero.py.
"""

from __future__ import annotations

from pathlib import Path

from tasks.vision_zero.config import Config
from tasks.vision_zero.env import VisionZeroEnv, score_clues
from tasks.vision_zero.report import report, write_viewer
from tasks.vision_zero.schedule import DecisionStats, SwitchConfig, SwitchState, next_state, phase
from tasks.vision_zero.selfplay import SelfPlaySchedule
from tasks.vision_zero.selfplay import roles as _roles

__all__ = ["Config", "DecisionStats", "SwitchConfig", "SwitchState", "next_state", "phase", "make_env",
           "num_examples", "report", "roles", "role_schedule", "score_episodes", "reference_answer",
           "required_max_turns", "dump_examples"]


def make_env(cfg: Config, split: str) -> VisionZeroEnv:
    return VisionZeroEnv(cfg, split)


def num_examples(cfg: Config, split: str) -> int | None:
    return cfg.eval_examples if split == "eval" else None  # training games are drawn without end


def roles(cfg: Config) -> list[str]:
    return _roles(cfg)


def role_schedule(cfg: Config) -> SelfPlaySchedule:
    if cfg.scripted != "off":
        raise ValueError(f"invalid config value for 'task.scripted': {cfg.scripted!r} (scripted prompts are for "
                         "the supervised warm start, vlrl/sft.py; RL plays real games: task.scripted=off)")
    return SelfPlaySchedule(cfg)


def score_episodes(episodes, cfg: Config) -> None:
    score_clues(episodes, cfg)


def reference_answer(observation, cfg: Config) -> str:
    if "reference" not in observation.info:
        raise ValueError("no reference answer: warm-start examples need task.scripted=clue|decision|mixed")
    return observation.info["reference"]


def required_max_turns(cfg: Config) -> int:
    """Generate calls of one game: N * R clue turns, then one observer turn (G samples) or N - 1 votes."""
    return cfg.players * cfg.rounds + (1 if cfg.decision == "observer" else cfg.players - 1)


def dump_examples(episodes, out_dir: Path, cfg: Config) -> list[str]:
    return [str(write_viewer(episodes, Path(out_dir) / "games.html", "vision_zero evaluation games"))]
