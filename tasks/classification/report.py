"""Evaluation report of classification episodes (one schema with the other tasks: overall, count, skipped,
breakdown).

Every number is recomputed from each episode's answer text and its observation's ground truth, so the
report does not depend on what the trainer kept of the step info.

Keys: `overall` (top-1 accuracy), `stderr` (binomial sqrt(p(1-p)/n)), `count`, `skipped` ({count, reasons}:
the task itself skips nothing; the evaluator adds unreadable images), `breakdown` = {"class": {name: cell},
"group": {"base": cell, "new": cell}} (group only under base-to-new) where a cell is {accuracy, stderr,
count}; under base-to-new also `base`, `new` and `harmonic_mean` (of the two accuracies);
`parse_failure_rate` (empty answers), `hedged_rate`, `not_a_candidate_rate`, `format_rate` (cls_rl: share
of well-formed completions), `mean_response_length` (tokens) and `mean_response_chars`.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from rewards.classification import score
from vlrl.stats import accuracy_cell as cell


def harmonic_mean(a: float, b: float) -> float:
    return 2 * a * b / (a + b) if a + b > 0 else 0.0


def episode_row(ep) -> dict:
    """Score, outcome and tags of one (one-turn) episode."""
    turn = ep.turns[0]
    info = turn.observation.info
    s = score(turn.response_text or "", info["label"], info["mode"], info["candidates"], info.get("lenient", False))
    return {"accuracy": s["accuracy"], "format": s.get("format"), "reason": s["reason"], "label": info["label"],
            "group": info.get("group", "all"), "tokens": len(turn.response_ids), "chars": len(turn.response_text or "")}


def report(episodes, cfg) -> dict:
    rows = [episode_row(ep) for ep in episodes if ep.turns]
    n = len(rows)
    hits = [r["accuracy"] for r in rows]
    reasons = Counter(r["reason"] for r in rows if r["reason"] is not None)
    overall = cell(hits)
    out = {
        "overall": overall["accuracy"],
        "stderr": overall["stderr"],
        "count": n,
        "skipped": {"count": 0, "reasons": {}},
        "breakdown": {},
        "parse_failure_rate": reasons["empty"] / n if n else 0.0,
        "hedged_rate": reasons["hedged"] / n if n else 0.0,
        "not_a_candidate_rate": reasons["not_a_candidate"] / n if n else 0.0,
        "reasons": dict(reasons),
        "mean_response_length": sum(r["tokens"] for r in rows) / n if n else 0.0,
        "mean_response_chars": sum(r["chars"] for r in rows) / n if n else 0.0,
    }
    formats = [r["format"] for r in rows if r["format"] is not None]
    if formats:
        out["format_rate"] = sum(formats) / len(formats)
    by_class: dict[str, list[float]] = defaultdict(list)
    by_group: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_class[r["label"]].append(r["accuracy"])
        by_group[r["group"]].append(r["accuracy"])
    out["breakdown"]["class"] = {c: cell(v) for c, v in sorted(by_class.items())}
    if cfg.protocol == "base_to_new" and set(by_group) - {"all"}:
        groups = {g: cell(by_group.get(g, [])) for g in ("base", "new")}
        out["breakdown"]["group"] = groups
        out["base"], out["new"] = groups["base"]["accuracy"], groups["new"]["accuracy"]
        out["harmonic_mean"] = harmonic_mean(out["base"], out["new"])
    return out


def to_markdown(rep: dict) -> str:
    """The headline numbers, then accuracy per class."""
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    lines = ["| metric | value |", "|---|---|",
             f"| top-1 accuracy | {pct(rep['overall'])} ± {pct(rep.get('stderr', 0.0))} (n = {rep['count']}) |"]
    for key in ("base", "new", "harmonic_mean"):
        if key in rep:
            lines.append(f"| {key.replace('_', ' ')} | {pct(rep[key])} |")
    for key in ("format_rate", "parse_failure_rate", "hedged_rate", "not_a_candidate_rate"):
        if key in rep:
            lines.append(f"| {key.replace('_', ' ')} | {pct(rep[key])} |")
    lines.append(f"| mean response length | {rep.get('mean_response_length', 0.0):.1f} tokens |")
    skipped = rep.get("skipped") or {}
    lines.append(f"| skipped | {skipped.get('count', 0)} {skipped.get('reasons') or ''} |")
    classes = (rep.get("breakdown") or {}).get("class") or {}
    if classes:
        lines += ["", "| class | accuracy | n |", "|---|---|---|"]
        lines += [f"| {c} | {pct(v['accuracy'])} ± {pct(v['stderr'])} | {v['count']} |" for c, v in classes.items()]
    return "\n".join(lines) + "\n"
