"""Load a policy (Qwen2-VL / Qwen2.5-VL / Qwen3-VL family) and its processor.

The same code path loads the embedded tiny checkpoint under assets/ and a real hub checkpoint
(`Qwen/Qwen2.5-VL-3B-Instruct`) or any local `save_pretrained` directory.
"""

from __future__ import annotations

import inspect
import json
import os

import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from vlrl.config import ModelConfig, UsageError, resolve_path


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, name)


def looks_like_hub_id(path: str) -> bool:
    """`org/name` (one slash, no leading `/`, `.` or `~`): what the Hugging Face hub accepts as a model id."""
    return path.count("/") == 1 and not path.startswith(("/", ".", "~")) and all(path.split("/"))


def check_model_path(path: str) -> None:
    """Refuse, with one clear message, a `model.path` that is neither a local folder nor a possible hub id."""
    local = resolve_path(path)
    if os.path.isdir(local):
        return
    if os.path.exists(local) or not looks_like_hub_id(path):
        what = "is a file, not a model folder" if os.path.exists(local) else "does not exist"
        raise UsageError(f"model.path={path!r} {what} (a relative path is looked up in the current directory, then "
                         "in the repository; a Hugging Face hub id is ORG/NAME and needs network access)")


def _from_pretrained(load, path: str, **kwargs):
    """`load(path, **kwargs)` (a transformers from_pretrained); a hub id that cannot be fetched -> UsageError."""
    check_model_path(path)
    if os.path.isdir(resolve_path(path)):
        return load(resolve_path(path), **kwargs)
    try:
        return load(path, **kwargs)
    except OSError as e:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise UsageError(f"model.path={path!r} is not a local folder, and fetching it from the Hugging Face hub failed "
                         f"({first}); hub ids need network access (or the files in the local cache)") from None


def load_processor(cfg: ModelConfig):
    path = cfg.path
    kwargs = {}
    if cfg.min_pixels is not None:
        kwargs["min_pixels"] = cfg.min_pixels
    if cfg.max_pixels is not None:
        kwargs["max_pixels"] = cfg.max_pixels
    processor = _from_pretrained(AutoProcessor.from_pretrained, path, **kwargs)
    if cfg.min_pixels is not None or cfg.max_pixels is not None:
        # Some processor versions ignore the kwargs on load: set them explicitly.
        ip = processor.image_processor
        if cfg.min_pixels is not None:
            ip.min_pixels = cfg.min_pixels
            ip.size["shortest_edge"] = cfg.min_pixels
        if cfg.max_pixels is not None:
            ip.max_pixels = cfg.max_pixels
            ip.size["longest_edge"] = cfg.max_pixels
    # Rollouts and training batches are left-padded so every response ends at the right edge.
    processor.tokenizer.padding_side = "left"
    if processor.tokenizer.pad_token is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor


def load_model(cfg: ModelConfig, device: torch.device | str = "cpu", trainable: bool = True):
    """The model, on `device`, in train mode if `trainable` (dropout stays off: configs set it to 0)."""
    device = torch.device(device)
    path = resolve_path(cfg.path)
    adapter = os.path.join(path, "adapter_config.json")
    if os.path.exists(adapter):
        # A LoRA checkpoint: its base model, then the saved adapter on top.
        with open(adapter) as f:
            path = resolve_path(json.load(f)["base_model_name_or_path"])
    model = _from_pretrained(AutoModelForImageTextToText.from_pretrained, path, dtype=pick_dtype(cfg.dtype, device),
                             attn_implementation=cfg.attn_implementation)
    model.to(device)
    if os.path.exists(adapter):
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, resolve_path(cfg.path), is_trainable=trainable)
        if not trainable:
            model = model.merge_and_unload()
    if cfg.freeze_vision:
        for p in vision_tower(model).parameters():
            p.requires_grad_(False)
    if cfg.gradient_checkpointing and trainable:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    if cfg.lora.r > 0 and trainable and not os.path.exists(adapter):
        from peft import LoraConfig, get_peft_model

        lcfg = LoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=list(cfg.lora.target_modules),
        )
        model = get_peft_model(model, lcfg)
    if not trainable:
        model.requires_grad_(False)
    # Always eval(): dropout would make rollout and training log-probs disagree.
    model.eval()
    if cfg.gradient_checkpointing and trainable:
        # transformers recomputes a checkpointed layer only while that layer module is in training mode.
        # Flip just those modules, not their children: dropout inside stays off, log-probs are unchanged.
        from transformers.modeling_layers import GradientCheckpointingLayer

        for module in model.modules():
            if isinstance(module, GradientCheckpointingLayer):
                module.training = True
    return model


def base_model(model):
    """The HF `...ForConditionalGeneration` under a peft / DDP wrapper."""
    while hasattr(model, "module"):
        model = model.module
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return model


def cache_kwarg(model) -> str:
    """The KV-cache keyword of the model's forward (and generate): `cache` in recent transformers, which
    deprecates `past_key_values`; `past_key_values` before the rename (the vLLM CPU env's 5.19). An unknown
    keyword would be swallowed by **kwargs and the cache silently left empty."""
    return "cache" if "cache" in inspect.signature(base_model(model).forward).parameters else "past_key_values"


def vision_tower(model):
    return base_model(model).model.visual
