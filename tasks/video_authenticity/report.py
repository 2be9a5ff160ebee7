"""Evaluation report of video authenticity episodes (the schema every task shares: overall, count,
skipped, breakdown). Recomputed from each episode's answer text and its observation's ground truth.

Keys: `overall` (accuracy: real vs generated, whatever the reward mode), `stderr` (binomial), `count`,
`skipped` (the evaluator adds the clips that could not be decoded, by reason), `breakdown` =
{"label": {real, fake}, "generator": {kind: cell}, "level": {level: cell}} (generator and level over
fake clips; a cell is {accuracy, stderr, count}), `balanced_accuracy` (mean of the per-label
accuracies), `auroc` (fake vs real, from the answer: binary A = 1, B = 0; q: F = 0, A-E = 1-5;
unparsed = the middle; ties count half), `parse_failure_rate` (no letter read), `format_rate`,
`reasons`, `mean_response_length` (tokens).
"""

from __future__ import annotations

from collections import Counter, defaultdict

from rewards.video import COMPLEXITY_LETTERS, REAL_LETTER, parse_letter
from tasks.video_authenticity.env import scored
from vlrl.stats import accuracy_cell as cell


def fake_score(text: str, reward: str) -> float:
    """How strongly the answer says "generated": binary A 1 / B 0; q A-E 1-5 / F 0; unparsed: the middle."""
    if reward == "q":
        letter, _ = parse_letter(text, COMPLEXITY_LETTERS)
        return 2.5 if letter is None else (0.0 if letter == REAL_LETTER else float(COMPLEXITY_LETTERS.index(letter) + 1))
    letter, _ = parse_letter(text, "AB")
    return 0.5 if letter is None else float(letter == "A")


def auroc(scores: list[float], positive: list[bool]) -> float | None:
    """P(score of a random positive > that of a random negative), ties half; None without both classes."""
    pos = [s for s, p in zip(scores, positive) if p]
    neg = [s for s, p in zip(scores, positive) if not p]
    if not pos or not neg:
        return None
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


def episode_row(ep) -> dict:
    turn = ep.turns[0]
    info = turn.observation.info
    text = turn.response_text or ""
    rewards, outcome = scored(text, info)
    return {"correct": outcome["correct"], "reason": outcome["reason"], "format": rewards["format"],
            "label": info["label"], "generator": info.get("generator"), "level": info.get("level"),
            "score": fake_score(text, info["reward"]), "tokens": len(turn.response_ids)}


def report(episodes, cfg) -> dict:
    rows = [episode_row(ep) for ep in episodes if ep.turns]
    n = len(rows)
    overall = cell([r["correct"] for r in rows])
    by: dict[str, dict[str, list[float]]] = {"label": defaultdict(list), "generator": defaultdict(list),
                                             "level": defaultdict(list)}
    for r in rows:
        by["label"][r["label"]].append(r["correct"])
        if r["label"] == "fake":
            by["generator"][str(r["generator"])].append(r["correct"])
            by["level"][str(r["level"])].append(r["correct"])
    breakdown = {k: {g: cell(v) for g, v in sorted(groups.items())} for k, groups in by.items()}
    reasons = Counter(r["reason"] for r in rows if r["reason"] is not None)
    labels = breakdown["label"]
    return {
        "overall": overall["accuracy"], "stderr": overall["stderr"], "count": n,
        "skipped": {"count": 0, "reasons": {}},
        "breakdown": breakdown,
        "balanced_accuracy": sum(c["accuracy"] for c in labels.values()) / len(labels) if labels else 0.0,
        "auroc": auroc([r["score"] for r in rows], [r["label"] == "fake" for r in rows]),
        "parse_failure_rate": sum(reasons.values()) / n if n else 0.0,
        "format_rate": sum(r["format"] for r in rows) / n if n else 0.0,
        "reasons": dict(reasons),
        "mean_response_length": sum(r["tokens"] for r in rows) / n if n else 0.0,
    }


def to_markdown(rep: dict) -> str:
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    lines = ["| metric | value |", "|---|---|",
             f"| accuracy | {pct(rep['overall'])} ± {pct(rep.get('stderr', 0.0))} (n = {rep['count']}) |",
             f"| balanced accuracy | {pct(rep.get('balanced_accuracy'))} |",
             f"| AUROC (from the answer letter) | {pct(rep.get('auroc'))} |",
             f"| parse failures | {pct(rep.get('parse_failure_rate', 0.0))} |",
             f"| well-formed | {pct(rep.get('format_rate', 0.0))} |",
             f"| mean response length | {rep.get('mean_response_length', 0.0):.1f} tokens |"]
    skipped = rep.get("skipped") or {}
    lines.append(f"| skipped | {skipped.get('count', 0)} {skipped.get('reasons') or ''} |")
    for key in ("label", "generator", "level"):
        cells = (rep.get("breakdown") or {}).get(key) or {}
        if cells:
            lines += ["", f"| {key} | accuracy | n |", "|---|---|---|"]
            lines += [f"| {g} | {pct(c['accuracy'])} ± {pct(c['stderr'])} | {c['count']} |" for g, c in cells.items()]
    return "\n".join(lines) + "\n"
