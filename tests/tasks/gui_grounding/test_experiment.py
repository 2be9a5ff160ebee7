"""tasks/gui_grounding/experiment.py: the fixed-click baseline, learn (train-only overrides, --method sft), misses, pass@k."""

from tasks.gui_grounding.experiment import fixed_click_baseline


def test_fixed_click_baseline_golden():
    infos = [{"image_size": [100, 100], "gt_box": box} for box in ([0, 0, 50, 50], [50, 50, 100, 100], [0, 0, 100, 100])]
    r = fixed_click_baseline(infos, grid=2)  # lattice points 25 and 75 on each axis
    assert r["screens"] == 3 and abs(r["accuracy"] - 2 / 3) < 1e-12
    assert r["point"] in ([0.25, 0.25], [0.75, 0.75])
    # Relative points scale with each screen: (0.75, 0.75) of a 200x40 screen is (150, 30).
    assert fixed_click_baseline([{"image_size": [200, 40], "gt_box": [140, 20, 160, 40]}], grid=2)["point"] == [0.75, 0.75]


def _fake_eval(calls: list):
    """A stand-in for experiment._eval: records its overrides, every screen a hit on a 10x10 screen."""
    from types import SimpleNamespace

    def fake(overrides, n, output):
        calls.append(list(overrides))
        turn = SimpleNamespace(info={"hit": 1.0}, observation=SimpleNamespace(info={"image_size": [10, 10], "gt_box": [0, 0, 5, 5]}))
        return {"overall": 1.0, "stderr": 0.0}, [SimpleNamespace(turns=[turn])] * n

    return fake


def test_train_only_overrides_reach_training_but_not_the_held_out_eval(tmp_path, monkeypatch):
    from tasks.gui_grounding import experiment

    evals, trained = [], []
    monkeypatch.setattr(experiment, "_eval", _fake_eval(evals))
    monkeypatch.setattr(experiment, "run", lambda cfg, task: trained.append(cfg))
    summary = experiment.learn(tmp_path, ["trainer.steps=3"], 4, ["task.n_widgets=[2,3]"])
    assert list(trained[0].task.n_widgets) == [2, 3] and trained[0].trainer.steps == 3
    assert len(evals) == 2 and not any("task.n_widgets=[2,3]" in o for o in evals[0] + evals[1])
    assert summary["train_only_overrides"] == ["task.n_widgets=[2,3]"] and summary["held_out_screens"] == 4


def test_miss_kind_golden():
    from tasks.gui_grounding.experiment import miss_kind

    boxes = [[0, 0, 10, 10], [20, 0, 30, 10]]
    assert miss_kind((10, 10), boxes, 0) == "hit"  # edges count
    assert miss_kind((25, 5), boxes, 0) == "other_widget"
    assert miss_kind((15, 5), boxes, 0) == "nothing"
    assert miss_kind((25, 5), boxes, 1) == "hit"


def test_misses_refuses_non_synthetic_eval_before_evaluating(tmp_path, monkeypatch):
    import pytest

    from tasks.gui_grounding import experiment

    monkeypatch.setattr(experiment, "_eval", lambda *a: pytest.fail("evaluated before checking the data"))
    with pytest.raises(ValueError, match="task.data='blocks'"):
        experiment.misses(tmp_path, ["task.data=blocks"], 4)


def test_pass_at_k_golden():
    import pytest

    from tasks.gui_grounding.experiment import pass_at_k

    r = pass_at_k([[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 1, 0]])
    assert r["k"] == 4 and r["screens"] == 4
    assert r["mean_hit"] == pytest.approx((0.25 + 0 + 1 + 0.25) / 4)
    assert r["pass_at_k"] == pytest.approx(0.75)
    assert r["pass_at_k_stderr"] == pytest.approx((0.25 / 4) ** 0.5)  # sample variance of [1,0,1,1] = 1/4
    with pytest.raises(ValueError, match="same number of samples"):
        pass_at_k([[1, 0], [1]])


def test_passk_samples_each_screen_k_times_with_different_seeds(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from tasks.gui_grounding import experiment

    calls = []

    def fake_eval(overrides, n, output):
        calls.append(list(overrides))
        seed = int(next(o for o in overrides if o.startswith("eval.seed=")).split("=")[1])
        # screen i hits only in draw i: pass@3 = 1 for screens 0-2, 0 for screen 3
        return {}, [SimpleNamespace(turns=[SimpleNamespace(info={"hit": float(i == seed)})]) for i in range(n)]

    monkeypatch.setattr(experiment, "_eval", fake_eval)
    r = experiment.passk(tmp_path, ["rollout.temperature=0.7"], 4, 3)
    assert len(calls) == 3 and all("eval.greedy=false" in c for c in calls)
    assert {c[-1] for c in calls} == {"eval.seed=0", "eval.seed=1", "eval.seed=2"}
    assert r["pass_at_k"] == 0.75 and r["mean_hit"] == 0.25 and r["temperature"] == 0.7
    assert (tmp_path / "passk.json").exists()


def test_learn_method_sft_trains_with_sft_and_unknown_method_fails(tmp_path, monkeypatch):
    import pytest

    from tasks.gui_grounding import experiment

    trained = []
    monkeypatch.setattr(experiment, "_eval", _fake_eval([]))
    monkeypatch.setattr(experiment, "run", lambda cfg, task: trained.append("grpo"))
    monkeypatch.setattr(experiment, "sft_run", lambda cfg, task: trained.append("sft"))
    summary = experiment.learn(tmp_path, ["trainer=sft_tiny", "trainer.steps=3"], 2, method="sft")
    assert trained == ["sft"] and summary["method"] == "sft" and summary["curve"].endswith("eval_curve.png")
    experiment.learn(tmp_path, ["trainer.steps=3"], 2)
    assert trained == ["sft", "grpo"]
    with pytest.raises(ValueError, match="'ppo'"):
        experiment.learn(tmp_path, [], 2, method="ppo")


def test_read_scores_exact_names_of_the_target_at_its_box(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import vlrl.rollout
    from tasks.gui_grounding import experiment

    asked = []

    class Engine:  # names the target right on even screens, a wrong name on odd ones
        def generate(self, observations, n=1, greedy=False):
            assert n == 1 and greedy
            asked.extend(o.messages[0]["content"][1]["text"] for o in observations)
            return [[SimpleNamespace(text=o.info["metadata"]["target_name"] if o.info["metadata"]["index"] % 2 == 0 else "red OK button")]
                    for o in observations]  # fmt: skip

    monkeypatch.setattr(vlrl.rollout, "make_engine", lambda cfg, model, processor: Engine())
    r = experiment.read(tmp_path, ["eval.batch_size=3", "task.n_widgets=[1,2]"], 6)
    assert len(asked) == 6 and all(t.startswith("Name the element at [") for t in asked)
    assert r["exact_name"] == 0.5 and r["held_out_screens"] == 6 and (tmp_path / "read.json").exists()
    assert sum(v["n"] for k, v in r["breakdown"].items() if k.startswith("n_widgets=")) == 6


def test_summary_path_gets_the_same_json_with_its_command_and_commit(tmp_path, monkeypatch):
    import json
    import re
    import sys

    from tasks.gui_grounding import experiment

    monkeypatch.setattr(experiment, "_eval", _fake_eval([]))
    monkeypatch.setattr(experiment, "run", lambda cfg, task: None)
    argv = ["learn", "--out", str(tmp_path / "out"), "--summary", str(tmp_path / "docs" / "r.json"), "--eval", "2", "trainer.steps=3"]
    monkeypatch.setattr(sys, "argv", ["experiment.py", *argv])
    experiment.main()
    committed = json.loads((tmp_path / "docs" / "r.json").read_text())
    assert committed == json.loads((tmp_path / "out" / "summary.json").read_text())
    assert committed["command"] == ["python", "-m", "tasks.gui_grounding.experiment", *argv]
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", committed["git_commit"])  # the tests run inside the repository
    assert committed["overrides"] == ["trainer.steps=3"] and committed["held_out_screens"] == 2


def test_ablate_summary_holds_the_table_and_both_runs(tmp_path, monkeypatch):
    import json

    from tasks.gui_grounding import experiment

    monkeypatch.setattr(experiment, "_eval", _fake_eval([]))
    monkeypatch.setattr(experiment, "run", lambda cfg, task: None)
    origin = {"command": ["python", "x"], "git_commit": "abc"}
    experiment.ablate(tmp_path / "out", ["trainer.steps=3"], 2, summary_path=tmp_path / "a.json", origin=origin)
    r = json.loads((tmp_path / "a.json").read_text())
    assert r["command"] == ["python", "x"] and set(r["table"]) == set(r["runs"]) == {"hit+iou+box", "hit only"}
    assert "task.reward_terms=[hit]" in r["runs"]["hit only"]["overrides"] and r["runs"]["hit only"]["git_commit"] == "abc"
    assert not (tmp_path / "out" / "a.json").exists()


def test_summary_is_refused_outside_learn_and_ablate(monkeypatch):
    import sys

    import pytest

    from tasks.gui_grounding import experiment

    monkeypatch.setattr(experiment, "misses", lambda *a: pytest.fail("ran misses"))
    monkeypatch.setattr(sys, "argv", ["experiment.py", "misses", "--summary", "x.json"])
    with pytest.raises(SystemExit):
        experiment.main()
