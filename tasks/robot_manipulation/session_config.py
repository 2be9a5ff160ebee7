"""Configuration of a robot-in-the-loop session (`session.py`): bridge connection, episodes, interventions."""

from __future__ import annotations

from dataclasses import dataclass, field

from vlrl.actor_learner import ActorLearnerConfig
from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig

from .config import Config as TaskConfig

INTERVENTIONS = ("demo", "exclude")


@dataclass
class SessionConfig:
    """A robot-in-the-loop session: bridge connection, episodes, how interventions are used, and the vlrl configs."""

    uri: str = "ws://127.0.0.1:8765"  # the bridge server (wss:// with TLS)
    token_file: str | None = None  # file with the bridge token; None = $VLRL_BRIDGE_TOKEN
    cafile: str | None = None  # TLS: the server's certificate (self-signed robots)
    episodes: int = 10  # episodes to run (a dropped connection ends one)
    max_steps: int = 100  # turns (policy + human) before an episode ends
    episodes_per_update: int = 1  # finished episodes per learner update
    interventions: str = "demo"  # demo: train on human turns (behaviour cloning) | exclude: drop them
    demo_advantage: float = 1.0  # advantage of a human turn (its BC weight); > 0
    baseline_window: int = 16  # advantages: episode return against the returns of the last N episodes
    seed: int = 0  # episode i resets the robot with seed + i (simulators), and seeds torch
    reset: bool = True  # reset through the bridge at each episode start (False: people reset the scene)
    greedy: bool = False  # greedy actions (evaluation); RL samples
    poll_s: float = 0.05  # status polling period while an operator drives
    wait_human_s: float = 600.0  # give up an episode after a takeover / pause / e-stop lasts this long
    reconnect_attempts: int = 5  # reconnects after a dropped connection (and retries of a "busy" refusal)
    reconnect_wait_s: float = 0.5  # pause between reconnect attempts
    request_timeout_s: float = 30.0  # bridge request timeout
    out_dir: str | None = None  # save the final policy, action stats, episodes.jsonl, updates.jsonl here
    keep_images: bool = False  # keep each episode's camera frames and encodings after training on them (memory grows)
    task: TaskConfig = field(default_factory=lambda: TaskConfig(expert_labels=False))  # camera, action bins, stats
    model: ModelConfig = field(default_factory=ModelConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(max_new_tokens=8))
    trainer: TrainerConfig = field(default_factory=TrainerConfig)

    def __post_init__(self) -> None:
        def check(ok: bool, name: str, msg: str) -> None:
            if not ok:
                raise ValueError(f"invalid config value for '{name}': {msg}")

        check(self.interventions in INTERVENTIONS, "interventions", f"{self.interventions!r} is not one of {list(INTERVENTIONS)}")
        check(self.episodes >= 1, "episodes", "must be >= 1")
        check(self.max_steps >= 1, "max_steps", "must be >= 1")
        check(self.episodes_per_update >= 1, "episodes_per_update", "must be >= 1")
        check(self.demo_advantage > 0, "demo_advantage", "must be > 0")
        check(self.baseline_window >= 1, "baseline_window", "must be >= 1")
        check(self.rollout.max_new_tokens >= 8, "rollout.max_new_tokens", "must be >= 8 (7 action tokens + EOS)")

    def actor_learner(self) -> ActorLearnerConfig:
        """The core loop's settings (the session's own episodes are bounded by max_steps; see session.collect)."""
        return ActorLearnerConfig(episodes=self.episodes, episodes_per_update=self.episodes_per_update,
                                  baseline_window=self.baseline_window, seed=self.seed,
                                  greedy=self.greedy, out_dir=self.out_dir, keep_images=self.keep_images, model=self.model, algo=self.algo,
                                  rollout=self.rollout, trainer=self.trainer)
