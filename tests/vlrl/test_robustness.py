"""Bad inputs never take a run down: corrupt samples are skipped and counted, a NaN loss skips the step."""

import json
import math
import os

import pytest
import torch

from vlrl.config import AlgoConfig, Config, ModelConfig, RolloutConfig, TrainerConfig, compose, validate
from vlrl.models import load_model, load_processor
from vlrl.rollout import make_engine, run_episodes
from vlrl.train import run
from vlrl.trainer import build_rows, episode_advantages, make_optimizer, make_scheduler, update

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.progress=false",
       "rollout.max_new_tokens=6", "algo.group_size=4"]


def test_corrupt_samples_are_skipped_and_counted(tmp_path):
    out = tmp_path / "run"
    # Half the prompts are skipped: within a budget of 0.5 (the default 0.05 would stop the run).
    cfg, task = validate(compose(TOY + ["task.corrupt_every=2", "trainer.steps=2", "trainer.prompts_per_step=4",
                                        "trainer.max_skip_fraction=0.5", f"trainer.output_dir={out}"]))
    with pytest.warns(UserWarning, match="corrupt"):
        run(cfg, task)
    records = [json.loads(ln) for ln in open(out / "metrics.jsonl")]
    assert [r["skipped_samples"] for r in records] == [2.0, 2.0]
    assert [r["skipped/OSError"] for r in records] == [2.0, 2.0]  # reason -> count (the error's class here)
    assert [r["episodes"] for r in records] == [8.0, 8.0]  # 2 good prompts x G=4


def test_all_samples_corrupt_still_steps_with_the_budget_off(tmp_path):
    cfg, task = validate(compose(TOY + ["task.corrupt_every=1", "trainer.steps=1", "trainer.max_skip_fraction=1",
                                        f"trainer.output_dir={tmp_path}"]))
    with pytest.warns(UserWarning):
        metrics = run(cfg, task)
    assert metrics["skipped_samples"] == 4.0 and metrics["episodes"] == 0.0


def test_a_step_without_any_usable_sample_stops_the_run(tmp_path):
    cfg, task = validate(compose(TOY + ["task.corrupt_every=1", "trainer.steps=2", f"trainer.output_dir={tmp_path}"]))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"no usable sample in this step: all 4 prompts were skipped \(OSError: 4\)"):
        run(cfg, task)
    assert not (tmp_path / "checkpoints").exists()


def test_skipping_past_the_budget_stops_the_run(tmp_path):
    # corrupt_every=3: seeds 0..3 of step 1 lose 2 (0 and 3), then about a third: more than 5% of the window.
    cfg, task = validate(compose(TOY + ["task.corrupt_every=3", "trainer.steps=6", "trainer.skip_window=3",
                                        f"trainer.output_dir={tmp_path}"]))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"skip budget exceeded: \d+ of 12 prompts .* in the last 3 steps"):
        run(cfg, task)
    steps = [json.loads(ln)["step"] for ln in open(tmp_path / "metrics.jsonl")]
    assert steps == [1, 2]  # stopped when the window filled, at step 3, before its update


def test_skip_budget_window():
    from vlrl.skips import SkipBudget

    budget = SkipBudget(0.25, window=2)
    budget.record(4, 3, {"unreadable_image": 3})
    budget.check()  # window not full yet: 3 of 4 is judged later
    budget.record(4, 0, {})
    with pytest.raises(RuntimeError, match=r"3 of 8 prompts .*unreadable_image: 3"):
        budget.check()
    budget.record(4, 1, {})  # the window slides: 1 of 8
    budget.check()
    short = SkipBudget(0.25, window=10)
    short.record(4, 2, {})
    with pytest.raises(RuntimeError, match="2 of 4"):
        short.check(final=True)  # a run shorter than the window is judged at its last step


def test_nan_loss_skips_the_optimizer_step(tiny_model_path):
    import sys

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from toy_task import Config as ToyConfig
    from toy_task import make_env

    mcfg = ModelConfig(path=tiny_model_path)
    model, processor = load_model(mcfg), load_processor(mcfg)
    algo, tcfg = AlgoConfig(group_size=2), TrainerConfig(lr=1e-2)
    engine = make_engine(RolloutConfig(max_new_tokens=4), model, processor)
    episodes = run_episodes(engine, lambda: make_env(ToyConfig(), "train"), [0, 1], 2)
    rows = build_rows(episodes, episode_advantages(episodes, algo))
    rows[0].old_logprobs = [math.nan] * len(rows[0].old_logprobs)
    before = [p.detach().clone() for p in model.parameters()]
    opt = make_optimizer(model, tcfg)
    cfg = Config(algo=algo, trainer=tcfg, rollout=RolloutConfig(max_new_tokens=4, temperature=1.0))
    stats = update(model, processor, opt, make_scheduler(opt, tcfg, 1), rows, cfg)
    assert stats["skipped_nonfinite"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
