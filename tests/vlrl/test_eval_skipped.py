"""Every evaluation report carries `skipped` = {"count", "reasons"} beside `overall` and `count`: the
records whose reset failed, counted by run_episodes and merged by vlrl/evaluate.py whatever the task
(ScreenSpot's own cases: tests/tasks/screenspot/test_skipped.py)."""

import os

import pytest

from vlrl.config import compose, validate
from vlrl.evaluate import evaluate
from vlrl.train import evaluate_policy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "rollout.max_new_tokens=4"]


def test_toy_report_counts_skipped_records_by_reason():
    cfg, task = validate(compose(TOY + ["task.corrupt_every=2", "eval.num_examples=6", "eval.batch_size=4"]))
    with pytest.warns(UserWarning, match="corrupt"):
        rep, _ = evaluate(cfg, task, progress=False)
    assert rep["count"] == 3 and rep["meta"]["examples"] == 6  # seeds 0, 2, 4 skipped, across two batches
    assert rep["skipped"] == {"count": 3, "reasons": {"OSError": 3}}


def test_gui_grounding_report_has_the_same_schema():
    cfg, task = validate(compose(["task=gui_grounding", "model=tiny", "rollout.max_new_tokens=4", "eval.num_examples=2",
                                  "task.eval_examples=2", "task.difficulty_samples=8"]))
    rep, _ = evaluate(cfg, task, progress=False)
    assert rep["count"] == 2 and "breakdown" in rep and rep["skipped"] == {"count": 0, "reasons": {}}


def test_evaluation_during_training_reports_skipped_too(tiny_model_path):
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine

    cfg, task = validate(compose(TOY + ["task.corrupt_every=3"]))
    engine = make_engine(cfg.rollout, load_model(cfg.model), load_processor(cfg.model))
    with pytest.warns(UserWarning):
        rep, episodes = evaluate_policy(engine, task, cfg, 5, 2)
    assert len(episodes) == rep["count"] == 3 and rep["skipped"] == {"count": 2, "reasons": {"OSError": 2}}
