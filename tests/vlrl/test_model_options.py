"""LoRA adapters and a frozen vision tower through the full train -> checkpoint -> resume/evaluate path."""

import os

import torch
from safetensors.torch import load_file

from vlrl.config import compose, validate
from vlrl.evaluate import evaluate
from vlrl.train import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]", "trainer.progress=false",
       "rollout.max_new_tokens=6", "algo.group_size=4", "trainer.prompts_per_step=2", "trainer.lr=1e-2"]


def test_lora_train_resume_evaluate(tmp_path):
    out = tmp_path / "lora"
    common = TOY + ["model.lora.r=4", f"trainer.output_dir={out}"]
    run(*validate(compose(common + ["trainer.steps=1"])))
    ckpt = out / "checkpoints" / "step_0000001"
    assert (ckpt / "adapter_config.json").exists() and not (ckpt / "model.safetensors").exists()
    run(*validate(compose(common + ["trainer.steps=2", "trainer.resume=auto"])))
    adapter = load_file(out / "checkpoints" / "step_0000002" / "adapter_model.safetensors")
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in adapter.items())  # B starts at 0: it trained
    report, _ = evaluate(*validate(compose(TOY + [f"model.path={out / 'checkpoints' / 'step_0000002'}",
                                                  "eval.num_examples=4"])), progress=False)
    assert report["count"] == 4


def test_freeze_vision_keeps_vision_weights(tmp_path):
    out = tmp_path / "frozen"
    run(*validate(compose(TOY + ["model.freeze_vision=true", "trainer.steps=2", f"trainer.output_dir={out}"])))
    before = load_file(os.path.join(ROOT, "assets", "tiny-qwen2.5-vl", "model.safetensors"))
    after = load_file(out / "checkpoints" / "step_0000002" / "model.safetensors")
    vision = [k for k in before if k.startswith("visual.")]
    text = [k for k in before if k.startswith("model.layers.")]
    assert vision and text
    assert all(torch.equal(before[k], after[k]) for k in vision)
    assert any(not torch.equal(before[k], after[k]) for k in text)
