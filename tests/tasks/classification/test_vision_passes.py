"""Throughput: one GRPO step of task=classification encodes each image once in the rollout (the G samples of
a group share one vision pass) and once in the training forward (the group's rows share one Observation),
not G times. Counted with a wrapper around the tiny Qwen2.5-VL's vision tower."""

import pytest
import torch
from transformers.models.qwen2_5_vl import modeling_qwen2_5_vl as qwen

from vlrl.config import compose, validate
from vlrl.train import run


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cls_rl", "no_thinking"])
def test_one_vision_pass_per_image_per_group_in_rollout_and_training(tmp_path, monkeypatch, mode):
    prompts, group = 3, 4
    calls = {"rollout": [], "train": []}
    inner = qwen.Qwen2_5_VisionTransformerPretrainedModel.forward

    def counted(self, hidden_states, grid_thw=None, **kw):
        # rollout generates under no_grad; the training forward builds a graph
        calls["train" if torch.is_grad_enabled() else "rollout"].append(int(grid_thw.shape[0]))
        return inner(self, hidden_states, grid_thw=grid_thw, **kw)

    monkeypatch.setattr(qwen.Qwen2_5_VisionTransformerPretrainedModel, "forward", counted)
    cfg, task = validate(compose([
        "task=classification", "model=tiny", f"task.mode={mode}", "trainer.steps=1",
        f"trainer.prompts_per_step={prompts}", f"algo.group_size={group}", "trainer.micro_batch_size=64",
        "rollout.max_new_tokens=6", "trainer.threads=1", "trainer.progress=false", "trainer.samples_every=0",
        f"trainer.output_dir={tmp_path / 'run'}"]))
    run(cfg, task)
    # G = 4 answers per image, but each of the 3 images goes through the tower once per phase
    assert sum(calls["rollout"]) == prompts, calls
    assert sum(calls["train"]) == prompts, calls
