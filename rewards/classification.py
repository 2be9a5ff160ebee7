"""Verifiable rewards for image classification: CLS-RL (think, then answer in tags) and No-Thinking-RL.

    score(completion, label, mode="cls_rl" | "no_thinking", candidates=None, lenient=False)
        -> {"accuracy": 0.0 | 1.0, "format": 0.0 | 1.0 (cls_rl only), "reason": None | str, "answer": str}

Rules (the released CLS-RL code's, restated so they can be tested):
- cls_rl: the answer is the text inside the FIRST `<answer>...</answer>`, or the whole completion when
  there is no such tag; accuracy = 1 when the answer, stripped, equals the label ignoring case.
  format = 1 when the whole completion matches `<think>.*?</think>\\s*<answer>.*?</answer>` (DOTALL).
  `lenient` changes nothing here: this rule already strips and ignores case.
- no_thinking: the answer is the raw completion; accuracy = 1 only when it equals the label exactly
  (case-sensitive, no stripping). `lenient=True` strips and ignores case instead. No format reward.

Anti-hacking (both modes): substring matching lets "a" match "apple" and "cat or dog" earn full reward.
With `candidates` given, an answer earns accuracy only when it names exactly one candidate and is that
candidate. A candidate is NAMED when its name occurs in the answer as a whole phrase, case-insensitive:
not preceded or followed by a letter, digit or underscore, and any run of whitespace in the answer matches
the single spaces between the name's words. Overlapping mentions count once, longest first ("green apple"
names only "green apple", not also "apple"). Outcomes, checked in this order:
- "empty": the answer is empty or only whitespace (the report's parse failures);
- "hedged": the answer names two or more different candidates ("cat or dog", "cat, dog");
- "not_a_candidate": the answer, stripped and case-folded, is none of the candidates ("a" for "apple",
  "cat." with its full stop, "leopard" when it is not in the list);
- otherwise reason None and accuracy by the mode's rule above.
Without candidates only the "empty" reason exists. The label must be among the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

MODES = ("cls_rl", "no_thinking")
REASONS = ("empty", "hedged", "not_a_candidate")
FORMAT_RE = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def extract_answer(completion: str, mode: str = "cls_rl") -> str:
    """The answer text the accuracy rule compares: cls_rl's first tag content (else the whole completion,
    both unstripped), or no_thinking's raw completion."""
    if mode == "cls_rl":
        match = ANSWER_RE.search(completion)
        return match.group(1) if match else completion
    return completion


def format_reward(completion: str) -> float:
    """1.0 when the whole completion is `<think>...</think>` then `<answer>...</answer>`, else 0.0.

    As in the reference regex, `.*?` may span tags: "<answer>a</answer><answer>b</answer>" after the
    think block still matches (accuracy reads the first answer)."""
    return float(FORMAT_RE.fullmatch(completion) is not None)


@lru_cache(maxsize=4096)
def _phrase_re(name: str) -> re.Pattern:
    words = name.split()
    if not words:
        raise ValueError(f"candidate name {name!r} is empty")
    body = r"\s+".join(re.escape(w) for w in words)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def named_candidates(answer: str, candidates: Sequence[str]) -> list[str]:
    """The distinct candidates the answer names as whole phrases (see the module docstring), in the order
    they first appear. Overlapping mentions are resolved longest first, then leftmost."""
    spans = []  # (start, end, name) of every whole-phrase occurrence
    for name in dict.fromkeys(candidates):
        spans += [(m.start(), m.end(), name) for m in _phrase_re(name).finditer(answer)]
    taken: list[tuple[int, int, str]] = []
    for start, end, name in sorted(spans, key=lambda s: (s[0] - s[1], s[0])):
        if all(end <= a or start >= b for a, b, _ in taken):
            taken.append((start, end, name))
    return list(dict.fromkeys(name for _, _, name in sorted(taken)))


def candidate_reason(answer: str, candidates: Sequence[str]) -> str | None:
    """None when `answer` names exactly one candidate and is it (stripped, case-folded); else the reason."""
    if not answer.strip():
        return "empty"
    if len(named_candidates(answer, candidates)) > 1:
        return "hedged"
    folded = answer.strip().casefold()
    if not any(folded == c.strip().casefold() for c in candidates):
        return "not_a_candidate"
    return None


def matches_label(answer: str, label: str, mode: str, lenient: bool = False) -> bool:
    """The mode's accuracy rule on an extracted answer (see the module docstring)."""
    if mode == "cls_rl" or lenient:
        return answer.strip().casefold() == label.strip().casefold()
    return answer == label


def score(completion: str, label: str, mode: str = "cls_rl", candidates: Sequence[str] | None = None,
          lenient: bool = False) -> dict:
    """Score one completion; see the module docstring for every rule. `answer` is the extracted text."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if candidates is not None:
        folded = [c.strip().casefold() for c in candidates]
        if label.strip().casefold() not in folded:
            raise ValueError(f"label {label!r} is not among the {len(folded)} candidates")
    answer = extract_answer(completion, mode)
    if candidates is not None:
        reason = candidate_reason(answer, candidates)
    else:
        reason = None if answer.strip() else "empty"
    accuracy = float(reason is None and matches_label(answer, label, mode, lenient))
    out: dict = {"accuracy": accuracy, "reason": reason, "answer": answer}
    if mode == "cls_rl":
        out["format"] = format_reward(completion)
    return out
