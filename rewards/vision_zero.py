"""Vision-Zero "Who is the spy" rewards: decision reward, zero-sum clue rewards, clue and decision parsing.

Pure functions of text and numbers; no model, no image. Players are 0-based indices in every argument
and return value (`spy`, `votes[j]`, a parsed decision); the game's prompts show them 1-based as
"Player 1".."Player N", so the text ``\\boxed{3}`` names index 2 (`PLAYER_BASE`).

**Decision reward** (`decision_reward`): r = 0.3 * (2 * fmt_ok - 1) + 1.2 * acc + 0.99 * [acc > 0], with
acc = +1 correct, -0.5 N/A, -1 wrong or invalid. The four outcomes of `score_decision`:
correct 2.49, N/A -0.3, wrong -0.9, invalid (no parseable answer, fmt_ok = 0) -1.5.

**Clue rewards** (`clue_rewards`), from the votes each player received: Psi = v_spy - mean(v_civilians);
spy: -beta * Psi; civilian j: beta * Psi / (N - 1) - lam * (v_j - mean(v_civilians)). The lam term sums
to zero over the civilians by construction, so the rewards of a game always sum to zero (up to
floating-point rounding).

**Boxes.** ``\\boxed{...}`` is found with brace matching, so nested braces stay inside
(``\\boxed{\\text{N/A}}``); one outer ``\\text{...}`` wrapper around the whole content is removed.
An unclosed box counts as no box.

**Decision parsing** (`parse_decision`): exactly one box, whose content is ``k`` or ``Player k``
(case-insensitive, surrounding whitespace ignored) with 1 <= k <= N, or ``N/A`` (case-insensitive).
Reasons for an invalid decision: ``"no_box"``, ``"multiple_boxes"`` (even when they agree: a
hedging policy must not gain), ``"unparseable"``, ``"out_of_range"``.

**Clue format** (`check_clue`): a clue is exactly one box holding one non-empty sentence, not a
repeat of an earlier clue of the same game. Reasons, checked in this order: ``"no_box"``,
``"multiple_boxes"``, ``"empty"``, ``"not_one_sentence"``, ``"repeat"``.

* One sentence: the content has no line break, and no sentence end (``.``, ``!`` or ``?``, possibly
  repeated) followed by whitespace and further text. So "3.5 units" and "It is red." are one sentence;
  "It is red. It is big." is two. Abbreviations ("e.g. a cube") read as a sentence end: a known,
  accepted false positive of this rule.
* Repeat: normalised text equality with any earlier clue of the game (every player, every round).
  Normalisation: Unicode NFKC, case-folded, every character that is not a letter or a digit becomes
  a space, whitespace runs collapsed, ends stripped. "The cube is RED!" repeats "the cube, is red";
  "the cube is red" does not repeat "the cubes are red" (no stemming).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ACC_CORRECT, ACC_NA, ACC_WRONG = 1.0, -0.5, -1.0  # `acc` of a right answer, of N/A, of a wrong or invalid one
ACCURACIES = (ACC_CORRECT, ACC_NA, ACC_WRONG)
NA = "N/A"  # what `parse_decision` returns for an abstention
PLAYER_BASE = 1  # the number the prompts give the first player
CLUE_REASONS = ("no_box", "multiple_boxes", "empty", "not_one_sentence", "repeat")
DECISION_REASONS = ("no_box", "multiple_boxes", "unparseable", "out_of_range")

_BOX = "\\boxed{"
_TEXT = re.compile(r"\\text\{(.*)\}", re.DOTALL)
_PLAYER = re.compile(r"(?:player\s*)?(\d+)", re.IGNORECASE)
_NA = re.compile(r"n\s*/\s*a", re.IGNORECASE)
_SENTENCE_BREAK = re.compile(r"[.!?]+\s+\S")


# ---------------------------------------------------------------- rewards

def decision_reward(fmt_ok: bool | float, acc: float) -> float:
    """Reward of one decision: 0.3 * (2 * fmt_ok - 1) + 1.2 * acc + 0.99 * [acc > 0].

    Args: fmt_ok: 1/True when the answer is well-formed, 0/False otherwise; acc: one of `ACCURACIES`
    (+1 correct, -0.5 N/A, -1 wrong or invalid). Other values raise ValueError (a caller bug).
    """
    if fmt_ok not in (0, 1):  # True/False compare equal to 1/0
        raise ValueError(f"fmt_ok must be 0 or 1, got {fmt_ok!r}")
    if acc not in ACCURACIES:
        raise ValueError(f"acc must be one of {ACCURACIES}, got {acc!r}")
    return 0.3 * (2 * float(fmt_ok) - 1) + 1.2 * float(acc) + 0.99 * float(acc > 0)


def clue_rewards(votes: Sequence[float], spy: int, beta: float = 0.1, lam: float = 0.1) -> list[float]:
    """Zero-sum clue-stage reward of each player from the votes it received.

    Args:
        votes: [N] votes received, `votes[j]` for player j (counts, or fractions when the observer's G
            samples are averaged); finite and >= 0. N >= 2 (at least one civilian).
        spy: the spy's index, 0 <= spy < N.
        beta: weight of Psi = v_spy - mean(v_civilians) (how much more the spy was suspected).
        lam: weight of a civilian's own excess votes v_j - mean(v_civilians).

    Returns: [N] rewards; the spy gets -beta * Psi, civilian j gets beta * Psi / (N - 1) - lam * (v_j -
    mean(v_civilians)). They sum to 0. Invalid arguments raise ValueError.
    """
    v = [float(x) for x in votes]
    n = len(v)
    if n < 2:
        raise ValueError(f"clue_rewards needs at least 2 players, got {n}")
    if not all(math.isfinite(x) and x >= 0 for x in v):
        raise ValueError(f"votes must be finite and >= 0, got {list(votes)!r}")
    if isinstance(spy, bool) or not isinstance(spy, int) or not 0 <= spy < n:
        raise ValueError(f"spy must be a player index in [0, {n}), got {spy!r}")
    civ_mean = (sum(v) - v[spy]) / (n - 1)
    psi = v[spy] - civ_mean
    return [-beta * psi if j == spy else beta * psi / (n - 1) - lam * (v[j] - civ_mean) for j in range(n)]


def votes_received(choices: Iterable[int | str | None], num_players: int) -> list[int]:
    """Votes each player received: [N] counts of the player indices in `choices`.

    `choices` are `parse_decision` results (one per voter or per observer sample); N/A and None
    (invalid) cast no vote. An index outside [0, N) raises ValueError.
    """
    counts = [0] * num_players
    for c in choices:
        if c is None or c == NA:
            continue
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < num_players:
            raise ValueError(f"a vote must be a player index in [0, {num_players}), got {c!r}")
        counts[c] += 1
    return counts


# ---------------------------------------------------------------- parsing

def boxed_contents(text: str) -> list[str]:
    """The contents of every closed ``\\boxed{...}`` in `text`, in order (braces matched, not nested boxes)."""
    out, start = [], 0
    while (i := text.find(_BOX, start)) >= 0:
        depth, j = 1, i + len(_BOX)
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth:  # unclosed: nothing after it can be a well-formed box either
            break
        out.append(text[i + len(_BOX): j - 1])
        start = j
    return out


def _unwrap(content: str) -> str:
    """Content stripped, with one outer ``\\text{...}`` removed when it spans all of it."""
    content = content.strip()
    m = _TEXT.fullmatch(content)
    return m.group(1).strip() if m else content


def _single_box(text: str) -> tuple[str | None, str | None]:
    """(unwrapped content, None) for exactly one box, else (None, "no_box" | "multiple_boxes")."""
    boxes = boxed_contents(text)
    if not boxes:
        return None, "no_box"
    if len(boxes) > 1:
        return None, "multiple_boxes"
    return _unwrap(boxes[0]), None


def parse_decision(text: str, num_players: int) -> tuple[int | str | None, str | None]:
    """A decision answer: (0-based player index or `NA`, None) when valid, else (None, reason)."""
    content, reason = _single_box(text)
    if reason:
        return None, reason
    if _NA.fullmatch(content):
        return NA, None
    m = _PLAYER.fullmatch(content)
    if m is None:
        return None, "unparseable"
    k = int(m.group(1)) - PLAYER_BASE
    if not 0 <= k < num_players:
        return None, "out_of_range"
    return k, None


def decision_accuracy(choice: int | str | None, spy: int) -> float:
    """`acc` of a parsed decision: +1 for the spy's index, -0.5 for N/A, -1 for anything else (None included)."""
    if choice == NA:
        return ACC_NA
    return ACC_CORRECT if choice is not None and not isinstance(choice, bool) and choice == spy else ACC_WRONG


def score_decision(text: str, spy: int, num_players: int) -> dict:
    """One decision output scored: {choice, reason, fmt_ok, acc, reward}. fmt_ok = 1 exactly when it parsed."""
    if isinstance(spy, bool) or not isinstance(spy, int) or not 0 <= spy < num_players:
        raise ValueError(f"spy must be a player index in [0, {num_players}), got {spy!r}")
    choice, reason = parse_decision(text, num_players)
    fmt_ok = float(reason is None)
    acc = decision_accuracy(choice, spy)
    return {"choice": choice, "reason": reason, "fmt_ok": fmt_ok, "acc": acc, "reward": decision_reward(fmt_ok, acc)}


def normalise_clue(text: str) -> str:
    """The form two clues are compared in (see the module docstring): NFKC, casefold, non-alphanumerics -> space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(c if c.isalnum() else " " for c in folded).split())


@dataclass(frozen=True)
class ClueCheck:
    """Result of `check_clue`: `ok`, the clue text (the box's content, also when it failed as a repeat or
    a non-sentence; None without exactly one box) and the failure `reason` (None when ok)."""

    ok: bool
    clue: str | None
    reason: str | None


def check_clue(text: str, earlier: Iterable[str | None] = ()) -> ClueCheck:
    """Format check of one clue turn against the clues spoken before it in the same game.

    Args: text: the player's whole output; earlier: the `clue` texts of the earlier turns (None entries
    are skipped). Which earlier turns to pass is the caller's choice; the game passes every earlier
    turn, failed ones included, since the other players saw them.
    """
    content, reason = _single_box(text)
    if reason:
        return ClueCheck(False, None, reason)
    if not normalise_clue(content):
        return ClueCheck(False, content, "empty")
    if "\n" in content or "\r" in content or _SENTENCE_BREAK.search(content):
        return ClueCheck(False, content, "not_one_sentence")
    key = normalise_clue(content)
    if any(e is not None and normalise_clue(e) == key for e in earlier):
        return ClueCheck(False, content, "repeat")
    return ClueCheck(True, content, None)


def failure_counts(checks: Iterable[ClueCheck]) -> dict[str, int]:
    """Failed clue checks counted by reason: {reason: n} over `CLUE_REASONS` (zeros included, for logs)."""
    counts = Counter(c.reason for c in checks if not c.ok)
    return {r: counts.get(r, 0) for r in CLUE_REASONS}
