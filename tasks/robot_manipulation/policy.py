"""A VLA checkpoint as a plain ``obs -> action`` function, outside the training loop.

Used to record the policy's own rollouts as reward-model data (``python -m rewards.sim_data --policy DIR``):
a reward model trained only on scripted experts and their perturbations has never seen how the policy
it will reward actually fails (the tiny BC policy stalls over the cube with the gripper open).

The prompt, the constrained decoding and the action decoding are the task's own (env.py), so the policy
acts here exactly as it does under `vlrl/train.py task=robot_manipulation` at the same temperature.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .action_tokenizer import STATS_FILE, ActionStats, ActionTokenizer, response_to_action
from .env import action_constraint, vla_observation


@dataclass
class VLAPolicy:
    """Callable on a robots.env observation dict (``images``, ``instruction``); returns a 7-D action."""

    engine: object  # vlrl.rollout engine
    tok: ActionTokenizer
    eos_ids: list[int]
    camera: str  # the camera the policy was trained on
    image_size: int  # its image height and width
    greedy: bool = False
    invalid: int = 0  # responses that did not decode to an action (acted as a no-op, as the task env does)

    def __call__(self, obs: dict) -> np.ndarray:
        o = vla_observation(obs["images"][self.camera], obs["instruction"],
                            allowed_ids=action_constraint(self.tok, self.eos_ids))
        sample = self.engine.generate([o], n=1, greedy=self.greedy)[0][0]
        action = response_to_action(sample.response_ids, self.tok, set(self.eos_ids))
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
    root = resolve_path(path)
    stats_file = resolve_path(stats_path) if stats_path else os.path.join(root, STATS_FILE)
    if not os.path.exists(stats_file):
        raise FileNotFoundError(f"policy {path!r}: no action statistics at {stats_file} (pass stats_path)")
    mcfg = ModelConfig(path=path)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    processor = load_processor(mcfg)
    model = load_model(mcfg, device, trainable=False)
    engine = make_engine(RolloutConfig(max_new_tokens=8, temperature=temperature), model, processor)
    eos_ids = [processor.tokenizer.eos_token_id]  # the task env's constraint and decoding use this one
    tok = ActionTokenizer(len(processor.tokenizer), ActionStats.load(stats_file), gripper_dim=6,
                          gripper_close_positive=True)
    return VLAPolicy(engine, tok, eos_ids, camera, image_size, greedy)
