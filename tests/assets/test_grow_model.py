"""Growing the model (wider MLPs, extra layers) leaves its outputs unchanged."""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch
from transformers import Qwen2_5_VLForConditionalGeneration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "assets", "grow_model.py")
SHIPPED = os.path.join(ROOT, "assets", "tiny-gui-grounding")


def _module():
    spec = importlib.util.spec_from_file_location("grow_model", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_grown_checkpoint_computes_the_same_outputs(tmp_path):
    out = tmp_path / "wide"
    proc = subprocess.run([sys.executable, SCRIPT, SHIPPED, str(out), "--text", "3", "--vision", "2", "--extra-layers", "2"],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    small = Qwen2_5_VLForConditionalGeneration.from_pretrained(SHIPPED).eval()
    wide = Qwen2_5_VLForConditionalGeneration.from_pretrained(out).eval()
    assert wide.config.text_config.intermediate_size == 3 * small.config.text_config.intermediate_size
    assert wide.config.vision_config.intermediate_size == 2 * small.config.vision_config.intermediate_size
    assert wide.config.text_config.num_hidden_layers == small.config.text_config.num_hidden_layers + 2
    layer = sum(p.numel() for p in wide.model.language_model.layers[-1].parameters())
    # text: 2 layers x 3 matrices x 128 x 256 new entries x 2; vision: 2 blocks x (2 x (128 x 64 + 128) + 64 x 128)
    assert sum(p.numel() for p in wide.parameters()) == sum(p.numel() for p in small.parameters()) + 393_216 + 49_664 + 2 * layer
    top = wide.model.language_model.layers[-1]
    assert top.self_attn.o_proj.weight.abs().sum() == 0 and top.mlp.down_proj.weight.abs().sum() == 0
    assert top.self_attn.q_proj.weight.abs().sum() > 0  # a trained copy, so the layer learns once o_proj moves

    torch.manual_seed(0)
    pixels, grid = torch.randn(144, 3 * 2 * 14 * 14), torch.tensor([[1, 12, 12]])
    ids = torch.randint(10, 2000, (2, 30))
    with torch.no_grad():
        feats = [m.model.get_image_features(pixels, grid, return_dict=True).pooler_output[0] for m in (small, wide)]
        logits = [m(input_ids=ids).logits for m in (small, wide)]
    torch.testing.assert_close(feats[1], feats[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(logits[1], logits[0], atol=1e-4, rtol=0)


def test_new_units_are_trainable_and_bad_multipliers_fail():
    mod = _module()
    state = {"model.layers.0.mlp.gate_proj.weight": torch.randn(4, 2), "model.layers.0.mlp.up_proj.weight": torch.randn(4, 2),
             "model.layers.0.mlp.down_proj.weight": torch.randn(2, 4), "visual.blocks.0.mlp.gate_proj.bias": torch.randn(3),
             "model.visual.blocks.0.mlp.up_proj.bias": torch.randn(3)}  # the key layout of some 4.x saves
    wide = mod.widen_state_dict(state, text_mult=2, vision_mult=3)
    assert wide["model.layers.0.mlp.gate_proj.weight"].shape == (8, 2)
    assert wide["model.layers.0.mlp.gate_proj.weight"][4:].abs().sum() > 0  # random rows: the new units are not dead
    assert wide["model.layers.0.mlp.down_proj.weight"].shape == (2, 8)
    assert torch.equal(wide["model.layers.0.mlp.down_proj.weight"][:, 4:], torch.zeros(2, 4))
    assert torch.equal(wide["visual.blocks.0.mlp.gate_proj.bias"][3:], torch.zeros(6))
    assert wide["model.visual.blocks.0.mlp.up_proj.bias"].shape == (9,)  # vision multiplier, not the text one
    with pytest.raises(ValueError, match="text=0"):
        mod.widen_state_dict(state, text_mult=0, vision_mult=1)


def test_deepen_copies_the_last_layer_with_silent_outputs_and_names_bad_counts():
    mod = _module()
    state = {"model.layers.0.self_attn.q_proj.weight": torch.randn(2, 2), "model.layers.1.self_attn.q_proj.weight": torch.randn(2, 2),
             "model.layers.1.self_attn.o_proj.weight": torch.randn(2, 2), "model.layers.1.mlp.down_proj.weight": torch.randn(2, 3),
             "model.norm.weight": torch.ones(2)}
    deep = mod.deepen_state_dict(state, num_layers=2, extra=2)
    for i in (2, 3):
        assert torch.equal(deep[f"model.layers.{i}.self_attn.q_proj.weight"], state["model.layers.1.self_attn.q_proj.weight"])
        assert torch.equal(deep[f"model.layers.{i}.self_attn.o_proj.weight"], torch.zeros(2, 2))
        assert torch.equal(deep[f"model.layers.{i}.mlp.down_proj.weight"], torch.zeros(2, 3))
    deep["model.layers.2.self_attn.q_proj.weight"].add_(1)  # a copy, not a view of the source layer
    assert not torch.equal(deep["model.layers.2.self_attn.q_proj.weight"], state["model.layers.1.self_attn.q_proj.weight"])
    assert mod.deepen_state_dict(state, num_layers=2, extra=0).keys() == state.keys()  # no layer added
    with pytest.raises(ValueError, match="extra=-1"):
        mod.deepen_state_dict(state, num_layers=2, extra=-1)
    with pytest.raises(ValueError, match="num_layers=3"):
        mod.deepen_state_dict(state, num_layers=3, extra=1)
