"""Video authenticity (VidGuard-R1): is a clip real or generated? See README.md.

Task contract (vlrl/task.py): Config, make_env, num_examples, report; hooks post_rollout (length
control, GRPO-TA), episode_success, reference_answer (supervised warm start) and markdown. Pieces:
rewards/video.py (reward terms), perturb.py (GRPO-TA sampler), manifest.py (JSONL reader), decode.py
(decode-once loader), scenes.py / artifacts.py / generate.py (the built-in clip set).
"""

from tasks.video_authenticity.config import Config
from tasks.video_authenticity.perturb import perturb
from tasks.video_authenticity.report import report, to_markdown  # eager: the submodule would shadow `report`

__all__ = ["Config", "perturb", "make_env", "num_examples", "report", "post_rollout", "episode_success",
           "reference_answer", "markdown"]


def make_env(cfg: Config, split: str):
    """A fresh env for `split`: "train" (task.train_manifest or the built-in train set) or "eval"."""
    from tasks.video_authenticity.env import VideoAuthEnv

    return VideoAuthEnv(cfg, split)


def num_examples(cfg: Config, split: str) -> int:
    from tasks.video_authenticity.env import records_for

    return len(records_for(cfg, split))


def markdown(rep: dict, cfg: Config) -> str:
    return to_markdown(rep)


def post_rollout(episodes, generate, cfg: Config) -> dict:
    """Length-control and GRPO-TA rewards in place (training only); decode metrics of the step."""
    from tasks.video_authenticity.training import post_rollout as _post

    return _post(episodes, generate, cfg)


def episode_success(episode, cfg: Config) -> float:
    """1 when the clip was called right (real vs generated), whatever the reward mode."""
    return float(bool(episode.turns) and episode.turns[0].info.get("correct") == 1.0)


def reference_answer(observation, cfg: Config) -> str:
    """The target for supervised warm starts: an empty think block and the right letter."""
    return f"<think></think><answer>{observation.info['letter']}</answer>"
