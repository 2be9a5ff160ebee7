"""Runs never silently reuse or overwrite another run: resume=auto continues only the same run, a folder holding
a run is refused unless trainer.overwrite, evaluation says which model it scores and writes beside that model."""

import json
import os

import pytest

from vlrl.config import compose, validate
from vlrl.runs import RunFolderError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.progress=false",
       "trainer.prompts_per_step=2", "algo.group_size=2", "rollout.max_new_tokens=4"]


def _cfg(*overrides):
    return validate(compose(TOY + list(overrides)))


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished one-step RL run."""
    from vlrl.train import run

    out = tmp_path_factory.mktemp("runs") / "done"
    run(*_cfg("trainer.steps=1", f"trainer.output_dir={out}"))
    return out


def test_a_finished_run_is_not_overwritten_unless_asked(finished, tmp_path):
    import shutil

    from vlrl.train import run

    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(RunFolderError, match="already holds a run .*trainer.overwrite=true"):
        run(*_cfg("trainer.steps=1", f"trainer.output_dir={out}"))
    with pytest.raises(ValueError, match="trainer.overwrite"):  # starting over and resuming contradict
        _cfg("trainer.overwrite=true", "trainer.resume=auto")
    run(*_cfg("trainer.steps=2", f"trainer.output_dir={out}", "trainer.overwrite=true", "trainer.save_every=0"))
    assert [json.loads(ln)["step"] for ln in open(out / "metrics.jsonl")] == [1, 2]
    assert [p.name for p in (out / "checkpoints").glob("step_*")] == ["step_0000002"]  # the old step 1 is gone
    assert (out / "notes.txt").read_text() == "mine"  # not a run file: left alone


def test_a_folder_without_a_run_is_used_as_is(tmp_path):
    from vlrl.runs import check_output_dir

    (tmp_path / "notes.txt").write_text("mine")
    cfg, _ = _cfg(f"trainer.output_dir={tmp_path}")
    assert check_output_dir(cfg, None) == []


@pytest.mark.parametrize("override,field", [
    ("model.path=assets/tiny-gui-locate", "model.path"),
    ("algo.loss_type=grpo", "algo.loss_type"),
    ("task.size=84", "task.size"),
])
def test_resume_auto_refuses_another_runs_checkpoint(finished, override, field):
    from vlrl.train import run

    with pytest.raises(RunFolderError, match=f"belongs to another run .*{field}"):
        run(*_cfg("trainer.steps=2", f"trainer.output_dir={finished}", "trainer.resume=auto", override))


def test_sft_does_not_resume_an_rl_checkpoint(finished):
    from vlrl.sft import run

    with pytest.raises(RunFolderError, match="written by vlrl/train.py"):
        run(*_cfg("trainer.steps=2", f"trainer.output_dir={finished}", "trainer.resume=auto"))


def test_warm_start_trainer_config_needs_its_own_folder():
    with pytest.raises(ValueError, match="trainer.output_dir"):
        validate(compose(["model=tiny", "trainer=sft_tiny"]))


def test_evaluate_names_the_model_and_writes_beside_it(finished, capsys):
    from vlrl.evaluate import main

    ckpt = finished / "checkpoints" / "step_0000001"
    main(TOY + [f"model.path={ckpt}", "eval.num_examples=2"])
    out = capsys.readouterr().out
    report = finished / "checkpoints" / "step_0000001.eval-toy-eval.json"
    assert f"evaluating model {ckpt}" in out and str(report) in out
    assert json.loads(report.read_text())["meta"]["model"] == str(ckpt)
    assert not (finished / "eval.json").exists()  # not the run folder's name for it
    with pytest.raises(SystemExit):
        main(TOY + ["model.path=Qwen/Not-Here-Either", "eval.num_examples=2"])
    assert "eval.output" in capsys.readouterr().err


def test_a_field_added_after_the_checkpoint_counts_as_its_default():
    from vlrl.runs import differences

    saved = {"entry_point": "sft", "model": {"path": "m"}, "task": {"grid": 2}}
    now = {"model": {"path": "m"}, "task": {"grid": 2, "new_field": "off"}}
    assert differences(saved, now, "sft", {"task.new_field": "off"}) == []
    now["task"]["new_field"] = "on"  # set away from its default: another run
    assert differences(saved, now, "sft", {"task.new_field": "off"}) == ["task.new_field: 'off' in the checkpoint, 'on' now"]
    assert differences(saved, now, "sft") == ["task.new_field: None in the checkpoint, 'on' now"]
