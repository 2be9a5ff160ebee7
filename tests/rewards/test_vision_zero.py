"""Golden tests for the Vision-Zero rewards, clue-format checks and decision parsing (values by hand)."""

import random

import pytest

from rewards.vision_zero import (
    ACC_CORRECT, ACC_NA, ACC_WRONG, CLUE_REASONS, NA, boxed_contents, check_clue, clue_rewards, decision_accuracy,
    decision_reward, failure_counts, normalise_clue, parse_decision, score_decision, votes_received,
)


# ---------------------------------------------------------------- decision reward

@pytest.mark.parametrize("fmt_ok,acc,expected", [
    (1, ACC_CORRECT, 2.49),   # 0.3 + 1.2 + 0.99
    (1, ACC_NA, -0.3),        # 0.3 - 0.6
    (1, ACC_WRONG, -0.9),     # 0.3 - 1.2
    (0, ACC_WRONG, -1.5),     # -0.3 - 1.2
    (0, ACC_CORRECT, 1.89),   # -0.3 + 1.2 + 0.99: a right answer in a bad format still beats a wrong one
    (0, ACC_NA, -0.9),        # -0.3 - 0.6
    (True, ACC_CORRECT, 2.49),
])
def test_decision_reward_golden(fmt_ok, acc, expected):
    assert decision_reward(fmt_ok, acc) == pytest.approx(expected, abs=1e-12)


def test_decision_reward_orders_outcomes():
    r = {a: decision_reward(1, a) for a in (ACC_CORRECT, ACC_NA, ACC_WRONG)}
    assert r[ACC_CORRECT] > r[ACC_NA] > r[ACC_WRONG] > decision_reward(0, ACC_WRONG)


@pytest.mark.parametrize("fmt_ok,acc", [(0.5, ACC_CORRECT), (2, ACC_NA), (1, 0.0), (1, 0.5), (1, -2.0)])
def test_decision_reward_refuses_values_outside_the_definition(fmt_ok, acc):
    with pytest.raises(ValueError):
        decision_reward(fmt_ok, acc)


# ---------------------------------------------------------------- clue rewards

def test_clue_rewards_golden_n4():
    # votes: spy (player 1) got 2, civilians 1, 0, 1 -> mean_civ 2/3, Psi = 4/3.
    b = lam = 0.1
    r = clue_rewards([1, 2, 0, 1], spy=1)
    psi, m = 4 / 3, 2 / 3
    expected = [b * psi / 3 - lam * (1 - m), -b * psi, b * psi / 3 - lam * (0 - m), b * psi / 3 - lam * (1 - m)]
    assert r == pytest.approx(expected, abs=1e-12)
    # the same numbers written out: 0.044444 - 0.033333, -0.133333, 0.044444 + 0.066667, 0.011111
    assert r == pytest.approx([0.0111111111, -0.1333333333, 0.1111111111, 0.0111111111], abs=1e-9)


def test_clue_rewards_golden_n3_custom_weights():
    # N = 3, spy 0 got 0 votes, civilians 3 and 1: mean_civ 2, Psi = -2.
    r = clue_rewards([0, 3, 1], spy=0, beta=0.5, lam=0.25)
    assert r == pytest.approx([1.0, -0.5 - 0.25, -0.5 + 0.25], abs=1e-12)


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_clue_rewards_zero_sum_random(n):
    rng = random.Random(n)
    for _ in range(50):
        votes = [rng.randint(0, n) for _ in range(n)]
        spy = rng.randrange(n)
        beta, lam = rng.uniform(0, 1), rng.uniform(0, 1)
        r = clue_rewards(votes, spy, beta, lam)
        assert len(r) == n
        assert sum(r) == pytest.approx(0.0, abs=1e-12)
        # the lam term alone sums to zero over civilians: lam = 0 gives equal civilian rewards
        r0 = clue_rewards(votes, spy, beta, 0.0)
        civ = [x for j, x in enumerate(r0) if j != spy]
        assert max(civ) - min(civ) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_clue_rewards_no_votes_is_all_zero(n):
    assert clue_rewards([0] * n, spy=n - 1) == [0.0] * n


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_clue_rewards_all_votes_on_the_spy(n):
    v = n - 1  # every civilian voted for the spy
    votes = [0] * n
    votes[0] = v
    r = clue_rewards(votes, spy=0)
    assert r[0] == pytest.approx(-0.1 * v)
    assert r[1:] == pytest.approx([0.1 * v / (n - 1)] * (n - 1))


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_clue_rewards_all_votes_on_one_civilian(n):
    v = n - 1
    votes = [0] * n
    votes[1] = v  # spy 0 escaped, civilian 1 took every vote
    r = clue_rewards(votes, spy=0)
    m = v / (n - 1)
    psi = -m
    assert r[0] == pytest.approx(-0.1 * psi) and r[0] > 0
    assert r[1] == pytest.approx(0.1 * psi / (n - 1) - 0.1 * (v - m))
    for j in range(2, n):
        assert r[j] == pytest.approx(0.1 * psi / (n - 1) + 0.1 * m)
    assert r[1] < min(r[2:])  # the suspected civilian is punished more than the others


@pytest.mark.parametrize("spy", [-1, 4, 1.0, True, None])
def test_clue_rewards_invalid_spy_raises(spy):
    with pytest.raises(ValueError, match="spy"):
        clue_rewards([1, 0, 0, 2], spy)


@pytest.mark.parametrize("votes", [[1], [], [1, -1, 0], [float("nan"), 0, 0]])
def test_clue_rewards_invalid_votes_raise(votes):
    with pytest.raises(ValueError):
        clue_rewards(votes, 0)


def test_votes_received():
    assert votes_received([2, NA, None, 2, 0], 4) == [1, 0, 2, 0]
    with pytest.raises(ValueError):
        votes_received([4], 4)


# ---------------------------------------------------------------- boxes and decisions

def test_boxed_contents_matches_braces():
    assert boxed_contents(r"a \boxed{x} b \boxed{\text{N/A}} c") == ["x", r"\text{N/A}"]
    assert boxed_contents(r"\boxed{a {b} c}") == ["a {b} c"]
    assert boxed_contents(r"\boxed{unclosed") == []
    assert boxed_contents("no box") == []


@pytest.mark.parametrize("text,expected", [
    (r"I think \boxed{3}", (2, None)),
    (r"\boxed{ Player 1 }", (0, None)),
    (r"\boxed{player4}", (3, None)),
    (r"\boxed{N/A}", (NA, None)),
    (r"\boxed{n / a}", (NA, None)),
    (r"\boxed{\text{N/A}}", (NA, None)),
    (r"\boxed{\text{2}}", (1, None)),
    ("3", (None, "no_box")),
    (r"\boxed{2} or \boxed{2}", (None, "multiple_boxes")),
    (r"\boxed{2 or 3}", (None, "unparseable")),
    (r"\boxed{}", (None, "unparseable")),
    (r"\boxed{0}", (None, "out_of_range")),
    (r"\boxed{5}", (None, "out_of_range")),
])
def test_parse_decision(text, expected):
    assert parse_decision(text, num_players=4) == expected


def test_decision_accuracy():
    assert decision_accuracy(2, spy=2) == ACC_CORRECT
    assert decision_accuracy(1, spy=2) == ACC_WRONG
    assert decision_accuracy(NA, spy=2) == ACC_NA
    assert decision_accuracy(None, spy=0) == ACC_WRONG


def test_score_decision_four_outcomes():
    assert score_decision(r"\boxed{2}", spy=1, num_players=4) == {
        "choice": 1, "reason": None, "fmt_ok": 1.0, "acc": 1.0, "reward": pytest.approx(2.49)}
    assert score_decision(r"\boxed{N/A}", 1, 4)["reward"] == pytest.approx(-0.3)
    assert score_decision(r"\boxed{3}", 1, 4)["reward"] == pytest.approx(-0.9)
    bad = score_decision("player 2", 1, 4)
    assert (bad["fmt_ok"], bad["acc"], bad["reason"]) == (0.0, ACC_WRONG, "no_box")
    assert bad["reward"] == pytest.approx(-1.5)
    with pytest.raises(ValueError):
        score_decision(r"\boxed{1}", 4, 4)


# ---------------------------------------------------------------- clues

def test_normalise_clue():
    assert normalise_clue("  The cube, is RED! ") == "the cube is red"
    assert normalise_clue("ＲＥＤ") == "red"  # NFKC folds full-width letters
    assert normalise_clue("...") == ""


@pytest.mark.parametrize("text,earlier,reason", [
    (r"My object is \boxed{The cube is red.}", [], None),
    (r"\boxed{It is 3.5 units wide}", [], None),
    (r"\boxed{Is it red?!}", [], None),
    ("The cube is red.", [], "no_box"),
    (r"\boxed{a} \boxed{b}", [], "multiple_boxes"),
    (r"\boxed{ ... }", [], "empty"),
    (r"\boxed{It is red. It is big.}", [], "not_one_sentence"),
    ("\\boxed{It is red\nand big}", [], "not_one_sentence"),
    (r"\boxed{the cube, is RED}", ["The cube is red."], "repeat"),
    (r"\boxed{the cube is red}", [None, "The sphere is red."], None),
    (r"\boxed{the cubes are red}", ["the cube is red"], None),  # no stemming: different words
])
def test_check_clue(text, earlier, reason):
    c = check_clue(text, earlier)
    assert c.reason == reason
    assert c.ok is (reason is None)


def test_check_clue_keeps_the_text_of_a_repeat():
    c = check_clue(r"\boxed{Red cube.}", ["red cube"])
    assert (c.ok, c.clue, c.reason) == (False, "Red cube.", "repeat")


def test_failure_counts():
    checks = [check_clue(r"\boxed{a}"), check_clue("x"), check_clue("y"), check_clue(r"\boxed{a}", ["a"])]
    counts = failure_counts(checks)
    assert set(counts) == set(CLUE_REASONS)
    assert counts["no_box"] == 2 and counts["repeat"] == 1 and sum(counts.values()) == 3
