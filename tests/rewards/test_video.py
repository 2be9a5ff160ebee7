"""Golden tests of the video authenticity rewards (rewards/video.py)."""

import math

import numpy as np
import pytest

from rewards.video import complexity_reward, length_bonus, parse_letter, score, temporal_bonus

GOOD_A = "<think>the hands flicker</think><answer>A</answer>"
GOOD_B = "<think>consistent motion</think>\n  <answer>B</answer>"


# ------------------------------------------------------------------------------------------ score

@pytest.mark.parametrize("completion,label,acc,fmt,reason", [
    (GOOD_A, "fake", 1.0, 1.0, None),
    (GOOD_A, "real", 0.0, 1.0, None),
    (GOOD_B, "real", 1.0, 1.0, None),  # whitespace between the blocks is allowed
    (GOOD_B, "fake", 0.0, 1.0, None),
    ("<answer>B</answer>", "real", 1.0, 0.0, None),  # accuracy does not need the think block
    ("<think>x</think><answer> b </answer>", "real", 1.0, 1.0, None),  # lower case, extra whitespace
    ("<think>x</think><answer>(A)</answer>", "fake", 1.0, 1.0, None),
    ("<think>x</think><answer>B. The real-world video</answer>", "real", 1.0, 1.0, None),
    ("<think>x</think><answer>a:</answer>", "fake", 1.0, 1.0, None),
    ("<think>x</think><answer>A real video</answer>", "fake", 0.0, 1.0, "unparseable"),  # article, not a choice
    ("<think>x</think><answer></answer>", "fake", 0.0, 1.0, "unparseable"),
    ("<think>x</think><answer>C</answer>", "fake", 0.0, 1.0, "bad_letter"),
    ("<think>x</think><answer>A", "fake", 0.0, 0.0, "no_answer"),  # unclosed
    ("A", "fake", 0.0, 0.0, "no_answer"),
    ("", "real", 0.0, 0.0, "no_answer"),
    # Two answers: the released pattern still matches the whole string; accuracy refuses the hedge.
    ("<think>x</think><answer>A</answer><answer>B</answer>", "fake", 0.0, 1.0, "multiple_answers"),
    ("<think>x</think><answer>A</answer> trailing", "fake", 1.0, 0.0, None),  # text after: not the format
    ("lead <think>x</think><answer>A</answer>", "fake", 1.0, 0.0, None),  # text before: not the format
    ("<THINK>x</THINK><ANSWER>A</ANSWER>", "fake", 0.0, 0.0, "no_answer"),  # tags are case-sensitive
    ("<think>multi\nline\n</think><answer>\nA\n</answer>", "fake", 1.0, 1.0, None),  # DOTALL
])
def test_score_golden(completion, label, acc, fmt, reason):
    assert score(completion, label) == {"accuracy": acc, "format": fmt, "reason": reason}


def test_score_refuses_an_unknown_label():
    with pytest.raises(ValueError, match="real.*fake"):
        score(GOOD_A, "generated")


# ------------------------------------------------------------------------------ complexity (GRPO-Q)

def ans(letter: str) -> str:
    return f"<think>t</think><answer>{letter}</answer>"


@pytest.mark.parametrize("pred,gt,expected", [
    ("F", "F", 2.0), ("A", "F", 0.0), ("E", "F", 0.0),  # real ground truth
    ("F", "A", 0.0), ("F", "E", 0.0),  # fake called real
    ("A", "A", 2.5), ("C", "C", 2.5), ("E", "E", 2.5),  # exact level
    ("B", "A", 1.5), ("C", "A", 1.4), ("D", "A", 1.3), ("E", "A", 1.2),  # (6 - d) / 10
    ("A", "E", 1.2), ("D", "B", 1.4), ("c", "D", 1.5),  # symmetric; lower-case prediction
    ("C", "c", 2.5), ("A", "c", 1.4),  # lower-case ground truth is normalised
    ("G", "A", 0.0), ("Z", "F", 0.0),  # outside A-F
])
def test_complexity_golden(pred, gt, expected):
    assert complexity_reward(ans(pred), gt) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("completion", ["", "A", "<answer>A</answer><answer>A</answer>", "<answer>level A</answer>"])
def test_complexity_unparseable_is_zero(completion):
    assert complexity_reward(completion, "A") == 0.0


@pytest.mark.parametrize("gt", ["G", "", "AB", None, "real"])
def test_complexity_refuses_bad_ground_truth(gt):
    with pytest.raises(ValueError, match="ground truth"):
        complexity_reward(ans("A"), gt)


def test_parse_letter_options_bound_the_letters():
    assert parse_letter(ans("C"), "AB") == (None, "bad_letter")
    assert parse_letter(ans("C"), "ABCDEF") == ("C", None)


# ------------------------------------------------------------------------------------ length control

@pytest.mark.parametrize("correct,lengths,expected", [
    ([], [], []),  # empty group
    ([1, 0, 0], [400, 400, 400], [0.0, 0.0, 0.0]),  # one correct: no bonus
    ([1, 1, 0], [400, 600, 400], [0.2, 0.0, 0.0]),  # incorrect in-range sample gets nothing
    ([1, 1, 1, 1], [320, 512, 319, 513], [0.2, 0.2, 0.0, 0.0]),  # bounds inclusive
    ([True, True], [100, 1000], [0.0, 0.0]),  # two correct, none in range
    ([1.0, 1.0], [330, 330], [0.2, 0.2]),
    ([0, 0], [400, 400], [0.0, 0.0]),
])
def test_length_bonus_golden(correct, lengths, expected):
    assert length_bonus(correct, lengths, 320, 512, 0.2) == pytest.approx(expected)


def test_length_bonus_numpy_inputs():
    got = length_bonus(np.array([1, 1, 0]), np.array([10, 20, 30]), 10, 20, 0.5)
    assert got == [0.5, 0.5, 0.0]


@pytest.mark.parametrize("correct,lengths,lo,hi,match", [
    ([1, 1], [1], 0, 10, "2 correct flags but 1 lengths"),
    ([1, 1], [1, 1], 11, 10, "lo"),
    ([1, 0.5], [1, 1], 0, 10, "0/1"),
    ([1, math.nan], [1, 1], 0, 10, "0/1"),
])
def test_length_bonus_refuses_bad_input(correct, lengths, lo, hi, match):
    with pytest.raises(ValueError, match=match):
        length_bonus(correct, lengths, lo, hi, 0.2)


# --------------------------------------------------------------------------------- GRPO-TA bonus

@pytest.mark.parametrize("orig,pert,real,expected", [
    ([1, 1, 1, 0], [1, 1], True, [0.2, 0.2, 0.2, 0.0]),  # accuracy exactly 0.75, all perturbed right
    ([1, 1, 1, 0], [1, 1], False, [0.1, 0.1, 0.1, 0.0]),  # fake original: +0.1
    ([1, 1, 0, 0], [1, 1], True, [0.0] * 4),  # accuracy 0.5 < 0.75
    ([1, 1, 1, 1], [1, 0], True, [0.0] * 4),  # one perturbed rollout wrong
    ([1, 1, 1, 1], [], True, [0.0] * 4),  # no perturbed rollouts: no evidence, no bonus
    ([], [1, 1], True, []),  # empty group
    ([1], [1], False, [0.1]),
    ([0], [1], True, [0.0]),
    ([True, True, True, True], [True], True, [0.2] * 4),
])
def test_temporal_bonus_golden(orig, pert, real, expected):
    assert temporal_bonus(orig, pert, real) == pytest.approx(expected)


def test_temporal_bonus_refuses_non_binary_flags():
    with pytest.raises(ValueError, match="perturbed_correct"):
        temporal_bonus([1, 1], [0.9], True)
