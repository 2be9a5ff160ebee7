"""tasks/robot_manipulation/experiment.py: a stopped run keeps its 'before' evaluation (no simulator here)."""

import json
from types import SimpleNamespace

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



def test_only_before_then_only_train_then_the_full_command(tmp_path, monkeypatch):
    """A run longer than a session: its 'before' evaluation and its training run side by side (--only), then the
    full command reads the evaluation back, continues the training (trainer.resume=auto: nothing is left once the
    budget is spent) and evaluates the newest checkpoint."""
    from vlrl import checkpoint

    evals, trained = [], []

    def fake_eval(overrides, n):
        evals.append([o for o in overrides if o.startswith("model.path=")][-1])
        return {"mean_turns": 7.0}, [0.0, 1.0] if len(evals) == 1 else [1.0, 1.0]

    def fake_train(cfg, task):  # a checkpoint as vlrl/train.py writes it: its training seconds in the state
        trained.append(cfg.trainer.output_dir)
        d = checkpoint.checkpoint_dir(cfg.trainer.output_dir, 3 * len(trained))
        d.mkdir(parents=True)
        checkpoint.save_state(d, {"step": 3 * len(trained), "train_seconds": 600.0 * len(trained)})

    monkeypatch.setattr(experiment, "_eval", fake_eval)
    monkeypatch.setattr(experiment, "run", fake_train)
    monkeypatch.setattr(experiment, "validate", lambda c: (SimpleNamespace(
        trainer=SimpleNamespace(output_dir=str(tmp_path / "run"), seed=0), algo=SimpleNamespace(name="vla_grpo")), None))
    monkeypatch.setattr(experiment, "compose", lambda overrides: overrides)
    experiment.main(["--out", str(tmp_path), "--eval", "2", "--only", "before", "model.path=A"])
    assert evals == ["model.path=A"] and not trained and (tmp_path / "before.json").exists()
    experiment.main(["--out", str(tmp_path), "--eval", "2", "--only", "train", "model.path=A"])
    assert len(evals) == 1 and len(trained) == 1 and not (tmp_path / "summary.json").exists()
    experiment.main(["--out", str(tmp_path), "--eval", "2", "model.path=A", "trainer.resume=auto"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert evals[1].endswith("step_0000006")  # 'before' read back; 'after' of the newest checkpoint
    assert summary["successes_before"] == [0.0, 1.0] and summary["successes_after"] == [1.0, 1.0]
    assert summary["gain_points"] == 50.0 and summary["train_wall_s"] == 1200.0  # the checkpoint's seconds
    with pytest.raises(SystemExit):
        experiment.main(["--out", str(tmp_path), "--only", "after"])
