"""A VLA checkpoint as a plain ``obs -> action`` function, outside the training loop.

Used to record the policy's own rollouts as reward-model data (``python -m tasks.robot_manipulation.record_reward_data --policy DIR``):
a reward model trained only on scripted experts and their perturbations has never seen how the policy
it will reward actually fails (the tiny BC policy stalls over the cube with the gripper open).

The observation (prompt + constrained decoding) and the action decoding are the task's own (env.py, from
a task Config), so the policy acts here exactly as it does under `vlrl/train.py task=robot_manipulation`
at the same temperature.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .action_tokenizer import STATS_FILE, response_to_action
from .config import Config
from .env import action_tokenizer, hf_tokenizer, observation


@dataclass
class VLAPolicy:
    """Callable on a robots.env observation dict (``images``, ``instruction``); returns a 7-D action."""

    engine: object  # vlrl.rollout engine
    task: Config  # tokenizer, action statistics, camera and image size of the policy
    greedy: bool = False
    invalid: int = 0  # responses that did not decode to an action (acted as a no-op, as the task env does)

    @property
    def camera(self) -> str:
        return self.task.camera

    @property
    def image_size(self) -> int:
        return self.task.image_size

    def __call__(self, obs: dict) -> np.ndarray:
        o = observation(self.task, obs["images"][self.camera], obs["instruction"], {})
        sample = self.engine.generate([o], n=1, greedy=self.greedy)[0][0]
        eos = {hf_tokenizer(self.task.tokenizer_path).eos_token_id}
        action = response_to_action(sample.response_ids, action_tokenizer(self.task), eos)
        if action is None:
            self.invalid += 1
            return np.zeros(7)
        return np.asarray(action, dtype=np.float64)


def load_policy(path: str, camera: str = "robot0_eye_in_hand", image_size: int = 112, temperature: float = 0.25,
                greedy: bool = False, stats_path: str | None = None, seed: int = 0, threads: int = 0) -> VLAPolicy:
    """Load a VLA checkpoint (a save_pretrained directory with its action_stats.json beside the weights,
    or `stats_path`) on the CPU, or the current GPU when there is one. Load it BEFORE building any
    simulator: importing torch extensions after a MuJoCo EGL context exists can crash the process."""
    import torch

    from vlrl.config import ModelConfig, RolloutConfig, resolve_path
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    stats_file = resolve_path(stats_path) if stats_path else os.path.join(resolve_path(path), STATS_FILE)
    if not os.path.exists(stats_file):
        raise FileNotFoundError(f"policy {path!r}: no action statistics at {stats_file} (pass stats_path)")
    task = Config(tokenizer_path=path, stats_path=stats_file, camera=camera, image_size=image_size)
    mcfg = ModelConfig(path=path)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = load_model(mcfg, device, trainable=False)
    engine = make_engine(RolloutConfig(max_new_tokens=8, temperature=temperature), model, load_processor(mcfg))
    return VLAPolicy(engine, task, greedy)
