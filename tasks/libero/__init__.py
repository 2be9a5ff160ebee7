"""LIBERO evaluation (and rollouts) of VLA policies under the official OpenVLA / VLA-RL protocol.

    python vlrl/evaluate.py task=libero task.suite=libero_spatial model.path=CKPT task.stats_path=STATS \
        rollout.max_turns=220

One episode = one trial: the package's fixed init states in order, 10 no-op wait steps, at most the
suite's step limit; the report has per-task and per-suite success rates (see env.py and README.md).
The protocol constants come from robots/libero_eval.py and robots/libero_env.py.

Task contract (imported by the core through `Config.module`): Config, make_env, num_examples, report,
markdown, required_max_turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from robots.env import FLIPS
from robots.libero_env import SUITES
from robots.libero_eval import LiberoEvalConfig

from .env import POOL, LiberoTaskEnv, allowed_ids, check_trials, eval_task_ids, locate, max_steps, task_info

__all__ = ["Config", "LiberoTaskEnv", "POOL", "allowed_ids", "locate", "make_env", "markdown", "num_examples",
           "report", "required_max_turns", "eval_task_ids"]

_PROTOCOL = LiberoEvalConfig()  # the official protocol's defaults (trials, wait steps, reset seed)
CAMERAS = ("agentview", "robot0_eye_in_hand")


@dataclass
class Config:
    name: str = "libero"  # task name (run names, reports)
    module: str = "tasks.libero"  # the task module the core imports
    suite: str = "libero_spatial"  # libero_spatial | libero_object | libero_goal | libero_10 | libero_90
    task_ids: list[int] = field(default_factory=list)  # task indices within the suite, in order; [] = all tasks
    trials_per_task: int = _PROTOCOL.num_trials  # trials per task; trial k starts from fixed init state k (official: 50)
    camera: str = "agentview"  # camera shown to the policy: agentview | robot0_eye_in_hand
    render_size: int = _PROTOCOL.image_size  # camera resolution rendered by LIBERO (OpenVLA renders 256)
    image_size: int = 224  # image given to the policy (resized from render_size; OpenVLA: 224)
    flip: str = "rot180"  # image orientation: rot180 (what OpenVLA's LIBERO data and eval use) | vertical (up is up) | none
    tokenizer_path: str = "assets/tiny-qwen2.5-vl"  # tokenizer of the POLICY model: maps action ids <-> text
    n_bins: int = 256  # action bins per dimension
    token_offset: int | None = None  # id of bin 0; null = the last n_bins ids of the tokenizer
    gripper_close_positive: bool = True  # the policy's gripper convention (+1 closes, as LIBERO/robosuite)
    stats_path: str | None = None  # action_stats.json (q01/q99) the policy was trained with; null = identity ([-1, 1])
    num_wait_steps: int = _PROTOCOL.num_warmup_steps  # no-op steps after each reset (objects settle), not counted (official: 10)
    max_steps: int | None = None  # policy steps per episode; null = the suite's official limit (spatial 220 ... libero_10 520)
    env_seed: int = _PROTOCOL.seed  # seed passed to every LIBERO reset (OpenVLA's 7; the init state fixes the scene)
    env_cache_size: int = 32  # idle LIBERO simulators kept per process for reuse (>= eval.batch_size avoids rebuilds)

    def __post_init__(self):
        def check(cond: bool, name: str, msg: str) -> None:
            if not cond:
                raise ValueError(f"invalid config value for 'task.{name}': {msg}")

        check(self.suite in SUITES, "suite", f"{self.suite!r} is not one of {list(SUITES)}")
        check(all(i >= 0 for i in self.task_ids), "task_ids", f"{list(self.task_ids)}: must be >= 0")
        check(len(set(self.task_ids)) == len(self.task_ids), "task_ids", f"{list(self.task_ids)}: repeated ids")
        check(self.trials_per_task >= 1, "trials_per_task", "must be >= 1")
        check(self.camera in CAMERAS, "camera", f"{self.camera!r} is not one of {list(CAMERAS)}")
        check(self.render_size >= 16, "render_size", "must be >= 16")
        check(self.image_size >= 28, "image_size", "must be >= 28")
        check(self.flip in FLIPS, "flip", f"{self.flip!r} is not one of {list(FLIPS)}")
        check(self.n_bins >= 2, "n_bins", "must be >= 2")
        check(self.token_offset is None or self.token_offset >= 0, "token_offset", "must be >= 0 or null")
        check(self.num_wait_steps >= 0, "num_wait_steps", "must be >= 0")
        check(self.max_steps is None or self.max_steps >= 1, "max_steps", "must be >= 1 or null")
        check(self.env_cache_size >= 0, "env_cache_size", "must be >= 0")


def make_env(cfg: Config, split: str = "eval") -> LiberoTaskEnv:
    """An env over seeds: (task, trial) from the shipped init states; split "train": fresh placements by seed."""
    return LiberoTaskEnv(cfg, split)


def num_examples(cfg: Config, split: str = "eval") -> int | None:
    """Evaluated tasks x trials_per_task (seeds 0..n-1 are the trials in order); None for the train split, whose
    placements are drawn from any seed."""
    if split == "train":
        return None
    check_trials(cfg)
    return len(eval_task_ids(cfg)) * cfg.trials_per_task


def required_max_turns(cfg: Config) -> int:
    """rollout.max_turns must be at least the episode's step limit, or episodes are cut short of the protocol."""
    return max_steps(cfg)


def report(episodes, cfg: Config) -> dict:
    """Per-task success (with the task's instruction), per-suite success and overall, in evaluation order.

    The shape follows robots/libero_eval.py's report: report["suites"][suite]["tasks"][i].
    """
    per: dict[int, dict] = {}
    for tid in eval_task_ids(cfg):
        name, language = task_info(cfg, tid)
        per[tid] = {"task_id": tid, "name": name, "instruction": language, "trials": 0, "successes": 0,
                    "success_rate": 0.0, "init_states": [], "mean_steps": 0.0, "invalid_action_rate": 0.0}
    steps: dict[int, list[int]] = {tid: [] for tid in per}
    invalid: dict[int, int] = {tid: 0 for tid in per}
    for ep in sorted(episodes, key=lambda e: e.seed):
        tid, trial = locate(cfg, ep.seed)
        info = ep.turns[0].observation.info if ep.turns else {}
        if info.get("init_state") == "random":  # a train-split episode: its task and its placement's seed
            tid, trial = info["task_id"], f"random:{ep.seed}"
        success = any(t.rewards.get("success") for t in ep.turns)
        entry = per[tid]
        entry["trials"] += 1
        entry["successes"] += int(success)
        entry["init_states"].append(trial)
        steps[tid].append(len(ep.turns))
        invalid[tid] += sum(t.info.get("reason") == "invalid_action" for t in ep.turns)
    for tid, entry in per.items():
        n = entry["trials"]
        entry["success_rate"] = entry["successes"] / n if n else 0.0
        entry["mean_steps"] = sum(steps[tid]) / n if n else 0.0
        entry["invalid_action_rate"] = invalid[tid] / max(sum(steps[tid]), 1)
    tasks = [e for e in per.values() if e["trials"]]
    trials = sum(e["trials"] for e in tasks)
    successes = sum(e["successes"] for e in tasks)
    all_steps = sum(sum(s) for s in steps.values())
    rate = successes / trials if trials else 0.0
    return {
        "overall": rate, "success_rate": rate, "count": trials, "successes": successes,
        "mean_steps": all_steps / trials if trials else 0.0,
        "invalid_action_rate": sum(invalid.values()) / max(all_steps, 1),
        "breakdown": {f"{cfg.suite}/task_{e['task_id']}": e["success_rate"] for e in tasks},
        "suites": {cfg.suite: {"success_rate": rate, "trials": trials, "successes": successes, "tasks": tasks}},
        "protocol": {"name": "openvla-libero", "suite": cfg.suite, "trials_per_task": cfg.trials_per_task,
                     "num_wait_steps": cfg.num_wait_steps, "max_steps": max_steps(cfg), "env_seed": cfg.env_seed,
                     "camera": cfg.camera, "render_size": cfg.render_size, "image_size": cfg.image_size, "flip": cfg.flip},
    }


def markdown(rep: dict, cfg: Config) -> str:
    """Per-task rows and one row per suite, as a Markdown table."""
    lines = ["| suite | task | instruction | success | trials |", "|---|---|---|---|---|"]
    for suite, s in rep["suites"].items():
        for t in s["tasks"]:
            lines.append(f"| {suite} | {t['task_id']} | {t['instruction']} | {100 * t['success_rate']:.1f}% "
                         f"({t['successes']}/{t['trials']}) | {t['trials']} |")
        lines.append(f"| **{suite}** | all ({len(s['tasks'])} tasks) | | **{100 * s['success_rate']:.1f}%** "
                     f"({s['successes']}/{s['trials']}) | {s['trials']} |")
    if len(rep["suites"]) > 1:
        lines.append(f"| **overall** | | | **{100 * rep['overall']:.1f}%** ({rep['successes']}/{rep['count']}) | {rep['count']} |")
    p = rep.get("protocol", {})
    if p:
        lines.append("")
        lines.append(f"Protocol: {p['trials_per_task']} trials per task from the fixed init states in order, "
                     f"{p['num_wait_steps']} no-op wait steps, at most {p['max_steps']} steps per trial.")
    return "\n".join(lines) + "\n"
