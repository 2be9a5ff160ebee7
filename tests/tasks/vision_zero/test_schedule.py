"""Golden tests of the Iterative-SPO schedules: the fixed cycle and the adaptive switch."""

import pytest

import tasks.vision_zero as vz
from tasks.vision_zero.schedule import DecisionStats, SwitchConfig, SwitchState, next_state, phase, pooled


def test_fixed_schedule_golden():
    assert [phase(s, 2) for s in range(9)] == ["decision"] * 2 + ["clue"] * 2 + ["decision"] * 2 + ["clue"] * 2 + ["decision"]
    assert [phase(s, 1) for s in range(4)] == ["decision", "clue", "decision", "clue"]
    assert phase(4, 5) == "decision" and phase(5, 5) == "clue" and phase(9, 5) == "clue" and phase(10, 5) == "decision"
    assert vz.phase is phase  # the public entry point


@pytest.mark.parametrize("step,cycle", [(-1, 2), (0, 0), (1.5, 2), (3, True), (3, "2")])
def test_fixed_schedule_refuses_bad_arguments(step, cycle):
    with pytest.raises(ValueError):
        phase(step, cycle)


def _run(cfg, stats, state=SwitchState()):
    """Phases after each step of (correct, na, total) stats."""
    phases = []
    for c, n, t in stats:
        state = next_state(state, DecisionStats(c, n, t), cfg)
        phases.append(state.phase)
    return phases, state


def test_adaptive_switches_to_clue_only_with_a_full_window_of_high_accuracy_and_few_na():
    cfg = SwitchConfig(to_clue_accuracy=0.8, max_na_rate=0.1, back_accuracy=0.5, window=3)
    # step 1 alone is 10/10 but the window is not full yet; after 3 steps 27/30 = 0.9, N/A 1/30
    phases, state = _run(cfg, [(10, 0, 10), (8, 1, 10), (9, 0, 10)])
    assert phases == ["decision", "decision", "clue"]
    assert state.window == ()  # emptied on the switch
    # high accuracy but N/A 4/30 > 0.1: stays in decision
    phases, _ = _run(cfg, [(9, 1, 10), (9, 1, 10), (8, 2, 10)])
    assert phases == ["decision"] * 3
    # accuracy exactly at the threshold switches (>=): 24/30 = 0.8
    phases, _ = _run(cfg, [(8, 0, 10)] * 3)
    assert phases[-1] == "clue"


def test_adaptive_switches_back_when_accuracy_drops_below_the_lower_threshold():
    cfg = SwitchConfig(to_clue_accuracy=0.8, max_na_rate=0.1, back_accuracy=0.5, window=2)
    start = SwitchState("clue")
    # 0.6 and then 0.55 pooled: above 0.5, stays in clue; then 4/10 + 5/10 = 0.45 < 0.5 -> decision
    phases, state = _run(cfg, [(6, 0, 10), (5, 0, 10), (4, 0, 10)], start)
    assert phases == ["clue", "clue", "decision"]
    # exactly 0.5 does not switch back (strictly below)
    phases, _ = _run(cfg, [(5, 0, 10), (5, 0, 10)], start)
    assert phases == ["clue", "clue"]
    # N/A does not matter in the clue phase
    phases, _ = _run(cfg, [(9, 1, 10), (9, 1, 10)], start)
    assert phases == ["clue", "clue"]


def test_adaptive_window_slides_pools_by_answers_and_skips_empty_steps():
    cfg = SwitchConfig(to_clue_accuracy=0.9, max_na_rate=0.5, back_accuracy=0.0, window=2)
    # (0/10, 10/10) pooled = 0.5; then (10/10, 10/10) = 1.0 -> clue at step 3; the empty step changes nothing
    phases, _ = _run(cfg, [(0, 0, 10), (10, 0, 10), (0, 0, 0), (10, 0, 10)])
    assert phases == ["decision", "decision", "decision", "clue"]
    # pooling weighs by answers: 1/1 and 8/10 pool to 9/11 = 0.818 (a mean of rates would give 0.9)
    assert pooled((DecisionStats(1, 0, 1), DecisionStats(8, 0, 10)))[0] == pytest.approx(9 / 11)
    phases, _ = _run(cfg, [(1, 0, 1), (8, 0, 10)])
    assert phases == ["decision", "decision"]


def test_adaptive_minimum_dwell_after_a_switch():
    cfg = SwitchConfig(to_clue_accuracy=0.5, max_na_rate=1.0, back_accuracy=0.5, window=2)
    # Switch to clue at step 2; a terrible step 3 alone cannot switch back (window emptied), step 4 can.
    phases, _ = _run(cfg, [(10, 0, 10), (10, 0, 10), (0, 0, 10), (0, 0, 10)])
    assert phases == ["decision", "clue", "clue", "decision"]


@pytest.mark.parametrize("kwargs,field", [
    ({"to_clue_accuracy": 1.5}, "to_clue_accuracy"),
    ({"max_na_rate": -0.1}, "max_na_rate"),
    ({"back_accuracy": 0.95}, "back_accuracy"),  # above to_clue_accuracy = 0.9
    ({"window": 0}, "window"),
    ({"window": 2.0}, "window"),
])
def test_switch_config_refuses_invalid_values(kwargs, field):
    with pytest.raises(ValueError, match=field):
        SwitchConfig(**kwargs)


def test_stats_and_state_validation():
    with pytest.raises(ValueError):
        DecisionStats(6, 5, 10)
    with pytest.raises(ValueError):
        SwitchState("warmup")
