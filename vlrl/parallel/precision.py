"""Mixed precision of a run, from `accelerate launch` (`mixed_precision:` in configs/accelerate/*.yaml).

One documented choice for data parallel and FSDP2, `bf16`: the weights stay float32 (the master copy the optimizer
steps; `model.dtype=auto` resolves to float32 under it) and every forward (rollouts, training, evaluation) runs
under `torch.autocast(dtype=bfloat16)`; backward runs outside autocast (its ops follow the forward's dtypes).
fp16 and fp8 need loss scaling, which is not wired: refused at start. ZeRO-3 passes bf16 to DeepSpeed (its bf16
weights with fp32 master partitions, accelerate writes that into the DeepSpeed config), so autocast stays off there.
A plain `python vlrl/train.py` reads the same variable accelerate exports (ACCELERATE_MIXED_PRECISION).
"""

from __future__ import annotations

import os
from contextlib import nullcontext

import torch

MODES = ("no", "bf16")


def requested() -> str:
    """The mixed precision `accelerate launch` exported: "no", "bf16", "fp16" or "fp8"."""
    return os.environ.get("ACCELERATE_MIXED_PRECISION", "no").strip().lower() or "no"


def autocast_dtype(mode: str, model_dtype: str) -> torch.dtype | None:
    """The autocast dtype of a run (None: no autocast). Stops with a clear error for what is not wired:
    fp16 / fp8, or bf16 together with half-precision weights (`model.dtype`), which would leave no fp32 master."""
    if mode not in MODES:
        raise SystemExit(f"vlrl: accelerate mixed_precision={mode!r} is not supported (it needs loss scaling); "
                         "use mixed_precision: bf16 (bf16 autocast, fp32 weights) or 'no'")
    if mode == "no":
        return None
    if model_dtype not in ("auto", "float32"):
        raise SystemExit(f"vlrl: accelerate mixed_precision=bf16 keeps float32 master weights and runs forwards under bf16 "
                         f"autocast, but model.dtype={model_dtype}; set model.dtype=auto (or float32), or mixed_precision: "
                         "'no' to train in the weights' own dtype")
    return torch.bfloat16


def weights_dtype(model_dtype: str, autocast: torch.dtype | None) -> str:
    """`model.dtype` as the run loads it: float32 master weights under autocast when `auto` was asked for."""
    return "float32" if autocast is not None and model_dtype == "auto" else model_dtype


def autocast(dtype: torch.dtype | None, device: torch.device | str):
    """Context for forwards: bf16 autocast on `device`'s type, or nothing."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)
