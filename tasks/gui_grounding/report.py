"""Evaluation report for grounding tasks (also used by tasks/screenspot).

Every number is recomputed from each episode's answer text and its observation's ground truth,
so the report does not depend on what the trainer kept of `StepResult.info`.

Report keys: ``overall`` (click accuracy), ``stderr`` (binomial sqrt(p(1-p)/n)), ``count``,
``mean_iou``, ``parse_failure_rate``, ``reasons`` (counts), reward-hacking diagnostics
``mean_area_ratio`` (predicted / GT area, over answers with a box) and ``big_box_rate`` (share of
those boxes covering more than ``big_box_fraction`` of the screen), and ``breakdown``:
``{"platform/element_type": {"mobile/text": {"accuracy", "stderr", "count"}, ...}, ...}``.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Sequence

from PIL import Image, ImageDraw

from vlrl.stats import accuracy_cell as _cell

from .env import analyse_answer

GT_COLOR, PRED_COLOR = (0, 170, 0), (220, 0, 0)

SYNTHETIC_BREAKDOWNS = (("platform", "element_type"), ("target_kind",), ("instruction_style",), ("n_widgets",))


def episode_rows(episodes, big_box_fraction: float = 0.25) -> list[dict]:
    """One row per episode: raw scores, diagnostics and the tags used by breakdowns."""
    rows = []
    for ep in episodes:
        turn = ep.turns[0]
        info = turn.observation.info
        a = analyse_answer(turn.response_text or "", info, big_box_fraction)
        tags = {**(info.get("metadata") or {}), **(info.get("tags") or {})}
        rows.append({**a, "tags": tags})
    return rows


def summarize(rows: list[dict], breakdowns: Sequence[Sequence[str]]) -> dict:
    """Aggregate rows into the report dict (see module docstring)."""
    n = len(rows)
    hits = [r["hit"] for r in rows]
    boxes = [r for r in rows if r["pred"] is not None and r["pred"].kind == "box"]
    out = {
        "count": n,
        "overall": _cell(hits)["accuracy"],
        "stderr": _cell(hits)["stderr"],
        "mean_iou": sum(r["iou"] for r in rows) / n if n else 0.0,
        "parse_failure_rate": sum(r["reason"] == "parse" for r in rows) / n if n else 0.0,
        "reasons": dict(Counter(r["reason"] for r in rows if r["reason"] is not None)),
        "mean_area_ratio": sum(r["area_ratio"] for r in boxes) / len(boxes) if boxes else 0.0,
        "big_box_rate": sum(r["big_box"] for r in boxes) / len(boxes) if boxes else 0.0,
        "breakdown": {},
    }
    for keys in breakdowns:
        cells: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            if all(k in r["tags"] for k in keys):
                cells["/".join(str(r["tags"][k]) for k in keys)].append(r["hit"])
        if cells:
            out["breakdown"]["/".join(keys)] = {c: _cell(v) for c, v in sorted(cells.items())}
    return out


def report(episodes, cfg) -> dict:
    """Evaluation report of synthetic / JSONL grounding episodes."""
    return summarize(episode_rows(episodes, cfg.big_box_fraction), SYNTHETIC_BREAKDOWNS)


def to_markdown(rep: dict, title: str = "Grounding evaluation") -> str:
    """The report as Markdown: a summary table and one table per breakdown."""
    lines = [f"## {title}", "", "| metric | value |", "|---|---|"]
    lines.append(f"| click accuracy | {100 * rep['overall']:.1f}% ± {100 * rep['stderr']:.1f} (n={rep['count']}) |")
    lines.append(f"| mean IoU | {rep['mean_iou']:.3f} |")
    lines.append(f"| parse failures | {100 * rep['parse_failure_rate']:.1f}% |")
    lines.append(f"| mean pred/GT area | {rep['mean_area_ratio']:.2f} |")
    lines.append(f"| boxes > big-box threshold | {100 * rep['big_box_rate']:.1f}% |")
    skipped = rep.get("skipped") or {}
    if skipped.get("count"):  # records that could not be evaluated (vlrl/evaluate.py): not in n
        reasons = ", ".join(f"{r}: {c}" for r, c in skipped["reasons"].items())
        lines.append(f"| skipped records (not in n) | {skipped['count']} ({reasons}) |")
    for dim, cells in rep.get("breakdown", {}).items():
        lines += ["", f"### by {dim}", "", f"| {dim} | accuracy | ± s.e. | n |", "|---|---|---|---|"]
        for cell, s in cells.items():
            lines.append(f"| {cell} | {100 * s['accuracy']:.1f}% | {100 * s['stderr']:.1f} | {s['count']} |")
    return "\n".join(lines) + "\n"


def write_markdown(rep: dict, path: str, title: str = "Grounding evaluation") -> str:
    """Write `to_markdown(rep)` to `path`; returns the text."""
    text = to_markdown(rep, title)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return text


def dump_annotated(episodes, out_dir: str, limit: int = 16, big_box_fraction: float = 0.25,
                   min_side: int = 448) -> list[str]:
    """Save up to `limit` images with the ground-truth box (green) and the prediction (red), scaled up so the
    shorter side is at least `min_side` px (model frames are often 112 px: too small to read), with a legend,
    the instruction and the answer underneath. File names say hit or miss."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for i, ep in enumerate(list(episodes)[:limit]):
        turn = ep.turns[0]
        info = turn.observation.info
        a = analyse_answer(turn.response_text or "", info, big_box_fraction)
        img = turn.observation.images[0].convert("RGB")
        s = max(1.0, min_side / min(img.width, img.height))
        img = img.resize((round(img.width * s), round(img.height * s)), Image.NEAREST)
        w = max(2, round(s))
        canvas = Image.new("RGB", (max(img.width, 320), img.height + 52), (255, 255, 255))
        canvas.paste(img, (0, 0))
        d = ImageDraw.Draw(canvas)
        d.rectangle([v * s for v in info["gt_box"]], outline=GT_COLOR, width=w)
        pred = a["pred"]
        if pred is not None and pred.kind == "box":
            d.rectangle([v * s for v in pred.values], outline=PRED_COLOR, width=w)
        elif pred is not None:
            x, y = (v * s for v in pred.values)
            r = 4 * w
            d.line((x - r, y, x + r, y), fill=PRED_COLOR, width=w)
            d.line((x, y - r, x, y + r), fill=PRED_COLOR, width=w)
        y0 = img.height + 4
        for k, (label, color) in enumerate((("ground truth", GT_COLOR), ("prediction", PRED_COLOR))):
            x0 = 4 + 130 * k
            d.rectangle((x0, y0 + 2, x0 + 12, y0 + 12), outline=color, width=2)
            d.text((x0 + 18, y0), label, fill=(0, 0, 0))
        d.text((4 + 260, y0), "HIT" if a["hit"] else "MISS", fill=(0, 140, 0) if a["hit"] else PRED_COLOR)
        d.text((4, y0 + 16), "instruction: " + str(info.get("instruction", ""))[:100], fill=(0, 0, 0))
        d.text((4, y0 + 31), "answer: " + (turn.response_text or "")[:100].replace("\n", " "), fill=PRED_COLOR)
        path = os.path.join(out_dir, f"{i:04d}_{'hit' if a['hit'] else 'miss'}.png")
        canvas.save(path)
        paths.append(path)
    return paths
