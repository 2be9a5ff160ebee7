"""What a run prints for a person: a plain progress line every `trainer.log_every` steps when there is no progress
bar (stdout is not a terminal, e.g. a log file, or `trainer.progress=false`), and a summary at the end (first vs
last window of the headline metrics, wall time, every output file)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

# (metric key, short name) of the progress line and the summary, per entry point.
RL_KEYS = (("reward/mean", "reward"), ("success/rate", "success"), ("kl_mean", "kl"), ("entropy", "entropy"),
           ("loss", "loss"))
SFT_KEYS = (("loss", "loss"), ("token_acc", "token acc"), ("eval/overall", "eval"))


def show_bar(enabled: bool, stream=None) -> bool:
    """A live progress bar only on a terminal: in a log file it would leave just its last frame."""
    stream = sys.stdout if stream is None else stream
    return enabled and bool(getattr(stream, "isatty", lambda: False)())


def duration(seconds: float) -> str:
    """`3h02m`, `4m05s`, `12s`."""
    s = int(round(max(seconds, 0.0)))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def _fmt(v: float) -> str:
    return "nan" if isinstance(v, float) and math.isnan(v) else f"{v:.4g}"


def progress_line(done: int, total: int, metrics: dict, keys, elapsed_s: float, steps_run: int,
                  budget_left_s: float | None = None) -> str:
    """`step 5/100 reward 0.4121 success 0.375 ... | 2.10 s/step, ETA 3m20s`: the metrics of `keys` present in
    `metrics`; the pace is over the `steps_run` steps this process ran in `elapsed_s`. With a wall-clock budget
    (`trainer.max_minutes`, `budget_left_s` of it left) that ends the run first, the ETA is the budget's."""
    parts = [f"step {done}/{total}"]
    parts += [f"{name} {_fmt(metrics[k])}" for k, name in keys if isinstance(metrics.get(k), (int, float))]
    pace = elapsed_s / max(steps_run, 1)
    eta = pace * max(total - done, 0)
    if budget_left_s is not None and budget_left_s < eta:
        return " ".join(parts) + f" | {pace:.2f} s/step, ETA {duration(budget_left_s)} (time budget)"
    return " ".join(parts) + f" | {pace:.2f} s/step, ETA {duration(eta)}"


def window_means(records: list[dict], key: str, window: int) -> tuple[float, float, int] | None:
    """(mean of the first `window` values of `key`, mean of the last `window`, window used) over `records`, the
    window shrunk to half the values when there are few; None without values."""
    values = [float(r[key]) for r in records if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
              and math.isfinite(r[key])]
    if not values:
        return None
    w = max(1, min(window, len(values) // 2 or 1))
    return sum(values[:w]) / w, sum(values[-w:]) / w, w


def output_files(out_dir: str | Path) -> list[str]:
    """What a run folder holds, for a person: every file at its top level, and each folder (checkpoint
    directories one by one) as `name/`."""
    root = Path(out_dir)
    if not root.is_dir():
        return []
    out = []
    for p in sorted(root.iterdir()):
        if p.is_dir() and p.name == "checkpoints":
            out += [f"{q}/" for q in sorted(p.iterdir()) if q.is_dir()]
        else:
            out.append(f"{p}/" if p.is_dir() else str(p))
    return out


def run_summary(records: list[dict], keys, wall_s: float, steps_run: int, out_dir: str | Path,
                window: int = 10) -> str:
    """The end-of-run summary: steps and wall time, first vs last window of each key of `keys` with values in
    `records` (metrics.jsonl rows), and the run's files."""
    lines = [f"[vlrl] summary: {steps_run} steps in {duration(wall_s)}"
             + (f" ({wall_s / steps_run:.2f} s/step)" if steps_run else "")]
    for key, name in keys:
        got = window_means(records, key, window)
        if got is not None:
            first, last, w = got
            lines.append(f"  {name:<10} first {w}: {_fmt(first):>8}   last {w}: {_fmt(last):>8}   change {last - first:+.4g}")
    lines.append("  files:")
    lines += [f"    {f}" for f in output_files(out_dir)]
    return "\n".join(lines)
