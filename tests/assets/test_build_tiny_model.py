"""The embedded model is reproducible: rebuilding it gives the shipped files bit for bit."""

import hashlib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED = os.path.join(ROOT, "assets", "tiny-qwen2.5-vl")


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _config_without_version_stamp(path):
    # transformers writes its own version into config.json; a newer release changes only that line.
    config = json.load(open(path))
    config.pop("transformers_version", None)
    return config


def test_rebuild_is_bit_identical(tmp_path):
    out = tmp_path / "tiny"
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "assets", "build_tiny_model.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("model.safetensors", "tokenizer.json", "chat_template.jinja", "processor_config.json"):
        assert _sha(out / name) == _sha(os.path.join(SHIPPED, name)), name
    assert _config_without_version_stamp(out / "config.json") == _config_without_version_stamp(os.path.join(SHIPPED, "config.json"))


def test_shipped_model_is_small_and_real():
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    size = sum(os.path.getsize(os.path.join(SHIPPED, f)) for f in os.listdir(SHIPPED))
    assert size < 8 * 2**20
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(SHIPPED)
    tok = AutoProcessor.from_pretrained(SHIPPED).tokenizer
    assert all(len(tok(str(n), add_special_tokens=False)["input_ids"]) == 1 for n in range(1024))
    for special in ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>", "<|endoftext|>"):
        assert tok.convert_tokens_to_ids(special) is not None
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
