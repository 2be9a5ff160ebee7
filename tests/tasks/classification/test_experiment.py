"""tasks/classification/experiment.py: the paired statistics, the equal budgets and the compare bookkeeping
(training and evaluation replaced by fakes: no model runs here)."""

import json
import sys

import pytest

from tasks.classification import experiment


def test_budget_gives_every_method_the_same_steps_and_image_presentations():
    rl = experiment.budget("cls_rl", 40, 8, 6, "cls_rl")
    sft = experiment.budget("sft", 40, 8, 6, "no_thinking")
    assert "trainer.steps=40" in rl and "trainer.steps=40" in sft
    assert "trainer.prompts_per_step=8" in rl and "algo.group_size=6" in rl
    assert "trainer.prompts_per_step=48" in sft  # 8 prompts x 6 samples
    assert "task.mode=no_thinking" in sft and "task.mode=no_thinking" in experiment.budget("no_thinking", 1, 1, 2, "cls_rl")
    with pytest.raises(ValueError, match="unknown method"):
        experiment.budget("dpo", 1, 1, 2, "cls_rl")


def _fake_eval(calls, table):
    """_eval stand-in: the correctness list is looked up by (mode, trained method or 'start')."""
    def fake(overrides, n, output):
        calls.append(list(overrides))
        mode = next(o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("task.mode="))
        path = next((o for o in overrides if o.startswith("model.path=")), "")
        who = next((m for m in experiment.METHODS if f"/{m}/run/" in path), "start")
        hits = table[(mode, who)]
        assert len(hits) == n
        rep = {"overall": sum(hits) / n, "stderr": 0.01, "base": 0.5, "new": 0.25, "harmonic_mean": 1 / 3,
               "mean_response_length": 7.0, "hedged_rate": 0.0, "not_a_candidate_rate": 0.1}
        return rep, list(hits)
    return fake


def test_compare_evaluates_each_start_once_per_format_and_writes_paired_gains(tmp_path, monkeypatch):
    n = 4
    table = {("cls_rl", "start"): [0, 0, 1, 0], ("no_thinking", "start"): [0, 1, 0, 0],
             ("cls_rl", "cls_rl"): [1, 1, 1, 0], ("no_thinking", "no_thinking"): [0, 1, 1, 0],
             ("cls_rl", "sft"): [1, 0, 1, 0]}
    calls, trained = [], []
    monkeypatch.setattr(experiment, "_eval", _fake_eval(calls, table))
    monkeypatch.setattr(experiment, "grpo_run", lambda cfg, task: trained.append(("grpo", cfg.task.mode, cfg.trainer.prompts_per_step)))
    monkeypatch.setattr(experiment, "sft_run", lambda cfg, task: trained.append(("sft", cfg.task.mode, cfg.trainer.prompts_per_step)))
    summary = tmp_path / "docs"
    res = experiment.compare(tmp_path / "out", ["trainer.seed=3"], n, 2, 2, 3, list(experiment.METHODS),
                             "cls_rl", summary, origin={"command": ["x"], "git_commit": "abc"})
    assert trained == [("grpo", "cls_rl", 2), ("grpo", "no_thinking", 2), ("sft", "cls_rl", 6)]
    starts = [c for c in calls if not any(o.startswith("model.path=") for o in c)]
    assert len(starts) == 2  # the SFT control reuses the cls_rl start evaluation
    rows = res["rows"]
    assert rows["cls_rl"]["gain_points"] == pytest.approx(50.0)
    assert rows["no_thinking"]["gain_points"] == pytest.approx(25.0)
    assert rows["cls_rl"]["vs_sft_points"] == pytest.approx(25.0)  # [1,1,1,0] vs [1,0,1,0]
    saved = json.loads((summary / "cls_rl_seed3.json").read_text())
    for key in ("method", "seed", "held_out_images", "before", "after", "gain_points", "gain_stderr_points",
                "train_wall_s", "overrides", "command"):
        assert key in saved
    assert saved["seed"] == 3 and saved["held_out_images"] == n and saved["overrides"] == ["trainer.seed=3"]
    assert saved["budget"]["image_presentations"] == 2 * 2 * 3
    assert "| sft |" in (summary / "table.md").read_text()


def test_main_refuses_an_unknown_method(monkeypatch):
    monkeypatch.setattr(experiment, "compare", lambda *a: pytest.fail("ran"))
    monkeypatch.setattr(sys, "argv", ["experiment.py", "compare", "--methods", "cls_rl,ppo"])
    with pytest.raises(SystemExit):
        experiment.main()


def test_protocol_and_per_method_overrides_reach_training_only(tmp_path, monkeypatch):
    n = 4
    table = {("cls_rl", "start"): [0, 0, 1, 0], ("cls_rl", "cls_rl"): [1, 0, 1, 0], ("cls_rl", "sft"): [1, 1, 1, 0]}
    calls, trained = [], []
    monkeypatch.setattr(experiment, "_eval", _fake_eval(calls, table))
    monkeypatch.setattr(experiment, "grpo_run", lambda cfg, task: trained.append(
        (cfg.task.protocol, cfg.trainer.lr, cfg.rollout.temperature)))
    monkeypatch.setattr(experiment, "sft_run", lambda cfg, task: trained.append(
        (cfg.task.protocol, cfg.trainer.lr, cfg.rollout.temperature)))
    res = experiment.compare(tmp_path / "out", ["trainer.lr=2e-4"], n, 2, 2, 3, ["cls_rl", "sft"], "cls_rl",
                             origin={"command": ["x"], "git_commit": "abc"}, protocol="all",
                             method_sets={"cls_rl": ["trainer.lr=1e-3", "rollout.temperature=1.5"]})
    assert trained == [("all", 1e-3, 1.5), ("all", 2e-4, 1.0)]  # the SFT control keeps the shared lr
    assert all("task.protocol=all" in c for c in calls)
    assert not any("trainer.lr=1e-3" in c for c in calls)  # evaluation is greedy: training-only overrides stay out
    row = res["rows"]["cls_rl"]
    assert row["protocol"] == "all" and row["overrides"] == ["trainer.lr=2e-4"]
    assert row["method_overrides"][-2:] == ["trainer.lr=1e-3", "rollout.temperature=1.5"]


def test_main_refuses_a_malformed_set(monkeypatch):
    monkeypatch.setattr(experiment, "compare", lambda *a: pytest.fail("ran"))
    for bad in ("cls_rl=trainer.lr", "dpo:trainer.lr=1", "cls_rl:trainer.lr"):
        monkeypatch.setattr(sys, "argv", ["experiment.py", "compare", "--set", bad])
        with pytest.raises(SystemExit):
            experiment.main()
