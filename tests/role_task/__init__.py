"""A two-player toy game for the core's multi-role tests (not a product task).

Players "a" and "b" alternate for `rounds` rounds on one solid-colour image; a "judge" observation is
then sampled `judge_samples` times in one turn (Observation.num_samples). Rewards per turn: "a" scores
the share of digits in its text, "b" the share of letters, the judge 1.0 for a non-empty answer.
The schedule trains the players on even steps and the judge on odd ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image

from vlrl.episode import Observation, StepResult

ROLES = ["a", "b", "judge"]


@dataclass
class Config:
    name: str = "role_toy"  # task name
    module: str = "tests/role_task"  # task folder
    rounds: int = 2  # turns per player
    judge_samples: int = 3  # samples of the final judge observation

    def __post_init__(self):
        if self.rounds < 1:
            raise ValueError("invalid config value for 'task.rounds': must be >= 1")


class RoleEnv:
    def __init__(self, cfg: Config):
        self.cfg, self.t, self.judged, self.seed = cfg, 0, 0, 0

    def reset(self, seed: int) -> Observation:
        self.t, self.judged, self.seed = 0, 0, seed
        return self._obs()

    def _obs(self) -> Observation:
        players = 2 * self.cfg.rounds
        role = "judge" if self.t >= players else ROLES[self.t % 2]
        text = f"seed {self.seed} turn {self.t} you are {role}"
        image = Image.new("RGB", (56, 56), (200, 40 * (self.seed % 5), 40))
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        return Observation(messages=messages, images=[image], role=role, info={"turn": self.t},
                           num_samples=self.cfg.judge_samples if role == "judge" else 1)

    def step(self, text: str) -> StepResult:
        chars = [c for c in text if not c.isspace()]
        if self.t >= 2 * self.cfg.rounds:
            self.judged += 1
            done = self.judged >= self.cfg.judge_samples
            return StepResult(None if done else self._obs(), {"judge": float(bool(chars))}, done)
        want = str.isdigit if self.t % 2 == 0 else str.isalpha
        score = sum(want(c) for c in chars) / len(chars) if chars else 0.0
        self.t += 1
        return StepResult(self._obs(), {"score": score}, False)


class Schedule:
    def __init__(self):
        self.seen = 0

    def trained_roles(self, step: int) -> list[str] | None:
        return ["a", "b"] if step % 2 == 0 else ["judge"]

    def observe(self, step: int, episodes, out_dir) -> dict[str, float]:
        self.seen += len(episodes)
        return {"game/episodes_seen": float(self.seen)}

    def state_dict(self) -> dict:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict) -> None:
        self.seen = int(state["seen"])


def make_env(cfg: Config, split: str) -> RoleEnv:
    return RoleEnv(cfg)


def num_examples(cfg: Config, split: str) -> int | None:
    return None


def report(episodes, cfg: Config) -> dict:
    return {"overall": 0.0, "count": len(episodes), "breakdown": {}}


def roles(cfg: Config) -> list[str]:
    return list(ROLES)


def role_schedule(cfg: Config) -> Schedule:
    return Schedule()
