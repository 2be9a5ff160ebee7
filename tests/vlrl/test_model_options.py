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


def test_lora_train_resume_evaluate(tmp_path, capsys):
    out, straight = tmp_path / "lora", tmp_path / "straight"
    common = TOY + ["model.lora.r=4", f"trainer.output_dir={out}"]
    run(*validate(compose(common + ["trainer.steps=1"])))
    ckpt = out / "checkpoints" / "step_0000001"
    assert (ckpt / "adapter_config.json").exists() and not (ckpt / "model.safetensors").exists()
    capsys.readouterr()
    run(*validate(compose(common + ["trainer.steps=2", "trainer.resume=auto"])))
    assert f"resuming from {ckpt}" in capsys.readouterr().out
    adapter = load_file(out / "checkpoints" / "step_0000002" / "adapter_model.safetensors")
    assert any("lora_B" in k and v.abs().sum() > 0 for k, v in adapter.items())  # B starts at 0: it trained
    # The resume really continued the step-1 adapter, optimizer and RNG: the same adapter as two steps in one run
    # (a run restarted from fresh adapters, or without the saved Adam moments, would differ).
    run(*validate(compose(TOY + ["model.lora.r=4", f"trainer.output_dir={straight}", "trainer.steps=2"])))
    other = load_file(straight / "checkpoints" / "step_0000002" / "adapter_model.safetensors")
    assert adapter.keys() == other.keys()
    assert all(torch.equal(adapter[k], other[k]) for k in adapter)
    first = load_file(ckpt / "adapter_model.safetensors")
    assert any(not torch.equal(first[k], adapter[k]) for k in first)  # and step 2 changed it
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


def test_gradient_checkpointing_recomputes_with_identical_logprobs_and_grads(tiny_model_path):
    """Each block's forward runs again in backward, and log-probs / gradients equal the plain model's."""
    from PIL import Image

    from vlrl.config import ModelConfig
    from vlrl.episode import Observation
    from vlrl.forward import Row, response_logprobs
    from vlrl.models import load_model, load_processor

    processor = load_processor(ModelConfig(path=tiny_model_path))
    obs = Observation(messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "hi"}]}],
                      images=[Image.new("RGB", (56, 84), "red")])
    rows = [Row(obs, [40, 41, 42]), Row(obs, [50, 2])]
    results = []
    for ckpt in (False, True):
        torch.manual_seed(0)
        model = load_model(ModelConfig(path=tiny_model_path, gradient_checkpointing=ckpt))
        mlp = model.model.language_model.layers[0].mlp
        calls = {"n": 0}
        forward = mlp.forward

        def counting(*a, _f=forward, **k):
            calls["n"] += 1
            return _f(*a, **k)

        mlp.forward = counting
        logp, mask = response_logprobs(model, processor, rows)
        (logp * mask).sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((logp.detach(), grads, calls["n"]))
    (lp0, g0, n0), (lp1, g1, n1) = results
    assert n0 == 1 and n1 == 2  # recomputed in backward only with checkpointing
    torch.testing.assert_close(lp0, lp1, rtol=0, atol=1e-6)
    assert g0.keys() == g1.keys()
    for k in g0:
        torch.testing.assert_close(g0[k], g1[k], rtol=1e-5, atol=1e-6)
