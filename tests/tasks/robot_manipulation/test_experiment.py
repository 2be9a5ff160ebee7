"""tasks/robot_manipulation/experiment.py: a stopped run keeps its 'before' evaluation (no simulator here)."""

import pytest

from tasks.robot_manipulation import experiment


def test_before_evaluation_is_saved_and_read_back_by_the_same_run_only(tmp_path, monkeypatch):
    calls = []

    def fake_eval(overrides, n):
        calls.append((list(overrides), n))
        return {"mean_turns": 42.0}, [1.0, 0.0, 1.0][:n]

    monkeypatch.setattr(experiment, "_eval", fake_eval)
    path = tmp_path / "before.json"
    run = ["model.path=A", "task.image_size=112", "trainer.lr=1e-5"]
    first = experiment._eval_once(path, run, 3)
    assert first[:2] == ({"mean_turns": 42.0}, [1.0, 0.0, 1.0]) and len(calls) == 1
    # the resumed command (trainer.* / algo.* may differ: they do not change an evaluation) reads it back
    again = experiment._eval_once(path, run + ["trainer.resume=auto", "algo.beta=0.0"], 3)
    assert again == first and len(calls) == 1
    for other, n in ((["model.path=B", "task.image_size=112"], 3), (run, 2)):
        with pytest.raises(ValueError, match="another run"):
            experiment._eval_once(path, other, n)
    assert len(calls) == 1
