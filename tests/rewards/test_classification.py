"""Golden tests of the classification rewards (rewards/classification.py): CLS-RL and No-Thinking-RL."""

import pytest

from rewards.classification import named_candidates, score

CANDS = ["cat", "dog", "apple", "a", "green apple", "striped teal hexagon"]


def cls(completion, label="cat", candidates=None):
    return score(completion, label, "cls_rl", candidates)


def direct(completion, label="cat", candidates=None, lenient=False):
    return score(completion, label, "no_thinking", candidates, lenient)


@pytest.mark.parametrize("completion, accuracy, fmt", [
    ("<think>whiskers</think><answer>cat</answer>", 1.0, 1.0),
    ("<think>x</think>\n\n<answer>  Cat \n</answer>", 1.0, 1.0),   # whitespace and case inside the tag
    ("<think>\nfur\n</think> <answer>CAT</answer>", 1.0, 1.0),    # DOTALL think block
    ("<answer>cat</answer>", 1.0, 0.0),                             # no think block: accuracy only
    ("cat", 1.0, 0.0),                                             # no tags: the whole completion
    ("  Cat\n", 1.0, 0.0),
    ("<think>hmm</think>cat", 0.0, 0.0),                           # no answer tag: whole text is compared
    ("<think>a</think><answer>dog</answer>", 0.0, 1.0),            # well formed, wrong
    ("<think>a</think><answer>cat</answer> trailing", 1.0, 0.0),   # the whole completion must match
    (" <think>a</think><answer>cat</answer>", 1.0, 0.0),           # ... from its first character
    ("<think>a</think><answer>cat</answer><answer>dog</answer>", 1.0, 1.0),  # first answer counts; regex spans
    ("<think>a</think><answer>dog</answer><answer>cat</answer>", 0.0, 1.0),
    ("<answer>cat", 0.0, 0.0),                                     # unclosed tag: whole text compared
    ("<answer>a cat</answer>", 0.0, 0.0),
    ("cat.", 0.0, 0.0),
])
def test_cls_rl_golden(completion, accuracy, fmt):
    out = cls(completion)
    assert (out["accuracy"], out["format"]) == (accuracy, fmt)


def test_cls_rl_empty_and_reasons():
    assert cls("") == {"accuracy": 0.0, "format": 0.0, "reason": "empty", "answer": ""}
    out = cls("<think>t</think><answer> </answer>")
    assert (out["accuracy"], out["format"], out["reason"]) == (0.0, 1.0, "empty")
    assert cls("dog")["reason"] is None  # parsed and wrong: no reason


@pytest.mark.parametrize("completion, lenient, accuracy", [
    ("cat", False, 1.0),
    ("Cat", False, 0.0),        # case-sensitive
    (" cat", False, 0.0),       # no stripping: the raw string
    ("cat\n", False, 0.0),
    ("<answer>cat</answer>", False, 0.0),  # tags are not parsed in this mode
    ("Cat", True, 1.0),
    ("  CAT \n", True, 1.0),
    ("cats", True, 0.0),
    ("", False, 0.0),
    ("", True, 0.0),
])
def test_no_thinking_golden(completion, lenient, accuracy):
    out = direct(completion, lenient=lenient)
    assert out["accuracy"] == accuracy and "format" not in out


def test_no_thinking_empty_reason():
    assert direct("")["reason"] == "empty" and direct("   ", lenient=True)["reason"] == "empty"


@pytest.mark.parametrize("mode", ["cls_rl", "no_thinking"])
@pytest.mark.parametrize("answer, label, reason", [
    ("cat or dog", "cat", "hedged"),
    ("cat, dog, apple", "dog", "hedged"),
    ("Cat OR Dog", "cat", "hedged"),
    ("cat / apple", "apple", "hedged"),
    ("a", "apple", None),                 # "a" is a candidate itself: a valid (wrong) answer
    ("appl", "apple", "not_a_candidate"),
    ("leopard", "cat", "not_a_candidate"),
    ("cat.", "cat", "not_a_candidate"),    # names one candidate but is not one
    ("the cat", "cat", "not_a_candidate"),
    ("green apple", "green apple", None),  # overlapping names count once, longest first
    ("green apple", "apple", None),
    ("apple and green apple", "apple", "hedged"),
    ("", "cat", "empty"),
])
def test_anti_hacking_reasons(mode, answer, label, reason):
    completion = f"<think>t</think><answer>{answer}</answer>" if mode == "cls_rl" else answer
    out = score(completion, label, mode, CANDS)
    assert out["reason"] == reason
    assert out["accuracy"] == float(reason is None and answer == label)


def test_substring_trap_a_vs_apple():
    # "a" never matches inside "apple", nor "apple" inside "pineapple" (whole words only).
    assert named_candidates("apple", ["a", "apple"]) == ["apple"]
    assert named_candidates("pineapple", ["apple"]) == []
    assert score("a", "apple", "no_thinking", ["a", "apple"])["accuracy"] == 0.0
    assert score("apple", "a", "cls_rl", ["a", "apple"]) == {"accuracy": 0.0, "reason": None, "answer": "apple", "format": 0.0}
    # Without candidates the equality rule alone already refuses substrings.
    assert score("a", "apple", "cls_rl")["accuracy"] == 0.0


def test_named_candidates_phrases():
    assert named_candidates("a striped  teal\nhexagon", CANDS) == ["a", "striped teal hexagon"]
    assert named_candidates("t-shirt", ["shirt", "t-shirt"]) == ["t-shirt"]
    assert named_candidates("dog_cat", ["dog", "cat"]) == []  # underscore joins words
    assert named_candidates("Dog?cat!", ["dog", "cat"]) == ["dog", "cat"]
    assert named_candidates("c++ or c", ["c++", "c"]) == ["c++", "c"]  # regex characters are escaped


def test_hedge_scores_zero_even_when_it_contains_the_label():
    # The hack peers saw: listing every class. Without candidates the equality rule refuses it too.
    hedge = "<think>t</think><answer>cat or dog or apple</answer>"
    assert score(hedge, "cat", "cls_rl", CANDS)["accuracy"] == 0.0
    assert score(hedge, "cat", "cls_rl")["accuracy"] == 0.0


def test_bad_inputs():
    with pytest.raises(ValueError, match="mode"):
        score("cat", "cat", "think")
    with pytest.raises(ValueError, match="not among"):
        score("cat", "cow", "cls_rl", ["cat", "dog"])
