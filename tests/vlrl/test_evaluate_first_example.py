"""eval.first_example: evaluate a range of seeds that starts past 0 (e.g. states no other run used)."""

import os

import pytest

from vlrl.config import UsageError, compose, validate
from vlrl.evaluate import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "rollout.max_new_tokens=4"]


def test_the_evaluated_seeds_start_at_first_example():
    cfg, task = validate(compose(TOY + ["eval.first_example=5", "eval.num_examples=3", "eval.batch_size=2"]))
    rep, episodes = evaluate(cfg, task, progress=False)
    assert [ep.seed for ep in episodes] == [5, 6, 7] and rep["meta"]["first_example"] == 5 and rep["count"] == 3


def test_first_example_is_checked(monkeypatch):
    with pytest.raises(ValueError, match="eval.first_example"):
        validate(compose(TOY + ["eval.first_example=-1"]))
    cfg, task = validate(compose(TOY + ["eval.first_example=10"]))
    monkeypatch.setattr(task, "num_examples", lambda cfg, split: 10)  # a split of 10 records
    with pytest.raises(UsageError, match="eval.first_example=10: the eval split has only 10"):
        evaluate(cfg, task, progress=False)


def test_an_evaluation_in_a_log_prints_plain_progress_lines(capsys):
    """stdout not a terminal (pytest captures it): a plain line per tenth of the batches, the last one at the end."""
    cfg, task = validate(compose(TOY + ["eval.num_examples=5", "eval.batch_size=2"]))
    evaluate(cfg, task, progress=True)
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("[vlrl eval]")]
    assert [x.split(" examples")[0] for x in lines] == ["[vlrl eval] 2/5 eval", "[vlrl eval] 4/5 eval",
                                                          "[vlrl eval] 5/5 eval"]
    evaluate(cfg, task, progress=False)
    assert "[vlrl eval]" not in capsys.readouterr().out
