"""Training curves as PNG with matplotlib (headless Agg backend): one panel per quantity, each with a y label, a
grid, matplotlib's round ticks, and the noisy per-step values drawn faded under their trailing mean."""

from __future__ import annotations

import os

SMOOTH_FROM = 20  # series with at least this many points get a trailing mean on top
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


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


def smoothing_window(n: int) -> int:
    """Points in the trailing mean of an n-point series: about a twentieth of the run (1 = no smoothing)."""
    return max(1, n // 20) if n >= SMOOTH_FROM else 1


def _series(records: list[dict], key: str) -> tuple[list[float], list[float]]:
    pts = [(r["step"], float(r[key])) for r in records if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
    return [x for x, _ in pts], [y for _, y in pts]


def curve_figure(records: list[dict], panels: list[tuple[str, list[str]]], title: str = ""):
    """A matplotlib Figure: one panel per `(y label, [metric keys])` that has data, steps on x. None when no
    panel has data. Panels share the x axis; a key with one point is drawn as a marker."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state
    from matplotlib.ticker import MaxNLocator


    shown = [(label, keys) for label, keys in panels if any(_series(records, k)[0] for k in keys)]
    if not shown:
        return None
    fig = Figure(figsize=(6.4 * len(shown), 4.2), layout="constrained")
    axes = fig.subplots(1, len(shown), squeeze=False)[0]
    for ax, (label, keys) in zip(axes, shown):
        for i, key in enumerate(keys):
            xs, ys = _series(records, key)
            if not xs:
                continue
            color = COLORS[i % len(COLORS)]
            window = smoothing_window(len(xs))
            if window > 1:
                ax.plot(xs, ys, color=color, alpha=0.25, linewidth=1)
                ax.plot(xs, trailing_mean(ys, window), color=color, linewidth=2, label=f"{key} (mean of last {window} points)")
            else:
                ax.plot(xs, ys, color=color, linewidth=2, marker="o" if len(xs) < SMOOTH_FROM else None, label=key)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.4)
        ax.legend(loc="best", fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def plot_curves(records: list[dict], keys: list[str], out: str | os.PathLike, title: str = "",
                panels: list[tuple[str, list[str]]] | None = None) -> bool:
    """Write the curves of `records` (metrics.jsonl rows) to the PNG `out`: `panels` as in curve_figure, or one
    panel of `keys`. Returns False (nothing written) when there is nothing to plot."""
    fig = curve_figure(records, panels if panels is not None else [(", ".join(keys), keys)], title)
    if fig is None:
        return False
    fig.savefig(out, dpi=100)
    return True
