"""Golden tests for VLAC's value-from-delta recursion, its inverse (training labels) and per-step rewards."""

import numpy as np
import pytest

from rewards.learned.progress import delta_label, is_done, rewards_from_deltas, step_rewards, value_step, values_from_deltas


def test_recursion_hand_computed():
    # 0 -50-> 50 -50-> 75 -(-50), v>50-> 100 - 25/50*100 = 50 -0-> 50 -20-> 50 + 50*0.2 = 60
    assert values_from_deltas([50, 50, -50, 0, 20]) == pytest.approx([50, 75, 50, 50, 60])
    # v <= 50 branch: 10 + 10 * (-0.5) = 5
    assert values_from_deltas([10, -50]) == pytest.approx([10, 5])
    # v > 50 floor: 100 - 10/10*100 = 0 -> max(10, 0) = 10
    assert values_from_deltas([90, -90]) == pytest.approx([90, 10])
    # 80 then -50: 100 - 20/50*100 = 60; then -25: 100 - 40/75*100 = 46.67
    assert values_from_deltas([80, -50, -25]) == pytest.approx([80, 60, 100 - 40 / 75 * 100])
    # v = 50 uses the low branch: 50 - 50*0.4 = 30
    assert values_from_deltas([50, -40]) == pytest.approx([50, 30])


def test_recursion_edges():
    assert values_from_deltas([]).shape == (0,)
    assert values_from_deltas([100]) == pytest.approx([100])
    assert values_from_deltas([150]) == pytest.approx([100])  # clipped to 100
    assert values_from_deltas([60, -100]) == pytest.approx([60, 10])  # limit of the formula
    assert values_from_deltas([40, -100]) == pytest.approx([40, 0])
    assert value_step(0.0, -30) == 0.0
    # positive deltas never exceed 100; monotone for positive deltas
    v = values_from_deltas(np.full(50, 10.0))
    assert np.all(np.diff(v) > 0) and v[-1] < 100
    assert v[-1] == pytest.approx(100 * (1 - 0.9**50))


def test_per_step_rewards_are_value_changes():
    assert step_rewards([50, 75, 50, 50, 60]) == pytest.approx([50, 25, -25, 0, 10])
    assert rewards_from_deltas([50, 50, -50, 0, 20]) == pytest.approx([0.5, 0.25, -0.25, 0, 0.1])
    assert rewards_from_deltas([50, 50]).sum() == pytest.approx(0.75)  # telescopes to v_T / 100


def test_delta_label_inverts_one_step():
    # up: (b - a) / (100 - a): 20 -> 60 is 50 % of the remaining 80
    assert delta_label(20, 60) == pytest.approx(50)
    # down from > 50: (b - a) / (100 - b): 80 -> 60 is -50
    assert delta_label(80, 60) == pytest.approx(-50)
    # down from <= 50: (b - a) / a: 40 -> 30 is -25
    assert delta_label(40, 30) == pytest.approx(-25)
    assert delta_label(30, 30) == 0.0 and delta_label(0, 0) == 0.0
    assert delta_label(0, 100) == pytest.approx(100) and delta_label(99, 100) == pytest.approx(100)
    # vectorised
    assert delta_label(np.array([20, 80]), np.array([60, 60])) == pytest.approx([50, -50])


def test_chaining_labels_reproduces_progress():
    p = np.array([0, 5, 20, 40, 60, 90, 95, 80, 55, 30, 40, 100.0])
    c = delta_label(p[:-1], p[1:])
    assert values_from_deltas(c) == pytest.approx(p[1:])
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = np.concatenate([[0.0], rng.uniform(11, 99, 30)])  # stays reachable (above the floor of 10)
        assert values_from_deltas(delta_label(q[:-1], q[1:])) == pytest.approx(q[1:], abs=1e-9)


def test_done_threshold():
    assert is_done([0.5, 0.89, 0.9, 0.99]).tolist() == [False, False, True, True]
    assert is_done([0.6], threshold=0.5).tolist() == [True]
