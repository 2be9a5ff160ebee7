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


def test_before_only_evaluates_and_trains_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(experiment, "_eval", lambda overrides, n: ({"mean_turns": 7.0}, [0.0, 1.0]))
    monkeypatch.setattr(experiment, "run", lambda *a: pytest.fail("--before-only must not train"))
    monkeypatch.setattr(experiment, "validate", lambda *a: pytest.fail("--before-only must not build a training run"))
    experiment.main(["--out", str(tmp_path), "--eval", "2", "--before-only", "model.path=A"])
    saved = (tmp_path / "before.json").read_text()
    assert '"successes": [0.0, 1.0]' in saved and not (tmp_path / "summary.json").exists()
    # the full command then reads that 'before' back instead of evaluating again
    monkeypatch.setattr(experiment, "_eval", lambda *a: pytest.fail("evaluated 'before' twice"))
    assert experiment._eval_once(tmp_path / "before.json", ["task=robot_manipulation", "model.path=A",
                                                            f"trainer.output_dir={tmp_path / 'run'}"], 2)[1] == [0.0, 1.0]
