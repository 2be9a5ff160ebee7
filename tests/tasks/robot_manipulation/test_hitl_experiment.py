"""The robot-in-the-loop experiment (tasks/robot_manipulation/hitl_experiment.py): its learning curve, and one tiny
session end to end through the bridge with the scripted operator (slow: robosuite)."""

import json

import pytest

from tasks.robot_manipulation.hitl_experiment import curve, main


def test_curve_counts_assisted_and_unassisted_success_per_window():
    eps = [{"success": True, "policy_turns": 40, "human_turns": 0},
           {"success": True, "policy_turns": 30, "human_turns": 20},
           {"success": False, "policy_turns": 100, "human_turns": 0},
           {"success": False, "policy_turns": 50, "human_turns": 50},
           {"success": True, "policy_turns": 10, "human_turns": 0}]
    assert curve(eps, 2) == [
        {"episodes": [0, 1], "success": 1.0, "success_unassisted": 0.5, "takeover_rate": 0.5, "mean_turns": 45.0},
        {"episodes": [2, 3], "success": 0.0, "success_unassisted": 0.0, "takeover_rate": 0.5, "mean_turns": 100.0},
        {"episodes": [4, 4], "success": 1.0, "success_unassisted": 1.0, "takeover_rate": 0.0, "mean_turns": 10.0}]


@pytest.mark.sim
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_takeover_session_writes_its_summary(tmp_path):
    out = tmp_path / "hitl"
    committed = tmp_path / "summary.json"
    main(["--arm", "takeover", "--episodes", "2", "--eval", "1", "--minutes", "5", "--window", "1",
          "--out", str(out), "--summary", str(committed)])
    s = json.loads(committed.read_text())
    assert s == json.loads((out / "summary.json").read_text())
    assert s["method"] == "bridge_session_takeover" and s["held_out_init_states"] == 1
    assert s["episodes_run"] == 2 and len(s["curve"]) == 2 and len(s["episode_outcomes"]) == 2
    assert s["session"]["episodes"] == 2 and s["session"]["updates"] >= 1
    assert s["session"]["operator_alive_at_end"] is True and s["session"]["operator_reconnects"] == 0
    for e, point in zip(s["episode_outcomes"], s["curve"]):
        assert point["success"] == float(e["success"]) and point["takeover_rate"] == float(e["human_turns"] > 0)
    # the operator takes over at the first stall of an episode (allowance 1): the two logs agree
    assert [(t["episode"], t["policy_step"]) for t in s["takeovers"]] == \
        [(st["episode"], st["policy_step"]) for st in s["first_stalls"]]
    assert (out / "session" / "policy" / "action_stats.json").exists()
