"""Run logging: JSONL always, TensorBoard / wandb on request, sample tables, and a reward-curve PNG."""

from __future__ import annotations

import json
import math
import os
import resource
from collections import Counter
from pathlib import Path

import torch

from vlrl.episode import Episode, turn_reward


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
        if not self.enabled:
            return
        with open(self.dir / "samples.jsonl", "a") as f:
            for row in rows:
                f.write(json.dumps({"step": step, **row}) + "\n")

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


def trailing_mean(values: list[float], window: int) -> list[float]:
    """Mean of the last `window` values at each position (fewer at the start): [N] -> [N]."""
    if window < 1:
        raise ValueError(f"trailing_mean: window must be >= 1, got {window}")
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def _faded(hex_color: str, keep: float = 0.3) -> str:
    """The colour mixed with white (only `keep` of it left)."""
    rgb = [int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(255 - keep * (255 - c)):02x}" for c in rgb)


def plot_curves(records: list[dict], keys: list[str], out: str | os.PathLike, title: str = "") -> bool:
    """Line chart of metrics over steps as a PNG (PIL only). Returns False when there is nothing to plot.

    A series longer than 60 points is drawn faded, with its trailing mean over len/30 points on
    top: per-step RL rewards are too noisy to show a trend by themselves.
    """
    from PIL import Image, ImageDraw

    series = []
    for key in keys:
        pts = [(r["step"], r[key]) for r in records if isinstance(r.get(key), (int, float))]
        if pts:
            series.append((key, pts))
    if not series:
        return False
    W, H, pad = 720, 420, 56
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1

    def to_px(x, y):
        return pad + (x - x0) / (x1 - x0) * (W - 2 * pad), H - pad - (y - y0) / (y1 - y0) * (H - 2 * pad)

    d.rectangle([pad, pad, W - pad, H - pad], outline="black")
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        _, py = to_px(x0, yv)
        d.line([pad - 4, py, pad, py], fill="black")
        d.text((4, py - 6), f"{yv:.3g}", fill="black")
        xv = x0 + (x1 - x0) * i / 4
        px, _ = to_px(xv, y0)
        d.line([px, H - pad, px, H - pad + 4], fill="black")
        d.text((px - 10, H - pad + 8), f"{xv:.0f}", fill="black")
    d.text((W // 2 - 20, H - 20), "step", fill="black")
    d.text((pad, 10), title, fill="black")
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    for i, (key, pts) in enumerate(series):
        c = colors[i % len(colors)]
        label = key
        if len(pts) > 60:
            window = len(pts) // 30
            d.line([to_px(x, y) for x, y in pts], fill=_faded(c), width=1)
            pts = list(zip([x for x, _ in pts], trailing_mean([y for _, y in pts], window)))
            label = f"{key} (mean of last {window})"
        d.line([to_px(x, y) for x, y in pts], fill=c, width=2)
        d.text((W - pad - 260, pad + 6 + 14 * i), label, fill=c)
    img.save(out)
    return True
