"""The robosuite env (robots.env) as a multi-turn vlrl Env: one env step per turn.

Turn t: the policy sees the camera image and "In: What action should the robot take to {instruction}?\nOut:",
answers with 7 action tokens (as text: the engine hands the env decoded text), the env re-tokenises the
text (action_tokenizer.text_to_ids), decodes the action and steps the simulator.

Rewards per turn: ``success`` (1 on the step the task's success predicate holds, which ends the episode)
and ``invalid_action`` (``cfg.invalid_penalty`` when the response is not exactly 7 action tokens; the
robot then holds still for that step: zero deltas, unchanged gripper command; info reason "invalid_action").
The step that ends an episode (success or the env's step limit) carries the camera frame after the action
in ``info["next_frame"]`` (uint8 [H, W, 3]), so a learned dense reward can score the last transition.

With ``expert_labels`` every observation carries the scripted expert's action for its state in
``obs.info["expert_action"]`` (the expert's phase machine follows whatever trajectory the policy drives,
i.e. DAgger-style labels), which `reference_answer` turns into action-token text for behaviour cloning.

    python -m tasks.robot_manipulation.env --episodes 20 --out action_stats.json   # q01/q99 from expert demos
"""

from __future__ import annotations

import argparse
import functools
import random

import numpy as np
from PIL import Image

from vlrl.episode import Observation, StepResult

from .action_tokenizer import ActionStats, ActionTokenizer, action_to_text, response_to_action, text_to_ids
from .config import Config

PROMPT = "In: What action should the robot take to {instruction}?\nOut:"
EVAL_SEED_OFFSET = 1_000_000  # eval placements come from a disjoint range of robosuite seeds


@functools.lru_cache(maxsize=8)
def hf_tokenizer(path: str):
    from transformers import AutoTokenizer

    from vlrl.config import resolve_path

    return AutoTokenizer.from_pretrained(resolve_path(path))


@functools.lru_cache(maxsize=8)
def _action_tokenizer(tokenizer_path: str, stats_path: str | None, n_bins: int, offset: int | None,
                      close_positive: bool) -> ActionTokenizer:
    from vlrl.config import resolve_path

    stats = ActionStats.load(resolve_path(stats_path)) if stats_path else ActionStats.identity(7)
    return ActionTokenizer(len(hf_tokenizer(tokenizer_path)), stats, n_bins=n_bins, offset=offset, gripper_dim=6,
                           gripper_close_positive=close_positive)


def action_tokenizer(cfg: Config) -> ActionTokenizer:
    return _action_tokenizer(cfg.tokenizer_path, cfg.stats_path, cfg.n_bins, cfg.token_offset, cfg.gripper_close_positive)


def robosuite_config(cfg: Config, cameras: bool = True):
    from robots.env import RobosuiteConfig

    return RobosuiteConfig(task=cfg.env, cameras=(cfg.camera,) if cameras else (), image_size=cfg.image_size,
                           max_steps=cfg.max_steps, instruction=cfg.instruction)


def _expert(cfg: Config):
    from robots.experts import SPECS, PickPlaceExpert

    if cfg.env not in SPECS:
        raise ValueError(f"invalid config value for 'task.env': no scripted expert for {cfg.env!r} "
                         f"(have {sorted(k for k in SPECS if '/' not in k)}); set task.expert_labels=false")
    return PickPlaceExpert(SPECS[cfg.env])


# Idle simulators by config. Building a robosuite env takes ~2 s; a training step creates a fresh
# env per prompt (and copies per group member), so reuse them. reset(seed) fully re-seeds the scene.
# Idle simulators are never closed: closing a robosuite env frees EGL state that the other live envs of
# the process render with, and their camera images change (measured: pixel differences up to 140 on the
# same state, enough to take the BC policy from 100% to 0% success). So the pool grows to the largest
# number of envs alive at once and lives as long as the process.
_IDLE: dict[str, list] = {}


def _acquire(rcfg):
    idle = _IDLE.get(repr(rcfg))
    if idle:
        return idle.pop()
    from robots.env import make_env

    return make_env(rcfg)


def _release(sim) -> None:
    _IDLE.setdefault(repr(sim.cfg), []).append(sim)


def action_constraint(tok: ActionTokenizer, eos_ids) -> list:
    """Allowed ids per response position (Observation.allowed_ids): `tok.dim` action tokens, then EOS."""
    return [range(tok.offset, tok.offset + tok.n_bins)] * tok.dim + [sorted(eos_ids)]


def vla_observation(image, instruction: str, info: dict | None = None, allowed_ids: list | None = None) -> Observation:
    """The VLA prompt on one camera frame (an HxWx3 uint8 array or a PIL image)."""
    messages = [{"role": "user", "content": [{"type": "image"},
                                             {"type": "text", "text": PROMPT.format(instruction=instruction)}]}]
    img = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image, dtype=np.uint8))
    return Observation(messages=messages, images=[img], info={"instruction": instruction, **(info or {})},
                       allowed_ids=allowed_ids)


def observation(cfg: Config, image, instruction: str, info: dict) -> Observation:
    """The task's observation; with `cfg.constrained` only the 7 action tokens, then EOS, can be sampled."""
    allowed = None
    if cfg.constrained:
        allowed = action_constraint(action_tokenizer(cfg), [hf_tokenizer(cfg.tokenizer_path).eos_token_id])
    return vla_observation(image, instruction, info, allowed)


class ActionTokenEnv:
    """Env side of an action-token policy: subclasses set `tok` / `hf_tok` and implement
    `_act(action or None)` (None: the response was not a valid action)."""

    tok: ActionTokenizer
    hf_tok: object

    def step(self, response_text: str) -> StepResult:
        """Act on a response given as text (re-tokenised; ambiguous spellings count as invalid)."""
        ids = text_to_ids(response_text, self.hf_tok, self.tok)
        return self._act(None if ids is None else self.tok.decode(ids))

    def step_ids(self, response_ids: list[int]) -> StepResult:
        """Act on the sampled token ids (what run_episodes uses): exact, no re-tokenisation."""
        return self._act(response_to_action(response_ids, self.tok, {self.hf_tok.eos_token_id}))

    def _act(self, action: np.ndarray | None) -> StepResult:
        raise NotImplementedError


class RobotManipulationEnv(ActionTokenEnv):
    """One episode of a robosuite task; the simulator is built on the first reset."""

    def __init__(self, cfg: Config, split: str):
        self.cfg, self.split = cfg, split
        self.tok = action_tokenizer(cfg)
        self.hf_tok = hf_tokenizer(cfg.tokenizer_path)
        self._sim = None
        self._expert = _expert(cfg) if cfg.expert_labels else None
        self._seed = 0

    def _build(self):
        if self._sim is None:
            self._sim = _acquire(robosuite_config(self.cfg))
        return self._sim

    def reset(self, seed: int) -> Observation:
        sim = self._build()
        self._seed = seed
        obs = sim.reset(seed=seed + (EVAL_SEED_OFFSET if self.split == "eval" else 0))
        if self._expert is not None:
            self._expert.reset()
            k = random.Random(seed * 2 + 1).randint(0, self.cfg.expert_prefix_max) if self.cfg.expert_prefix_max else 0
            for _ in range(k):
                obs, _, term, trunc, _ = sim.step(self._expert_action())
                if term or trunc:  # the expert finished early: start from here
                    break
        return self._observation(obs)

    def _act(self, action: np.ndarray | None) -> StepResult:
        sim = self._sim
        if sim is None:
            raise RuntimeError("step() before reset()")
        invalid = action is None
        action = np.zeros(7) if invalid else action
        obs, _, term, trunc, info = sim.step(action)
        rewards = {"success": 1.0 if term else 0.0, "invalid_action": float(self.cfg.invalid_penalty) if invalid else 0.0}
        out_info = {"reason": "invalid_action" if invalid else None, "success": bool(term), "step": info["step"],
                    "action": [float(v) for v in action]}
        done = bool(term)
        if done or trunc:  # the frame after the last action (a dense reward scores the last transition: dense.py)
            out_info["next_frame"] = np.array(obs["images"][self.cfg.camera], dtype=np.uint8)
        result = StepResult(None if done else self._observation(obs), rewards, done, truncated=bool(trunc) and not done,
                            info=out_info)
        if done or trunc:
            self.close()  # the simulator goes back to the pool for the next episode
        return result

    def _expert_action(self) -> np.ndarray:
        from robots.experts import expert_view

        return self._expert.act(expert_view(self._sim))

    def _observation(self, obs: dict) -> Observation:
        info = {"step": self._sim._t, "seed": self._seed}
        if self._expert is not None:
            info["expert_action"] = [float(v) for v in self._expert_action()]
        return observation(self.cfg, obs["images"][self.cfg.camera], obs["instruction"], info)

    def __deepcopy__(self, memo):
        """A second simulator in the same state (run_episodes copies an env after reset for each group member)."""
        import copy

        new = RobotManipulationEnv(self.cfg, self.split)
        new._seed = self._seed
        new._expert = copy.deepcopy(self._expert, memo)
        if self._sim is not None:
            sim = new._build()
            sim.reset(seed=self._seed + (EVAL_SEED_OFFSET if self.split == "eval" else 0), init_state=self._sim.get_state())
            sim._t = self._sim._t
        return new

    def close(self) -> None:
        """Hand the simulator back to the pool (a later env reuses it instead of building one)."""
        sim, self._sim = self._sim, None
        if sim is not None:
            _release(sim)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


def reference_ids(obs: Observation, cfg: Config) -> list[int]:
    """The expert's action as the 7 action token ids (vlrl/sft.py prefers ids over text when a task has them)."""
    if "expert_action" not in obs.info:
        raise ValueError("observation has no expert action: set task.expert_labels=true")
    return action_tokenizer(cfg).encode(obs.info["expert_action"])


def reference_answer(obs: Observation, cfg: Config) -> str:
    """The expert's action for this observation as action-token text (behaviour cloning via vlrl/sft.py)."""
    if "expert_action" not in obs.info:
        raise ValueError("observation has no expert action: set task.expert_labels=true")
    return action_to_text(obs.info["expert_action"], hf_tokenizer(cfg.tokenizer_path), action_tokenizer(cfg))


def demo_action_stats(cfg: Config, episodes: int = 20, seed: int = 0) -> ActionStats:
    """q01/q99 of the scripted expert's actions over `episodes` demos (no cameras: fast)."""
    from robots.env import make_env
    from robots.experts import expert_view

    sim, expert, actions = make_env(robosuite_config(cfg, cameras=False)), _expert(cfg), []
    try:
        for i in range(episodes):
            sim.reset(seed=seed + i)
            expert.reset()
            while True:
                a = expert.act(expert_view(sim))
                actions.append(a)
                _, _, term, trunc, _ = sim.step(a)
                if term or trunc:
                    break
    finally:
        sim.close()
    return ActionStats.from_actions(np.asarray(actions))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="action statistics (q01/q99) from scripted expert demos")
    p.add_argument("--env", default="Lift")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--max-steps", type=int, default=250)
    p.add_argument("--out", required=True, help="JSON file or a checkpoint directory")
    a = p.parse_args(argv)
    stats = demo_action_stats(Config(env=a.env, max_steps=a.max_steps), a.episodes)
    print(f"{stats.count} actions -> {stats.save(a.out)}")


if __name__ == "__main__":
    main()
