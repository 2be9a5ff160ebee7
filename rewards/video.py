"""Video authenticity rewards (VidGuard-R1 style): format, accuracy, GRPO-Q, length control, GRPO-TA.

The model answers ``<think>...</think><answer>LETTER</answer>``. Pure functions of text and numbers;
no model, no video.

* `score(completion, label)`: the binary question. ``A`` = "The generated video from the AI model"
  (label ``"fake"``), ``B`` = "The real-world video" (label ``"real"``). ``format`` = 1 when the whole
  output matches ``<think>.*?</think>\\s*<answer>.*?</answer>`` (DOTALL); ``accuracy`` = 1 when the
  letter in ``<answer>`` is the right one. The two terms are independent: a right letter without the
  think block still counts as accurate.
* `complexity_reward(completion, gt_letter)` (GRPO-Q): options ``A``-``E`` are graded artifact levels,
  ``F`` is real. Real ground truth: 2.0 for ``F``, else 0. Fake ground truth: 0 for ``F``, else
  1.0 + (1.5 if exact else (6 - |letter distance|) / 10). Unparseable: 0.
* `length_bonus(correct, lengths, lo, hi, bonus)`: when more than one sample of a group is correct,
  the correct ones with ``lo <= length <= hi`` (tokens) get ``+bonus``.
* `temporal_bonus(original_correct, perturbed_correct, real)` (GRPO-TA): when the original group's
  accuracy >= 0.75 and every rollout on the temporally perturbed copy is correct, the correct
  original rollouts get +0.2 (real original) or +0.1 (fake original).

Letter parsing (shared by `score` and `complexity_reward`), a defined result plus a `reason`, never
an exception on model output:

* the answer is the text between ``<answer>`` and ``</answer>`` (tags case-sensitive, as in the
  format pattern), surrounding whitespace ignored;
* the letter is case-insensitive and may be written ``A``, ``a``, ``(A)``, ``A.``, ``A)``, ``A:`` or
  followed by the option text (``B. The real-world video``). "A real video" is NOT read as ``A``:
  a letter followed by a word is an English article, not a choice;
* reasons: ``"no_answer"`` (no closed answer block), ``"multiple_answers"`` (more than one block: a
  hedging policy gains nothing), ``"unparseable"`` (no letter), ``"bad_letter"`` (a letter that is
  not one of the question's options).

Note: two answer blocks still satisfy the format pattern (its lazy ``.*?`` stretches across the
first ``</answer>`` under a whole-string match); we keep the released pattern for ``format`` and
score such outputs 0 on accuracy through ``"multiple_answers"``.

Bad *ground truth* (an unknown label or letter, mismatched list lengths) raises ValueError: data bugs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

FORMAT = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_LETTER = re.compile(r"\(?([A-Za-z])\)?(?:[.:)]\s*.*)?", re.DOTALL)

BINARY_OPTIONS = {"A": "The generated video from the AI model", "B": "The real-world video"}
LABEL_LETTER = {"fake": "A", "real": "B"}
COMPLEXITY_LETTERS = "ABCDEF"  # A-E: graded artifact levels (VidGuard: 20/40/60/80/95% diffusion steps); F: real
REAL_LETTER = "F"
TA_BONUS = {True: 0.2, False: 0.1}  # GRPO-TA bonus for a real / a fake original clip
TA_MIN_ACCURACY = 0.75


def parse_letter(completion: str, options: str) -> tuple[str | None, str | None]:
    """(upper-case letter, None) when the answer block names one of `options`, else (None, reason)."""
    blocks = _ANSWER.findall(completion)
    if not blocks:
        return None, "no_answer"
    if len(blocks) > 1:
        return None, "multiple_answers"
    m = _LETTER.fullmatch(blocks[0].strip())
    if m is None:
        return None, "unparseable"
    letter = m.group(1).upper()
    if letter not in options:
        return None, "bad_letter"
    return letter, None


def format_ok(completion: str) -> float:
    """1.0 when the whole output is a think block then an answer block (whitespace between allowed)."""
    return float(FORMAT.fullmatch(completion) is not None)


def score(completion: str, label: str) -> dict:
    """Binary real/generated reward of one completion.

    Args: completion: the model's text; label: "real" or "fake" (raises ValueError otherwise).
    Returns: {"accuracy": 0.0|1.0, "format": 0.0|1.0, "reason": None | str}, `reason` naming why no
    letter was read (see the module docstring).
    """
    if label not in LABEL_LETTER:
        raise ValueError(f"video label must be 'real' or 'fake', got {label!r}")
    letter, reason = parse_letter(completion, "".join(BINARY_OPTIONS))
    return {"accuracy": float(letter == LABEL_LETTER[label]), "format": format_ok(completion), "reason": reason}


def complexity_reward(completion: str, gt_letter: str) -> float:
    """GRPO-Q reward of one completion against the ground-truth letter (A-E fake levels, F real).

    Returns one of: 0.0, 2.0 (real, answered F), 2.5 (fake, exact level), 1.0 + (6 - d) / 10 for a
    fake clip answered at letter distance d in 1..4 (1.5, 1.4, 1.3, 1.2). Unparseable: 0.0.
    """
    gt = gt_letter.strip().upper() if isinstance(gt_letter, str) else ""
    if len(gt) != 1 or gt not in COMPLEXITY_LETTERS:
        raise ValueError(f"complexity ground truth must be one letter of {COMPLEXITY_LETTERS}, got {gt_letter!r}")
    pred, _ = parse_letter(completion, COMPLEXITY_LETTERS)
    if pred is None:
        return 0.0
    if gt == REAL_LETTER:
        return 2.0 if pred == REAL_LETTER else 0.0
    if pred == REAL_LETTER:
        return 0.0
    if pred == gt:
        return 2.5
    distance = abs(ord(pred) - ord(gt))
    return 1.0 + (6 - distance) / 10


def _as_flags(correct: Sequence, name: str) -> list[bool]:
    """0/1 (or bool) values -> bools; anything else is a caller bug."""
    flags = []
    for c in correct:
        if c not in (0, 1):  # True/False, 0/1 and 0.0/1.0 all pass; NaN or 0.5 does not
            raise ValueError(f"{name} must hold 0/1 values, got {c!r}")
        flags.append(bool(c))
    return flags


def length_bonus(correct: Sequence, lengths: Sequence[int], lo: int, hi: int, bonus: float) -> list[float]:
    """Length control over one group of G samples.

    Args: correct [G] of 0/1, lengths [G] response lengths in tokens, lo <= hi (inclusive bounds),
    bonus (>= 0). Returns [G]: `bonus` for each correct sample with lo <= length <= hi when more than
    one sample of the group is correct (a lone correct sample is not rewarded for its length), else 0.
    """
    flags = _as_flags(correct, "correct")
    if len(flags) != len(lengths):
        raise ValueError(f"length_bonus: {len(flags)} correct flags but {len(lengths)} lengths")
    if lo > hi:
        raise ValueError(f"length_bonus: lo ({lo}) > hi ({hi})")
    if sum(flags) <= 1:
        return [0.0] * len(flags)
    return [float(bonus) if ok and lo <= n <= hi else 0.0 for ok, n in zip(flags, lengths)]


def temporal_bonus(original_correct: Sequence, perturbed_correct: Sequence, real: bool) -> list[float]:
    """GRPO-TA bonus for the original rollouts of one clip.

    Args: original_correct [G] of 0/1 (rollouts on the clip), perturbed_correct [G'] of 0/1 (rollouts on
    its perturbed copy, labelled fake), real: is the original clip real.
    Returns [G]: +0.2 (real) / +0.1 (fake) for each correct original rollout when the original accuracy
    is >= 0.75 and every perturbed rollout is correct, else 0. No perturbed rollouts means no evidence
    that the model saw the perturbation: no bonus. An empty original group gives [].
    """
    orig = _as_flags(original_correct, "original_correct")
    pert = _as_flags(perturbed_correct, "perturbed_correct")
    if not orig or not pert or sum(orig) / len(orig) < TA_MIN_ACCURACY or not all(pert):
        return [0.0] * len(orig)
    b = TA_BONUS[bool(real)]
    return [b if ok else 0.0 for ok in orig]
