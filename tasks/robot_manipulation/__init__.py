"""Robot manipulation (robosuite) as a multi-turn task for VLA policies: see env.py and action_tokenizer.py.

Task contract (imported by the core through `Config.module`): Config, make_env, num_examples, report,
reference_answer (behaviour cloning with vlrl/sft.py: the scripted expert's action as action-token text),
score_episodes (the post-rollout hook: learned dense rewards with `dense_reward`, see dense.py), episode_success
(the simulator's success, not a positive total reward: a dense reward makes almost every total positive).
"""

from __future__ import annotations

from .action_tokenizer import ActionStats, ActionTokenizer
from .config import Config
from .demos import FramesEnv
from .dense import load_reward_model, score_episodes
from .env import RobotManipulationEnv, action_tokenizer, demo_action_stats, reference_answer, reference_ids

__all__ = ["ActionStats", "ActionTokenizer", "Config", "RobotManipulationEnv", "action_tokenizer", "demo_action_stats",
           "episode_success", "load_reward_model", "make_env", "num_examples", "reference_answer", "reference_ids",
           "report", "score_episodes"]


def make_env(cfg: Config, split: str):
    """A fresh env for `split`; train and eval use disjoint robosuite seeds. With `demo_path` the train
    split serves recorded expert frames instead (behaviour cloning; see demos.py).

    With `dense_reward` the reward model is loaded here (once; cached), before the first simulator
    exists: importing torch vision extensions after a MuJoCo EGL context exists can crash the process."""
    if cfg.dense_reward:
        load_reward_model(cfg.dense_reward)
    if cfg.demo_path and split == "train":
        return FramesEnv(cfg)
    return RobotManipulationEnv(cfg, split)


def num_examples(cfg: Config, split: str):
    """Held-out evaluation uses `eval_episodes` seeds; training draws seeds without end."""
    return cfg.eval_episodes if split == "eval" else None


def episode_success(episode, cfg: Config) -> float:
    """1.0 when the simulator's success predicate held (its `success` reward), whatever a dense reward added: the
    training success rate and the seed curriculum read this, and the core's default (total reward > 0) would count
    nearly every episode of a dense-reward run as a success."""
    return float(any(t.rewards.get("success", 0.0) for t in episode.turns))


def report(episodes, cfg: Config) -> dict:
    """Success rate (overall), mean episode length in turns, share of invalid-action turns."""
    n = len(episodes)
    if n == 0:
        return {"overall": 0.0, "count": 0, "breakdown": {}}
    success = [bool(episode_success(ep, cfg)) for ep in episodes]
    turns = [len(ep.turns) for ep in episodes]
    all_turns = [t for ep in episodes for t in ep.turns]
    invalid = sum(t.info.get("reason") == "invalid_action" for t in all_turns)
    ended = {}  # how episodes ended: success, the step limit, or an env-reported reason
    for ep, ok in zip(episodes, success):
        why = "success" if ok else ("truncated" if ep.turns and ep.turns[-1].truncated else "failed")
        ended[why] = ended.get(why, 0) + 1
    return {"overall": sum(success) / n, "success_rate": sum(success) / n, "count": n,
            "mean_turns": sum(turns) / n, "invalid_action_rate": invalid / max(len(all_turns), 1),
            "breakdown": {"ended": ended}}
