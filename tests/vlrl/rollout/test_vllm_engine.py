"""vLLM engine (GPU only; skipped and reported as skipped elsewhere)."""

import pytest
import torch
from PIL import Image

from vlrl.config import ModelConfig, RolloutConfig
from vlrl.episode import Observation
from vlrl.forward import Row, response_logprobs, right_aligned
from vlrl.models import load_model, load_processor

pytestmark = pytest.mark.gpu


def test_vllm_logprobs_match_training_forward_and_weights_sync(tiny_model_path):
    pytest.importorskip("vllm")
    from vlrl.rollout.vllm_engine import VLLMEngine

    cfg = ModelConfig(path=tiny_model_path, dtype="float32")
    model, processor = load_model(cfg, "cuda"), load_processor(cfg)
    engine = VLLMEngine(model, processor, RolloutConfig(engine="vllm", max_new_tokens=8))
    obs = Observation(messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}],
                      images=[Image.new("RGB", (112, 112), (200, 10, 10))])
    group = engine.generate([obs], n=4)[0]
    rows = [Row(obs, s.response_ids) for s in group]
    with torch.no_grad():
        logp, mask = response_logprobs(model, processor, rows)
    old = right_aligned([s.logprobs for s in group], logp.shape[1]).cuda()
    assert ((logp - old).abs() * mask).max().item() < 1e-2  # vLLM kernels differ from HF; bf16-level tolerance
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    engine.sync_weights()
    after = engine.generate([obs], n=1, greedy=True)[0][0]
    with torch.no_grad():
        lp, _ = response_logprobs(model, processor, [Row(obs, after.response_ids)])
    assert abs(lp.sum().item() - sum(after.logprobs)) < 1e-1
