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
    cfg, task = validate(compose(TOY + ["task.corrupt_every=2", "trainer.steps=2", "trainer.prompts_per_step=4",
                                        f"trainer.output_dir={out}"]))
    with pytest.warns(UserWarning, match="corrupt"):
        run(cfg, task)
    records = [json.loads(ln) for ln in open(out / "metrics.jsonl")]
    assert [r["skipped_samples"] for r in records] == [2.0, 2.0]
    assert [r["episodes"] for r in records] == [8.0, 8.0]  # 2 good prompts x G=4


def test_all_samples_corrupt_still_steps(tmp_path):
    cfg, task = validate(compose(TOY + ["task.corrupt_every=1", "trainer.steps=1", f"trainer.output_dir={tmp_path}"]))
    with pytest.warns(UserWarning):
        metrics = run(cfg, task)
    assert metrics["skipped_samples"] == 4.0 and metrics["episodes"] == 0.0


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
