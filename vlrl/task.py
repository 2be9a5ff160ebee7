"""The task contract: what a task folder provides, and the one adapter the core reaches it through.

A task is a Python module (a folder with `__init__.py`, or one `.py` file) named by `task.module`:
a dotted name (`tasks.gui_grounding`) or a path (`my_tasks/counting`, its YAML `task.yaml` beside it).
`tasks/_template/` is a complete, minimal example to copy.

Signature convention: every hook takes the task's config as its LAST argument, `cfg` (an instance of
the task's `Config`). The training loop (vlrl/train.py), the evaluator (vlrl/evaluate.py) and the
warm start (vlrl/sft.py) call tasks only through `LoadedTask`, which fills in the defaults of the
optional hooks, so no core file probes a task with `hasattr`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from vlrl.episode import Env, Episode, Observation

REQUIRED = ("Config", "make_env", "num_examples", "report")
OPTIONAL = ("sample_weights", "episode_success", "score_episodes", "post_rollout", "reference_answer", "reference_ids",
            "markdown", "dump_examples", "required_max_turns", "roles", "role_schedule")
CONFIG_FIELDS = ("name", "module")  # every task Config has these: the name in logs, the module to import
REPORT_KEYS = ("overall", "count", "skipped", "breakdown")  # one evaluation report schema for every task


@runtime_checkable
class Task(Protocol):
    """What a task module defines. Required: `Config`, `make_env`, `num_examples`, `report`; the rest is optional."""

    Config: type
    """A dataclass with at least `name: str` and `module: str`; one help comment per field; invalid values
    raise ValueError naming the field (`invalid config value for 'task.size': ...`)."""

    def make_env(self, cfg: Any, split: str) -> Env:
        """A fresh env for `split` ("train" or "eval"); `reset(seed)` gives the same observation for the same seed."""

    def num_examples(self, cfg: Any, split: str) -> int | None:
        """How many examples `split` holds, or None when the task generates them without end."""

    def report(self, episodes: list[Episode], cfg: Any) -> dict:
        """Evaluation report of greedy episodes: `overall` (the headline metric), `count` (episodes scored),
        `breakdown` (dict of sub-groups), optionally `skipped` ({"count": n, "reasons": {reason: n}}) for
        episodes the task could not score; the evaluator adds the samples that could not even be loaded."""

    # ---- optional hooks (LoadedTask supplies the default named in each docstring) ----
    def sample_weights(self, group: list[Episode], cfg: Any) -> list[float]:
        """Loss weight per episode of one group of G. Default: `observation.info["sample_weight"]`, else 1."""

    def episode_success(self, episode: Episode, cfg: Any) -> float:
        """1.0 when the episode succeeded (seed curriculum, logs). Default: total reward > 0."""

    def score_episodes(self, episodes: list[Episode], cfg: Any) -> None:
        """Batched rewards added in place after each rollout (e.g. a learned reward model). Default: nothing."""

    def post_rollout(self, episodes: list[Episode], generate: Callable, cfg: Any) -> dict | None:
        """After each training rollout: group-level rewards added in place, optionally from extra samples
        `generate(observations, n) -> [[Sample]]` that are never trained on (e.g. GRPO-TA's perturbed
        copies); returns metrics to log (or None). Default: nothing."""

    def reference_answer(self, observation: Observation, cfg: Any) -> str:
        """The target text for supervised warm starts (vlrl/sft.py). Default: none (sft refuses the task)."""

    def reference_ids(self, observation: Observation, cfg: Any) -> list[int]:
        """The target as token ids, when the answer is tokens (VLA actions); preferred over reference_answer."""

    def markdown(self, report: dict, cfg: Any) -> str:
        """The report as Markdown (written beside the JSON). Default: a generic table of its numbers."""

    def dump_examples(self, episodes: list[Episode], out_dir: Path, cfg: Any) -> list[str]:
        """Annotated examples for a person to look at (`eval.dump_images`). Default: nothing written."""

    def required_max_turns(self, cfg: Any) -> int:
        """The most turns an episode may take; the evaluator refuses a smaller rollout.max_turns. Default: 1."""

    def roles(self, cfg: Any) -> list[str]:
        """The role names its observations carry (`Observation.role`), for algo.advantage=role. Default:
        none (training with algo.advantage=role refuses the task)."""

    def role_schedule(self, cfg: Any) -> Any:
        """A stateful object for multi-role training (`RoleSchedule` below), made once per run. Default: None
        (every role is trained, no extra metrics)."""


@runtime_checkable
class RoleSchedule(Protocol):
    """Which roles receive gradients at a step, and the task's own per-step metrics (win rates, ...).

    Turns of the roles not trained at a step are still played (they shape the others' rewards and the
    baselines) but become no training rows. Its state is saved in checkpoints (plain Python values)."""

    def trained_roles(self, step: int) -> list[str] | None:
        """The roles trained at `step` (None: all)."""

    def observe(self, step: int, episodes: list[Episode], out_dir: str | None) -> dict[str, float]:
        """Update the state from the step's episodes (e.g. an adaptive switch); metrics for the loggers.
        `out_dir`: the run's folder on the main process (for the task's own files, e.g. a game viewer), else None."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class TaskError(ValueError):
    """A task module that breaks the contract (the message names the module and the member)."""


@dataclasses.dataclass
class LoadedTask:
    """A task module behind the contract: required members checked, optional hooks defaulted."""

    module: Any
    hooks: dict[str, Callable] = dataclasses.field(default_factory=dict)

    @property
    def Config(self) -> type:  # noqa: N802 - the contract's name
        return self.module.Config

    @property
    def name(self) -> str:
        return getattr(self.module, "__name__", "?")

    def make_env(self, cfg, split: str) -> Env:
        return self.module.make_env(cfg, split)

    def num_examples(self, cfg, split: str) -> int | None:
        return self.module.num_examples(cfg, split)

    def report(self, episodes: list[Episode], cfg, skipped: dict | None = None) -> dict:
        """The task's report with `skipped` merged from the task's own count and `skipped` (samples that
        never became episodes: unreadable inputs); refuses a report without the schema's keys."""
        rep = self.module.report(episodes, cfg)
        rep["skipped"] = merge_skipped(rep.get("skipped"), skipped)
        missing = [k for k in REPORT_KEYS if k not in rep]
        if missing:
            raise TaskError(f"task {self.name!r}: report() returned no {missing} (every report has {list(REPORT_KEYS)})")
        return rep

    def sample_weights(self, group: list[Episode], cfg) -> list[float]:
        if "sample_weights" in self.hooks:
            return [float(w) for w in self.hooks["sample_weights"](group, cfg)]
        return [float(ep.turns[0].observation.info.get("sample_weight", 1.0)) if ep.turns else 1.0 for ep in group]

    def episode_success(self, episode: Episode, cfg) -> float:
        if "episode_success" in self.hooks:
            return float(self.hooks["episode_success"](episode, cfg))
        r = episode.total_reward()
        return float(r == r and r > 0)

    def score_episodes(self, episodes: list[Episode], cfg) -> None:
        if "score_episodes" in self.hooks:
            self.hooks["score_episodes"](episodes, cfg)

    def post_rollout(self, episodes: list[Episode], generate: Callable, cfg) -> dict:
        if "post_rollout" in self.hooks:
            return dict(self.hooks["post_rollout"](episodes, generate, cfg) or {})
        return {}

    @property
    def can_imitate(self) -> bool:
        """Does the task give reference answers (needed by the supervised warm start)?"""
        return "reference_ids" in self.hooks or "reference_answer" in self.hooks

    def reference_ids(self, observation: Observation, cfg, tokenizer) -> list[int]:
        """Target token ids of `observation`, EOS appended: the task's ids, else its tokenised text."""
        if "reference_ids" in self.hooks:
            return list(self.hooks["reference_ids"](observation, cfg)) + [tokenizer.eos_token_id]
        if "reference_answer" not in self.hooks:
            raise TaskError(f"task {self.name!r} has no reference_answer(observation, cfg): nothing to imitate")
        text = self.hooks["reference_answer"](observation, cfg) + tokenizer.eos_token
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def markdown(self, report: dict, cfg) -> str:
        if "markdown" in self.hooks:
            return self.hooks["markdown"](report, cfg)
        return generic_markdown(report)

    def dump_examples(self, episodes: list[Episode], out_dir: Path, cfg) -> list[str]:
        return self.hooks["dump_examples"](episodes, out_dir, cfg) if "dump_examples" in self.hooks else []

    def required_max_turns(self, cfg) -> int:
        return int(self.hooks["required_max_turns"](cfg)) if "required_max_turns" in self.hooks else 1

    def roles(self, cfg) -> list[str]:
        if "roles" not in self.hooks:
            raise TaskError(f"task {self.name!r} declares no roles (hook roles(cfg)): algo.advantage=role needs them")
        return [str(r) for r in self.hooks["roles"](cfg)]

    def role_schedule(self, cfg):
        return self.hooks["role_schedule"](cfg) if "role_schedule" in self.hooks else None

    def __getattr__(self, name: str):
        # Task-specific helpers (e.g. a task's own CLI utilities) stay reachable; hooks go through the methods.
        return getattr(self.module, name)


def load_task(module: Any) -> LoadedTask:
    """Check `module` against the contract and wrap it. A missing required member fails here, naming it."""
    where = getattr(module, "__name__", repr(module))
    missing = [m for m in REQUIRED if not hasattr(module, m)]  # the one place a task is probed
    if missing:
        raise TaskError(f"task module {where!r} is missing {missing}: every task defines {list(REQUIRED)} "
                        "(see vlrl/task.py and tasks/_template/)")
    for m in REQUIRED[1:]:
        if not callable(getattr(module, m)):
            raise TaskError(f"task module {where!r}: {m} must be a function")
    config = module.Config
    if not dataclasses.is_dataclass(config):
        raise TaskError(f"task module {where!r}: Config must be a dataclass")
    names = {f.name for f in dataclasses.fields(config)}
    absent = [f for f in CONFIG_FIELDS if f not in names]
    if absent:
        raise TaskError(f"task module {where!r}: Config has no field(s) {absent} (every task Config has {list(CONFIG_FIELDS)})")
    hooks = {h: getattr(module, h) for h in OPTIONAL if callable(getattr(module, h, None))}
    return LoadedTask(module, hooks)


def merge_skipped(*parts: dict | None) -> dict:
    """Sum `{"count": n, "reasons": {reason: n}}` records; None parts count as nothing skipped."""
    reasons: dict[str, int] = {}
    count = 0
    for part in parts:
        if not part:
            continue
        count += int(part.get("count", 0))
        for reason, n in (part.get("reasons") or {}).items():
            reasons[reason] = reasons.get(reason, 0) + int(n)
    return {"count": count, "reasons": reasons}


def generic_markdown(report: dict) -> str:
    """A two-column table of the report's top-level numbers and its breakdown's numbers."""
    lines = ["| metric | value |", "|---|---|"]
    for key, value in report.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lines.append(f"| {key} | {value:.4g} |")
    for group, value in (report.get("breakdown") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lines.append(f"| {group} | {value:.4g} |")
        elif isinstance(value, dict):
            nums = ", ".join(f"{k} {v:.4g}" for k, v in value.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
            lines.append(f"| {group} | {nums} |")
    skipped = report.get("skipped") or {}
    lines.append(f"| skipped | {skipped.get('count', 0)} {skipped.get('reasons', {}) or ''} |")
    return "\n".join(lines) + "\n"
