"""Run logging: JSONL always, TensorBoard / wandb on request (scalars, and sample completions as a table), and the
curves' data (the PNGs are drawn by vlrl/plots.py)."""

from __future__ import annotations

import json
import math
import os
import resource
from collections import Counter
from pathlib import Path

import torch

from vlrl.episode import Episode, turn_reward
from vlrl.plots import plot_curves, trailing_mean  # noqa: F401  (re-exported: the curves are drawn by vlrl/plots.py)


def peak_memory_mb() -> float:
    """Peak memory of this process in MiB: CUDA peak allocated on GPU, else peak RSS."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """Peak resident memory (VmHWM) in MiB. Not ru_maxrss: Linux carries it across fork + exec, so a
    small child of a big parent would report the parent's peak."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def episode_metrics(episodes: list[Episode], group_size: int, weights: dict[str, float] | None) -> dict[str, float]:
    """Reward statistics of a batch: totals, per-sub-reward means, unscored counts, reasons, task diagnostics."""
    totals = [ep.total_reward(weights) for ep in episodes]
    scored = [t for t in totals if not math.isnan(t)]
    m: dict[str, float] = {
        "reward/mean": sum(scored) / len(scored) if scored else math.nan,
        "reward/unscored": float(len(totals) - len(scored)),
        "episodes": float(len(episodes)),
        "turns/mean": sum(len(ep.turns) for ep in episodes) / max(1, len(episodes)),
    }
    if len(scored) > 1:
        mean = m["reward/mean"]
        m["reward/std"] = math.sqrt(sum((t - mean) ** 2 for t in scored) / (len(scored) - 1))
    groups = [totals[i : i + group_size] for i in range(0, len(totals), group_size)]
    flat = sum(1 for g in groups if len({round(t, 9) for t in g if not math.isnan(t)}) <= 1)
    m["groups/frac_zero_std"] = flat / max(1, len(groups))

    sums: dict[str, list[float]] = {}
    reasons: Counter = Counter()
    lengths = []
    for ep in episodes:
        for turn in ep.turns:
            lengths.append(len(turn.response_ids))
            for name, value in turn.rewards.items():
                if value is not None:
                    sums.setdefault(f"reward/{name}", []).append(float(value))
            for key, value in turn.info.items():
                if key == "reason":
                    if value:
                        reasons[str(value)] += 1
                elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                    sums.setdefault(f"task/{key}", []).append(float(value))
                elif isinstance(value, bool):
                    sums.setdefault(f"task/{key}", []).append(float(value))
    for key, values in sums.items():
        m[key] = sum(values) / len(values)
    for reason, count in reasons.items():
        m[f"reason/{reason}"] = float(count)
    if lengths:
        m["response_length/mean"] = sum(lengths) / len(lengths)
        m["response_length/max"] = float(max(lengths))
    return m


def prompt_text(observation) -> str:
    """The last message of an observation as text (images as `<image>`)."""
    prompt = ""
    for msg in observation.messages:
        content = msg["content"]
        prompt = content if isinstance(content, str) else " ".join(c.get("text", f"<{c['type']}>") for c in content)
    return prompt


def sample_rows(episodes: list[Episode], n: int, weights: dict[str, float] | None) -> list[dict]:
    """A few prompt / response / reward rows for a person to read."""
    rows = []
    step = max(1, len(episodes) // max(1, n))
    for ep in episodes[::step][:n]:
        turn = ep.turns[0]
        rows.append(
            {
                "group": ep.group_id,
                "prompt": prompt_text(turn.observation)[-200:],
                "response": turn.response_text[:200],
                "reward": turn_reward(turn.rewards, weights),
                "rewards": {k: v for k, v in turn.rewards.items()},
            }
        )
    return rows


def sample_table(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Sample rows (dicts) -> (columns, cells as text): the keys of the first row, nested values as JSON."""
    columns = list(rows[0])
    cells = [[v if isinstance(v, str) else json.dumps(v) for v in (row.get(c) for c in columns)] for row in rows]
    return columns, cells


class RunLogger:
    """Writes metrics.jsonl (+ TensorBoard / wandb), samples.jsonl; only on the main process."""

    def __init__(self, output_dir: str, loggers: list[str], enabled: bool, config: dict | None = None, wandb_project: str = "vlrl"):
        self.enabled = enabled
        self.dir = Path(output_dir)
        self.tb = None
        self.wandb = None
        if not enabled:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        if "tensorboard" in loggers:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(self.dir / "tensorboard"))
        if "wandb" in loggers:
            import wandb

            self.wandb = wandb.init(project=wandb_project, config=config, dir=str(self.dir))

    def truncate_after(self, step: int) -> None:
        """On resume: drop records of steps after the checkpoint, so the files hold one history."""
        if not self.enabled:
            return
        for name in ("metrics.jsonl", "samples.jsonl"):
            path = self.dir / name
            if path.exists():
                kept = [ln for ln in path.read_text().splitlines() if ln and json.loads(ln).get("step", 0) <= step]
                path.write_text("".join(ln + "\n" for ln in kept))

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        record = {"step": step, **{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}}
        with open(self.dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)) and math.isfinite(v):
                    self.tb.add_scalar(k, v, step)
        if self.wandb is not None:
            self.wandb.log(metrics, step=step)

    def log_samples(self, step: int, rows: list[dict]) -> None:
        """A few completions: samples.jsonl, and a table in TensorBoard (text, Markdown) and wandb (wandb.Table)."""
        if not self.enabled or not rows:
            return
        with open(self.dir / "samples.jsonl", "a") as f:
            for row in rows:
                f.write(json.dumps({"step": step, **row}) + "\n")
        columns, cells = sample_table(rows)
        if self.tb is not None:
            head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
            body = "".join("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in r) + " |\n" for r in cells)
            self.tb.add_text("samples", head + body, step)
        if self.wandb is not None:
            import wandb

            self.wandb.log({"samples": wandb.Table(columns=columns, data=cells)}, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def read_metrics(path: str | os.PathLike, keys: list[str] | None = None) -> list[dict]:
    """Records of a metrics.jsonl. With `keys`, each record keeps only `step` and those keys: the
    file is streamed, so plotting at every checkpoint does not hold the run's whole history in memory
    (which raised RSS in proportion to the run's length)."""
    path = Path(path)
    if not path.exists():
        return []
    wanted = None if keys is None else ("step", *keys)
    out = []
    with open(path) as f:
        for ln in f:
            if ln.strip():
                rec = json.loads(ln)
                out.append(rec if wanted is None else {k: rec[k] for k in wanted if k in rec})
    return out
