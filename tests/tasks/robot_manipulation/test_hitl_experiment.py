"""The robot-in-the-loop experiment (tasks/robot_manipulation/hitl_experiment.py): its learning curve, and one tiny
session end to end through the bridge with the scripted operator (slow: robosuite)."""

import json

import pytest

from tasks.robot_manipulation.hitl_experiment import curve, main, saved_session


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
    assert s["session_read_back_from"] is None and s["session_wall_s"] > 0
    # The same command again resumes: the 'before' and the finished session are read back, only 'after' reruns.
    main(["--arm", "takeover", "--episodes", "2", "--eval", "1", "--minutes", "5", "--window", "1",
          "--out", str(out), "--summary", str(committed)])
    again = json.loads(committed.read_text())
    assert again["session_read_back_from"] == str(out / "session_result.json")
    for key in ("session", "curve", "takeovers", "first_stalls", "successes_before", "session_wall_s", "eval_before_wall_s"):
        assert again[key] == s[key], key


def test_a_session_that_saved_only_its_own_files_is_read_back_without_guessing(tmp_path):
    assert saved_session(tmp_path) is None
    files = tmp_path / "session"
    (files / "policy").mkdir(parents=True)
    (files / "summary.json").write_text(json.dumps({"summary": {"episodes": 2, "updates": 1}, "config": {}}))
    assert saved_session(tmp_path) is None  # no episodes.jsonl: not finished
    (files / "episodes.jsonl").write_text(json.dumps({"success": True}) + "\n" + json.dumps({"success": False}) + "\n")
    got = saved_session(tmp_path)
    assert got["episodes"] == [{"success": True}, {"success": False}] and got["summary"]["episodes"] == 2
    # what only the experiment process knew is None, not made up
    assert got["takeovers"] is None and got["first_stalls"] is None and got["wall_s"] is None
    assert got["summary"]["operator_alive_at_end"] is None and got["from"] == str(files)
