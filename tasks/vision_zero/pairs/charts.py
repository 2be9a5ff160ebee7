"""Chart pairs: a bar, line or pie chart of random data and the same chart with one or two changes.

A change is either a value (a category's number: its bar height, point or wedge, and the number
printed beside it) or a label (a category's name, replaced by a word the chart does not use). Layout
is fixed (axes rectangle, y range, colours by position), so a bar or line change moves only the
pixels of that category; in a pie every wedge depends on every value, so a value change moves them all.

The record names each change and the pixel box it can touch (the union, over both images, of the
extents of the artists that depend on it):

    {"generator": "chart", "seed", "kind": "bar" | "line" | "pie", "size": [W, H],
     "labels": [...], "values": [...], "modified_labels": [...], "modified_values": [...],
     "changes": [{"field": "value" | "label", "index": i, "old": ..., "new": ..., "box": [x0, y0, x1, y1]}]}

Rendering uses matplotlib's object API on an Agg canvas (no pyplot, no global figure state).
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tasks.vision_zero.pairs import Pair

CHART_KINDS = ("bar", "line", "pie")
WORDS = ("apple", "pear", "plum", "fig", "kiwi", "lime", "peach", "grape", "mango", "lemon", "melon",
         "cherry", "olive", "date", "guava", "berry")
COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")  # by position, same in both images
MIN_VALUE, MAX_VALUE = 1, 24  # y range is fixed from these, so changing one value never rescales the axes
MIN_STEP, MAX_STEP = 3, 8  # a changed value moves by this much: large enough to see at this size
DPI = 100
AXES_RECT = {"bar": (0.1, 0.16, 0.86, 0.74), "line": (0.1, 0.16, 0.86, 0.74),  # left, bottom, width, height
             "pie": (0.02, 0.02, 0.96, 0.96)}  # in figure fractions: a fixed layout
PAD = 2  # pixels added around each artist box: antialiasing spills past the exact extent


def _px_box(bbox, height: int) -> list[float]:
    """A matplotlib display bbox (origin bottom-left) as [x0, y0, x1, y1] from the top-left."""
    return [bbox.x0, height - bbox.y1, bbox.x1, height - bbox.y0]


def _union(boxes: list[list[float]], width: int, height: int) -> list[int]:
    """Integer box around all `boxes`, grown by PAD and clipped to the image."""
    x0 = min(b[0] for b in boxes) - PAD
    y0 = min(b[1] for b in boxes) - PAD
    x1 = max(b[2] for b in boxes) + PAD
    y1 = max(b[3] for b in boxes) + PAD
    return [max(0, math.floor(x0)), max(0, math.floor(y0)), min(width, math.ceil(x1)), min(height, math.ceil(y1))]


def render_chart(kind: str, labels: list[str], values: list[int], width: int = 320, height: int = 240
                 ) -> tuple[np.ndarray, dict[str, list[list[list[float]]]]]:
    """Draw one chart.

    Returns: (image [H, W, 3] uint8, extents) where extents["value"][i] / extents["label"][i] are the
    pixel boxes of what category i's value / label draws (unpadded floats, top-left origin).
    """
    if kind not in CHART_KINDS:
        raise ValueError(f"kind must be one of {CHART_KINDS}, got {kind!r}")
    fig = Figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    ax = fig.add_axes(AXES_RECT[kind])
    n = len(values)
    value_artists: list[list] = [[] for _ in range(n)]
    label_artists: list[list] = [[] for _ in range(n)]
    line_points = None
    if kind == "pie":
        wedges, texts = ax.pie(values, labels=[f"{lab} ({v})" for lab, v in zip(labels, values)], startangle=90,
                               counterclock=False, colors=COLOURS[:n], textprops={"fontsize": 7})
        ax.set_aspect("equal")
        ax.set_xlim(-1.6, 1.6)
        ax.set_ylim(-1.25, 1.25)
        ax.axis("off")
        for i in range(n):
            # every wedge and label position depends on every value; a label's text is its own
            value_artists[i] = list(wedges) + list(texts)
            label_artists[i] = [texts[i]]
    else:
        x = np.arange(n)
        ax.set_xlim(-0.6, n - 0.4)
        ax.set_ylim(0, MAX_VALUE + 5)
        ax.set_xticks(x)
        ticks = ax.set_xticklabels(labels, fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        if kind == "bar":
            bars = ax.bar(x, values, width=0.6, color=COLOURS[:n])
            for i in range(n):
                value_artists[i].append(bars[i])
        else:
            # One artist per segment: Agg rasterises a polyline as one path, and moving one of its points
            # shifts the antialiasing of far-away unchanged segments by one grey level.
            for i in range(n - 1):
                ax.plot(x[i:i + 2], values[i:i + 2], color=COLOURS[0], linewidth=1.5, solid_capstyle="round")
            ax.plot(x, values, color=COLOURS[0], linestyle="none", marker="o", markersize=5)
            line_points = x
        for i, v in enumerate(values):
            value_artists[i].append(ax.text(i, v + 0.6, str(v), ha="center", va="bottom", fontsize=7))
        for i, tick in enumerate(ticks):
            label_artists[i].append(tick)
    canvas.draw()
    renderer = canvas.get_renderer()
    extents = {
        "value": [[_px_box(a.get_window_extent(renderer), height) for a in arts] for arts in value_artists],
        "label": [[_px_box(a.get_window_extent(renderer), height) for a in arts] for arts in label_artists],
    }
    if line_points is not None:
        # A point's value moves the marker and the two segments that meet it: the box spans the
        # neighbouring points (their markers included) from the lowest to the highest of the three.
        pts = ax.transData.transform(np.stack([line_points, values], axis=1).astype(float))
        reach = 5 / 2 * DPI / 72 + 1.5  # marker radius in pixels (markersize is in points) + half a line
        for i in range(n):
            lo, hi = max(0, i - 1), min(n - 1, i + 1)
            xs, ys = pts[lo:hi + 1, 0], pts[lo:hi + 1, 1]
            extents["value"][i].append([xs.min() - reach, height - ys.max() - reach,
                                        xs.max() + reach, height - ys.min() + reach])
    image = np.asarray(canvas.buffer_rgba())[..., :3].copy()
    return image, extents


def _changed(rng: np.random.Generator, labels: list[str], values: list[int], num_changes: int
             ) -> tuple[list[str], list[int], list[dict]]:
    """The modified data and the changes made: `num_changes` distinct categories, each a value or a label."""
    new_labels, new_values, changes = list(labels), list(values), []
    unused = [w for w in WORDS if w not in labels]
    for i in sorted(rng.choice(len(values), size=num_changes, replace=False).tolist()):
        if rng.random() < 0.5:
            step = int(rng.integers(MIN_STEP, MAX_STEP + 1))
            up = values[i] + step <= MAX_VALUE and (values[i] - step < MIN_VALUE or rng.random() < 0.5)
            new_values[i] = values[i] + step if up else values[i] - step
            changes.append({"field": "value", "index": i, "old": values[i], "new": new_values[i]})
        else:
            new_labels[i] = unused.pop(int(rng.integers(len(unused))))
            changes.append({"field": "label", "index": i, "old": labels[i], "new": new_labels[i]})
    return new_labels, new_values, changes


def chart_pair(seed: int, kind: str | None = None, num_changes: int | None = None,
               width: int = 320, height: int = 240) -> Pair:
    """A chart and its modified copy, from `seed` alone (same seed, same pixels and record).

    Args: kind: "bar" | "line" | "pie", random when None; num_changes: 1 or 2, random when None;
    width, height: image size in pixels. Categories: 3-6, values integers in [1, 24].
    """
    rng = np.random.default_rng(seed)
    kind = CHART_KINDS[int(rng.integers(len(CHART_KINDS)))] if kind is None else kind
    if kind not in CHART_KINDS:
        raise ValueError(f"kind must be one of {CHART_KINDS}, got {kind!r}")
    num_changes = int(rng.integers(1, 3)) if num_changes is None else num_changes
    if num_changes not in (1, 2):
        raise ValueError(f"num_changes must be 1 or 2, got {num_changes!r}")
    n = int(rng.integers(3, 7))
    labels = [WORDS[i] for i in rng.choice(len(WORDS), size=n, replace=False)]
    values = [int(v) for v in rng.integers(MIN_VALUE, MAX_VALUE + 1, size=n)]
    new_labels, new_values, changes = _changed(rng, labels, values, num_changes)
    original, ext_a = render_chart(kind, labels, values, width, height)
    modified, ext_b = render_chart(kind, new_labels, new_values, width, height)
    for c in changes:
        c["box"] = _union(ext_a[c["field"]][c["index"]] + ext_b[c["field"]][c["index"]], width, height)
    record = {"generator": "chart", "seed": int(seed), "kind": kind, "size": [width, height],
              "labels": labels, "values": values, "modified_labels": new_labels, "modified_values": new_values,
              "changes": changes}
    return Pair(original, modified, record)
