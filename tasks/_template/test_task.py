"""Tests of the template task; they run from wherever the folder is copied (`pytest path/to/folder`)."""

from pathlib import Path

import pytest

from vlrl.config import compose, validate

HERE = Path(__file__).resolve().parent
FAST = ["model=tiny", "trainer.prompts_per_step=2", "algo.group_size=4", "rollout.max_new_tokens=4",
        "trainer.progress=false", "trainer.eval_examples=0"]


def load(*overrides):
    return validate(compose([f"task.module={HERE}", *FAST, *overrides]))


def test_reward_and_report():
    cfg, task = load()
    env = task.make_env(cfg.task, "eval")
    obs = env.reset(3)
    assert env.reset(3).info == obs.info  # deterministic in the seed
    assert env.step(f" {obs.info['colour'].upper()}.").rewards == {"correct": 1.0}
    env.reset(3)
    assert env.step("purple").rewards == {"correct": 0.0}
    rep = task.report([], cfg.task)
    assert set(rep) >= {"overall", "count", "skipped", "breakdown"}


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="task.image_size"):
        load("task.image_size=8")


def test_trains_two_steps(tmp_path):
    from vlrl.metrics import read_metrics
    from vlrl.train import run

    cfg, task = load("trainer.steps=2", f"trainer.output_dir={tmp_path}")
    assert cfg.task.name == "colour_template"
    run(cfg, task)
    rows = read_metrics(tmp_path / "metrics.jsonl", ["reward/mean"])
    assert [r["step"] for r in rows] == [1, 2] and all(0.0 <= r["reward/mean"] <= 1.0 for r in rows)
