"""Game statistics (shared by the training logs and the evaluation report) and the HTML game viewer."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np
from PIL import Image

from rewards.vision_zero import ACC_CORRECT, CLUE_REASONS, NA, PLAYER_BASE
from tasks.vision_zero.env import game_of, graded_checks
from tasks.vision_zero.language import is_true, reference_decision


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def check_results(game: dict) -> list[tuple[bool, bool]]:
    """(clue true of the original image, observer's check right) for every clue x decision of a game whose
    decisions carry clue checks (`task.observer_checks`; `env.graded_checks` grades one decision); [] for games
    played with `observer_checks=off`."""
    mode = game.get("observer_checks", "off")
    if mode == "off":
        return []
    return [r for d in game["decisions"] for r in graded_checks(d["text"], game["clues"], game["record"], mode)]


def spy_exposed(game: dict) -> bool:
    """Do the game's clues expose the spy: does an observer who checks every clue against the original image
    (`language.reference_decision`) name the spy? (Otherwise that observer answers N/A or, misled by a
    civilian's false clue, names a civilian.)"""
    by_player = [[c["clue"] for c in game["clues"] if c["player"] == j] for j in range(game["players"])]
    return reference_decision(by_player, game["record"]) == game["spy"]


def game_stats(games: list[dict]) -> dict[str, float]:
    """Numbers over finished games (summaries from `VisionZeroEnv.summary`).

    decision_accuracy: share of decision answers naming the spy; na_rate / invalid_rate: shares that are
    N/A / unparseable; vote_accuracy: share of the cast votes (N/A and invalid excluded) naming the spy;
    caught_rate: games where the spy got strictly the most votes (= civilians' win rate; the spy wins
    the others); clue_format_rate: well-formed clues; clue_fail/<reason>: failed clues per clue turn;
    clue_true_rate: clue turns whose clue is a phrase of the speaker's own image in the grounded language
    (`language.is_true`: how well the players see their image; free-text clues rarely match a phrase);
    check_accuracy/true_clues, /false_clues: the observer's clue checks that are right (`check_results`), per
    kind of clue (NaN when the decisions carry no checks); exposed_rate: games whose clues expose the spy
    (`spy_exposed`); decision_accuracy/spy_exposed, /spy_not_exposed: decision accuracy in those games and in the
    others (a checking observer scores 1 and 0; a guess among N players 1/N in both).
    """
    decisions = [d for g in games for d in g["decisions"]]
    clues = [c for g in games for c in g["clues"]]
    caught = _mean(float(g["caught"]) for g in games)
    checked = [r for g in games for r in check_results(g)]
    exposed = [spy_exposed(g) for g in games]
    out = {
        "games": float(len(games)),
        "decision_accuracy": _mean(float(d["acc"] == ACC_CORRECT) for d in decisions),
        "na_rate": _mean(float(d["choice"] == NA) for d in decisions),
        "invalid_rate": _mean(float(d["choice"] is None) for d in decisions),
        "vote_accuracy": _mean(float(d["choice"] == g["spy"]) for g in games for d in g["decisions"]
                               if d["choice"] is not None and d["choice"] != NA),
        "caught_rate": caught,
        "win_rate/civilian": caught,
        "win_rate/spy": 1.0 - caught if games else float("nan"),
        "clue_format_rate": _mean(float(c["ok"]) for c in clues),
        "check_accuracy/true_clues": _mean(float(r) for t, r in checked if t),
        "check_accuracy/false_clues": _mean(float(r) for t, r in checked if not t),
        "exposed_rate": _mean(float(e) for e in exposed),
        "decision_accuracy/spy_exposed": _mean(float(d["acc"] == ACC_CORRECT) for g, e in zip(games, exposed)
                                               for d in g["decisions"] if e),
        "decision_accuracy/spy_not_exposed": _mean(float(d["acc"] == ACC_CORRECT) for g, e in zip(games, exposed)
                                                   for d in g["decisions"] if not e),
        "clue_true_rate": _mean(float(c["clue"] is not None and is_true(c["clue"], g["record"], c["player"] == g["spy"]))
                                for g in games for c in g["clues"]),
    }
    for reason in CLUE_REASONS:
        out[f"clue_fail/{reason}"] = _mean(float(c["reason"] == reason) for c in clues)
    return out


def verify_report(episodes) -> dict:
    """Report of clue-verification episodes (`task.scripted=verify`): overall = share answered correctly."""
    results = [ep.turns[-1].info["verify"] for ep in episodes if ep.turns and "verify" in ep.turns[-1].info]
    unfinished = len(episodes) - len(results)
    return {"overall": _mean(r["correct"] for r in results) if results else 0.0, "count": len(results),
            "skipped": {"count": unfinished, "reasons": {"unfinished": unfinished} if unfinished else {}},
            "breakdown": {"verify_accuracy/true_phrases": _mean(r["correct"] for r in results if r["truth"]),
                          "verify_accuracy/false_phrases": _mean(r["correct"] for r in results if not r["truth"]),
                          "verify_accuracy/false_from_pair": _mean(r["correct"] for r in results if r["kind"] == "pair"),
                          "verify_accuracy/false_from_other_pair": _mean(r["correct"] for r in results
                                                                         if r["kind"] == "other"),
                          "yes_rate": _mean(float(r["choice"] is True) for r in results),
                          "invalid_rate": _mean(float(r["choice"] is None) for r in results)}}


def describe_report(episodes) -> dict:
    """Report of scene-description episodes (`task.scripted=describe`): overall = mean share of the image's
    description phrases the answer contains."""
    results = [ep.turns[-1].info["describe"] for ep in episodes if ep.turns and "describe" in ep.turns[-1].info]
    unfinished = len(episodes) - len(results)
    return {"overall": _mean(r["correct"] for r in results) if results else 0.0, "count": len(results),
            "skipped": {"count": unfinished, "reasons": {"unfinished": unfinished} if unfinished else {}},
            "breakdown": {"exact_rate": _mean(r["exact"] for r in results),
                          "extra_phrases_per_answer": _mean(r["extra"] for r in results)}}


def report(episodes, cfg) -> dict:
    """Evaluation report: overall = decision accuracy over all decision answers of the finished games
    (clue-verification episodes, `task.scripted=verify`: `verify_report`)."""
    if cfg.scripted == "verify":
        return verify_report(episodes)
    if cfg.scripted == "describe":
        return describe_report(episodes)
    games = [g for g in (game_of(ep) for ep in episodes) if g is not None]
    stats = game_stats(games)
    unfinished = len(episodes) - len(games)
    return {"overall": stats["decision_accuracy"] if games else 0.0, "count": len(games),
            "skipped": {"count": unfinished, "reasons": {"unfinished_game": unfinished} if unfinished else {}},
            "breakdown": {k: v for k, v in stats.items() if k != "games"}}


# ---------------------------------------------------------------- viewer

def _img_tag(image: np.ndarray, title: str) -> str:
    buf = io.BytesIO()
    Image.fromarray(image).resize((image.shape[1] * 2, image.shape[0] * 2), Image.NEAREST).save(buf, "PNG")
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<figure><img src="data:image/png;base64,{data}"><figcaption>{html.escape(title)}</figcaption></figure>'


def game_html(episode) -> str:
    """One game as a self-contained HTML fragment: both images, clues, decisions, votes and rewards."""
    game = game_of(episode)
    if game is None:
        return "<p>unfinished game</p>"
    spy, esc = game["spy"], html.escape
    images = {t.observation.role: np.asarray(t.observation.images[0]) for t in episode.turns if t.observation.images}
    parts = [f"<h2>game seed {game['seed']}: spy is Player {spy + PLAYER_BASE}, "
             f"{'caught' if game['caught'] else 'not caught'}</h2><div class=imgs>"]
    if "civilian" in images:
        parts.append(_img_tag(images["civilian"], "civilians' image (original)"))
    if "spy" in images:
        parts.append(_img_tag(images["spy"], "spy's image (modified)"))
    parts.append(f"</div><p>changes: {esc(str(game['record'].get('changes')))}</p>")
    parts.append("<table><tr><th>round</th><th>player</th><th>output</th><th>clue</th><th>format</th><th>reward</th></tr>")
    for c, r in zip(game["clues"], game["clue_turn_rewards"]):
        who = f"Player {c['player'] + PLAYER_BASE}" + (" (spy)" if c["player"] == spy else "")
        parts.append(f"<tr><td>{c['round'] + 1}</td><td>{who}</td><td>{esc(c['text'])}</td><td>{esc(str(c['clue']))}</td>"
                     f"<td>{'ok' if c['ok'] else esc(str(c['reason']))}</td><td>{'slipped' if r is None else f'{r:+.3f}'}</td></tr>")
    parts.append("</table><table><tr><th>decider</th><th>output</th><th>choice</th><th>reward</th></tr>")
    for d in game["decisions"]:
        who = "observer" if d["voter"] is None else f"Player {d['voter'] + PLAYER_BASE}"
        choice = d["choice"] if d["choice"] in (None, NA) else f"Player {d['choice'] + PLAYER_BASE}"
        parts.append(f"<tr><td>{who}</td><td>{esc(d['text'])}</td><td>{esc(str(choice))}</td><td>{d['reward']:+.2f}</td></tr>")
    votes = ", ".join(f"P{j + PLAYER_BASE}: {v}" for j, v in enumerate(game["votes"]))
    rewards = ", ".join(f"P{j + PLAYER_BASE}: {r:+.3f}" for j, r in enumerate(game["player_rewards"]))
    parts.append(f"</table><p>votes received: {votes}<br>clue reward per player: {rewards}</p>")
    return "\n".join(parts)


STYLE = ("<style>body{font-family:sans-serif} table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ccc;"
         "padding:2px 6px} .imgs{display:flex;gap:16px} img{image-rendering:pixelated}</style>")


def write_viewer(episodes, path: Path, title: str) -> Path:
    """An HTML page of `episodes`' games at `path` (parent folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "\n<hr>\n".join(game_html(ep) for ep in episodes)
    path.write_text(f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title>{STYLE}"
                    f"</head><body><h1>{html.escape(title)}</h1>{body}</body></html>")
    return path
