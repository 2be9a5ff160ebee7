"""End-to-end training on the toy task: resume equals uninterrupted, config errors, CLI entry points."""

import json
import os
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from vlrl.config import compose, validate
from vlrl.train import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]"]
FAST = ["trainer.prompts_per_step=2", "algo.group_size=4", "rollout.max_new_tokens=6", "trainer.progress=false",
        "trainer.lr=1e-3"]


def _cfg(*overrides):
    return validate(compose(TOY + FAST + list(overrides)))


def _metrics(out):
    return [json.loads(ln) for ln in open(os.path.join(out, "metrics.jsonl"))]


DETERMINISTIC = ("reward/mean", "loss", "grad_norm", "entropy", "clip_frac", "ratio_mean", "response_length/mean")


def test_resume_equals_uninterrupted(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    run(*_cfg("trainer.steps=4", f"trainer.output_dir={a}", "trainer.save_every=0", "algo.num_iterations=2"))
    run(*_cfg("trainer.steps=2", f"trainer.output_dir={b}", "algo.num_iterations=2"))
    # A second launch with more steps continues from the step-2 checkpoint.
    run(*_cfg("trainer.steps=4", f"trainer.output_dir={b}", "trainer.resume=auto", "algo.num_iterations=2"))
    ma, mb = _metrics(a), _metrics(b)
    assert [m["step"] for m in mb] == [1, 2, 3, 4]
    for ra, rb in zip(ma, mb):
        for key in DETERMINISTIC:
            assert ra[key] == pytest.approx(rb[key], rel=1e-6, abs=1e-9), (ra["step"], key)
    wa = load_file(os.path.join(a, "checkpoints", "step_0000004", "model.safetensors"))
    wb = load_file(os.path.join(b, "checkpoints", "step_0000004", "model.safetensors"))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # Training changed the weights (the comparison above is not between two untouched models).
    w0 = load_file(os.path.join(ROOT, "assets", "tiny-qwen2.5-vl", "model.safetensors"))
    assert any(not torch.equal(w0[k], wa[k]) for k in w0)


def test_interrupted_save_is_not_resumed(tmp_path):
    out = tmp_path / "r"
    run(*_cfg("trainer.steps=1", f"trainer.output_dir={out}"))
    # A crash during a later save leaves only a .tmp directory, which resume must ignore.
    (out / "checkpoints" / "step_0000002.tmp").mkdir()
    from vlrl.checkpoint import find_resume

    assert find_resume(str(out), "auto").name == "step_0000001"


@pytest.mark.parametrize(
    "override, field",
    [
        ("trainer.lr=-1", "trainer.lr"),
        ("trainer.steps=abc", "trainer.steps"),
        ("algo.loss_type=nope", "algo.loss_type"),
        ("algo.scale=median", "algo.scale"),
        ("rollout.temperature=0", "rollout.temperature"),
        ("task.size=3", "task.size"),
        ("+trainer.not_a_field=1", "trainer.not_a_field"),
        ("trainer.save_every=-1", "trainer.save_every"),
        ("trainer.keep_checkpoints=-1", "trainer.keep_checkpoints"),
        ("trainer.log_every=0", "trainer.log_every"),
        ("trainer.samples_every=-1", "trainer.samples_every"),
        ("trainer.eval_every=-1", "trainer.eval_every"),
        ("trainer.eval_examples=-1", "trainer.eval_examples"),
        ("trainer.warmup_steps=-1", "trainer.warmup_steps"),
        ("trainer.threads=-1", "trainer.threads"),
        ("trainer.seed=-1", "trainer.seed"),
        ("trainer.max_skip_fraction=1.5", "trainer.max_skip_fraction"),
        ("trainer.skip_window=0", "trainer.skip_window"),
    ],
)
def test_bad_config_names_the_field(override, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        _cfg(override)


def test_missing_task_module_is_a_clear_error():
    with pytest.raises(ValueError, match="task.module"):
        validate(compose(TOY + ["task.module=tests/no_such_task"]))


def _cli(args, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)  # the console script runs this tree's code
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, **kw)


def test_cfg_job_prints_config_without_running(tmp_path):
    out = tmp_path / "never"
    proc = _cli([sys.executable, "vlrl/train.py", "--cfg", "job", f"trainer.output_dir={out}", *TOY])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "loss_type: dapo" in proc.stdout and "module: tests/toy_task" in proc.stdout
    assert not out.exists()
    bad = _cli([sys.executable, "vlrl/train.py", "--cfg", "job", "trainer.lr=-1", *TOY])
    assert bad.returncode != 0 and "trainer.lr" in bad.stderr


def test_script_and_console_entry_points(tmp_path):
    for i, cmd in enumerate([[sys.executable, "vlrl/train.py"], [os.path.join(os.path.dirname(sys.executable), "vlrl-train")]]):
        out = tmp_path / f"run{i}"
        proc = _cli(cmd + TOY + FAST + ["trainer.steps=1", f"trainer.output_dir={out}"])
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (out / "metrics.jsonl").exists() and (out / "reward_curve.png").exists()
        assert (out / "checkpoints" / "step_0000001" / "trainer_state.pt").exists()
        assert not (tmp_path / "outputs").exists() and not (out / ".hydra").exists()
        # Not a terminal: plain progress lines and the summary, no noise a user cannot act on.
        assert "step 1/1 reward" in proc.stdout and "[vlrl] summary: 1 steps" in proc.stdout, proc.stdout
        assert str(out / "reward_curve.png") in proc.stdout
        assert "Setting accelerator to CPU" not in proc.stdout + proc.stderr


def test_tensorboard_logger_writes_events(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tb"
    run(*_cfg("trainer.steps=2", f"trainer.output_dir={out}", "trainer.loggers=[jsonl,tensorboard]",
              "trainer.samples_every=1"))
    events = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    rewards = events.Scalars("reward/mean")  # the values written, read back
    assert [(e.step, e.value) for e in rewards] == [(m["step"], pytest.approx(m["reward/mean"])) for m in _metrics(out)]
    assert {"loss", "success/rate", "entropy"} <= set(events.Tags()["scalars"])
    table = events.Tensors("samples/text_summary")  # the sample completions, as a Markdown table
    assert [t.step for t in table] == [1, 2]
    text = table[0].tensor_proto.string_val[0].decode()
    assert text.startswith("| group | prompt | response | reward") and text.count("\n") >= 3


def test_wandb_logger_records_the_run_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # no account, no network: the run is written locally
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "wb"
    run(*_cfg("trainer.steps=2", f"trainer.output_dir={out}", "trainer.loggers=[jsonl,wandb]",
              "trainer.wandb_project=vlrl-test", "trainer.samples_every=1"))
    runs = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1
    # wandb's protobuf log: keys and the project are stored as plain strings. Its service process may
    # still be flushing after finish() on a loaded machine (CI once read only the 7-byte header): poll.
    deadline = time.monotonic() + 60
    while True:
        data = runs[0].read_bytes()
        if (b"vlrl-test" in data and data.count(b"reward/mean") >= 2) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert b"vlrl-test" in data and data.count(b"reward/mean") >= 2  # one history record per step
    tables = list((out / "wandb").glob("offline-run-*/files/media/table/samples_*.table.json"))
    assert tables and json.loads(tables[0].read_text())["columns"][:3] == ["group", "prompt", "response"]


def test_evaluation_during_training_follows_eval_greedy_split_and_seed():
    """evaluate_policy (held-out evaluation inside train.py and sft.py) decodes as `eval.greedy` says, on
    `eval.split`, and sampled decoding neither depends on nor disturbs the training RNG."""
    from vlrl.config import compose, validate
    from vlrl.rollout.sample import Sample
    from vlrl.train import evaluate_policy

    calls = []

    class Engine:
        def generate(self, observations, n=1, greedy=False):
            calls.append((greedy, torch.rand(()).item()))
            return [[Sample([1], [0.0], "12", True)] * n for _ in observations]

    splits = []
    cfg, task = validate(compose(["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]"]))

    class Task:
        def make_env(self, task_cfg, split):
            splits.append(split)
            return task.make_env(task_cfg, split)

        def report(self, episodes, task_cfg, skipped=None):
            return task.report(episodes, task_cfg, skipped=skipped)

    evaluate_policy(Engine(), Task(), cfg, 2, 2)
    cfg.eval.greedy, cfg.eval.split, cfg.eval.seed = False, "train", 7
    torch.manual_seed(0)
    evaluate_policy(Engine(), Task(), cfg, 2, 2)
    after = torch.rand(()).item()
    torch.manual_seed(0)
    assert after == torch.rand(()).item()  # the training RNG is where it was
    evaluate_policy(Engine(), Task(), cfg, 2, 2)
    assert [c[0] for c in calls] == [True, False, False]
    assert calls[1][1] == calls[2][1]  # sampled evaluation is seeded by eval.seed
    assert set(splits[:2]) == {"eval"} and set(splits[2:]) == {"train"}
