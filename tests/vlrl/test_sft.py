"""Supervised warm start: learns the task's reference answers, resumes, applies the curriculum."""

import json
import os

import pytest

from vlrl.config import compose, validate
from vlrl.sft import run, task_config_at

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.progress=false",
       "trainer.lr=3e-3", "trainer.prompts_per_step=8", "rollout.max_new_tokens=8"]


def test_sft_learns_and_resumes(tmp_path):
    out = str(tmp_path / "sft")
    cfg, task = validate(compose(TOY + ["trainer.steps=30", f"trainer.output_dir={out}", "trainer.save_every=15",
                                        "trainer.eval_every=30", "sft.eval_examples=16"]))
    last = run(cfg, task)
    assert last["token_acc"] > 0.9 and last["eval/overall"] == 1.0
    first = json.loads(open(os.path.join(out, "metrics.jsonl")).readline())
    assert first["loss"] > 3 * last["loss"]
    # Resuming a finished run at the same step count does nothing; with more steps it continues.
    cfg2, _ = validate(compose(TOY + ["trainer.steps=32", f"trainer.output_dir={out}", "trainer.resume=auto",
                                      "trainer.save_every=0"]))
    run(cfg2, task)
    steps = [json.loads(ln)["step"] for ln in open(os.path.join(out, "metrics.jsonl"))]
    assert steps == list(range(1, 33))


def test_curriculum_stages():
    cfg, _ = validate(compose(TOY + ["sft.curriculum=[{until: 10, task: {size: 28}}, {until: 20, task: {size: 84}}]"]))
    assert task_config_at(cfg, 0).size == 28
    assert task_config_at(cfg, 15).size == 84
    assert task_config_at(cfg, 25).size == 56


def test_sft_honours_time_budget_samples_and_skip_budget(tmp_path):
    out = tmp_path / "sft"
    cfg, task = validate(compose(TOY + ["trainer.steps=50", f"trainer.output_dir={out}", "trainer.max_minutes=1e-9",
                                        "trainer.samples_every=1", "trainer.save_every=0"]))
    run(cfg, task)
    steps = [json.loads(ln)["step"] for ln in open(out / "metrics.jsonl")]
    assert steps == [1]  # stopped after the step that crossed the budget
    assert [p.name for p in (out / "checkpoints").glob("step_*")] == ["step_0000001"]
    cfg, task = validate(compose(TOY + ["trainer.steps=50", f"trainer.output_dir={out}", "trainer.max_minutes=1e-9",
                                        "trainer.samples_every=1", "trainer.save_every=0", "trainer.resume=auto"]))
    run(cfg, task)  # resumed with its budget already used: no further step
    assert [json.loads(ln)["step"] for ln in open(out / "metrics.jsonl")] == [1]
    assert [p.name for p in (out / "checkpoints").glob("step_*")] == ["step_0000001"]
    samples = [json.loads(ln) for ln in open(out / "samples.jsonl")]
    assert samples and all(s["step"] == 1 and s["reference"] in ("123 456 789", "abc def") and "response" in s
                           for s in samples)
    from vlrl.skips import SkipBudgetExceeded

    cfg, task = validate(compose(TOY + ["trainer.steps=2", f"trainer.output_dir={tmp_path / 'skip'}", "task.corrupt_every=2",
                                        "trainer.skip_window=2"]))
    with pytest.raises(SkipBudgetExceeded, match="skip budget exceeded"):  # half of the samples are unreadable
        run(cfg, task)


@pytest.mark.parametrize("override,field", [("trainer.curriculum_pool=8", "trainer.curriculum_pool"),
                                            ("trainer.eval_examples=4", "trainer.eval_examples")])
def test_sft_refuses_rl_only_trainer_settings(tmp_path, override, field):
    cfg, task = validate(compose(TOY + [override, f"trainer.output_dir={tmp_path / 'never'}"]))
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        run(cfg, task)
    assert not (tmp_path / "never").exists()


def test_eval_metrics_log_the_breakdown_beside_the_headline():
    from vlrl.train import eval_metrics

    report = {"overall": 0.4, "count": 10, "skipped": {"count": 2, "reasons": {"bad": 2}},
              "breakdown": {"na_rate": 0.3, "overall": 9.0, "by_kind": {"a": 1.0}}}
    assert eval_metrics(report) == {"eval/overall": 0.4, "eval/count": 10, "eval/skipped": 2, "eval/na_rate": 0.3}
