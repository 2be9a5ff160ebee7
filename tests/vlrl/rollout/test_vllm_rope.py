"""The M-RoPE layout handed to vLLM (no vLLM needed: runs in the main environment).

The tiny checkpoints' `mrope_section` of 32 ones is transformers' interleaved layout (frequency i
follows axis i % 3). vLLM accepts only three sections; its interleaved form [11, 11, 10] is the same
per-frequency assignment, so the engine passes it as `hf_overrides` and the shipped configs stay
as they are: a three-section config read by transformers is contiguous and changes the outputs
(second test).
"""

import copy
import json
import os

import pytest
import torch
from PIL import Image

from vlrl.config import ModelConfig
from vlrl.encoding import collate_prompts, encode
from vlrl.episode import Observation
from vlrl.models import load_model, load_processor
from vlrl.rollout.vllm_engine import hf_axes, vllm_axes, vllm_rope_overrides

ASSETS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                      "assets")
CHECKPOINTS = sorted(d for d in os.listdir(ASSETS) if os.path.isfile(os.path.join(ASSETS, d, "config.json")))


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_override_gives_vllm_the_same_axis_per_frequency(name):
    with open(os.path.join(ASSETS, name, "config.json")) as f:
        rope = json.load(f)["text_config"]["rope_parameters"]
    over = vllm_rope_overrides(rope)
    if len(rope["mrope_section"]) == 3:
        assert over is None
        return
    new = over["text_config"]["rope_parameters"]
    assert len(new["mrope_section"]) == 3 and new["rope_theta"] == rope["rope_theta"]
    assert vllm_axes(new["mrope_section"], new["mrope_interleaved"]) == hf_axes(rope["mrope_section"])


def test_layouts():
    assert hf_axes([1] * 6) == [0, 1, 2, 0, 1, 2]
    assert hf_axes([2, 1, 1]) == [0, 0, 1, 2]
    assert vllm_axes([11, 11, 10], True) == hf_axes([1] * 32)
    assert vllm_axes([16, 24, 24], False) == [0] * 16 + [1] * 24 + [2] * 24
    assert vllm_rope_overrides({"mrope_section": [16, 24, 24]}) is None
    assert vllm_rope_overrides({"mrope_section": [1] * 32})["text_config"]["rope_parameters"]["mrope_section"] == [11, 11, 10]
    with pytest.raises(ValueError, match="mrope_section"):
        vllm_rope_overrides({"mrope_section": [1, 2, 1, 3, 1]})  # t,h,h,w,t,t,t,h: neither contiguous nor interleaved


def test_three_contiguous_sections_would_change_the_tiny_model(tiny_model_path):
    """Why the shipped configs are not rewritten: transformers reads three sections as contiguous
    blocks, a different rotary layout, so image-prompt logits change."""
    cfg = ModelConfig(path=tiny_model_path, dtype="float32")
    model, processor = load_model(cfg, trainable=False), load_processor(cfg)
    obs = Observation(messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}],
                      images=[Image.new("RGB", (112, 84), (200, 10, 10))])
    batch = collate_prompts([encode(processor, obs)], processor.tokenizer.pad_token_id)
    with torch.no_grad():
        ref = model(**batch).logits
        other = copy.deepcopy(model)
        rotary = other.model.language_model.rotary_emb
        rotary.mrope_section = [11, 11, 10]
        assert model.model.language_model.rotary_emb.mrope_section == [1] * 32
        changed = other(**batch).logits
    assert (ref - changed).abs().max().item() > 1e-3
