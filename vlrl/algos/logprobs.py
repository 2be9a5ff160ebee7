"""Log-prob utilities over logits: per-token log-probs at a temperature, entropy, per-sequence sums;
and the shape / masking helpers the losses share. Memory-aware for large vocabularies (row chunks)."""

from __future__ import annotations

import torch


def _check_same_shape(name: str, t: torch.Tensor, ref: torch.Tensor) -> None:
    if t.shape != ref.shape:
        raise ValueError(f"{name} must have shape {tuple(ref.shape)}, got {tuple(t.shape)}")


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over mask != 0 (0 when nothing is active). x, mask: same shape."""
    return torch.where(mask, x, torch.zeros_like(x)).sum() / mask.sum().clamp(min=1)


# Rows of logits processed at once: bounds the float32 temporaries at chunk * V elements.
_ROW_CHUNK = 1024


def _upcast(x: torch.Tensor) -> torch.Tensor:
    # bf16 / fp16 softmax statistics lose most of their precision over a large vocabulary.
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def entropy_from_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Masked mean entropy of softmax(logits).

    ``H = logsumexp(z) - sum(softmax(z) * z)`` per token, computed in chunks of rows, at least in
    float32, so a bf16 ``[B, L, V]`` input never gets a full float32 copy.

    logits: [B, L, V]; mask: [B, L]. Returns a 0-d tensor (float32 for half-precision logits;
    differentiable).
    """
    if logits.dim() != 3:
        raise ValueError(f"logits must be [B, L, V], got shape {tuple(logits.shape)}")
    _check_same_shape("mask", mask, logits[..., 0])
    flat = logits.reshape(-1, logits.shape[-1])
    parts = []
    for chunk in flat.split(_ROW_CHUNK):
        z = _upcast(chunk)
        p = torch.softmax(z, dim=-1)
        # Vocab entries masked to -inf have p == 0; 0 * -inf would be NaN in the value and the grad.
        z_finite = torch.where(torch.isfinite(z), z, torch.zeros_like(z))
        parts.append(torch.logsumexp(z, dim=-1) - (p * z_finite).sum(dim=-1))
    ent = torch.cat(parts).view(mask.shape)
    return _masked_mean(ent, mask.bool())


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probs of `tokens` under ``softmax(logits / temperature)``.

    ``log p = z[token] / T - logsumexp(z / T)``: a gather and a logsumexp instead of a full
    log_softmax. Non-float32/64 logits (bf16) and T != 1 go row-chunk by row-chunk so the upcast or
    scaled copy is never the size of the whole ``[B, L, V]`` tensor.

    logits: [B, L, V]; tokens: [B, L] int64. Returns [B, L] (float32 for half-precision logits).
    """
    if logits.dim() != 3:
        raise ValueError(f"logits must be [B, L, V], got shape {tuple(logits.shape)}")
    _check_same_shape("tokens", tokens, logits[..., 0])
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")
    index = tokens.long().unsqueeze(-1)
    if temperature == 1.0 and logits.dtype in (torch.float32, torch.float64):
        picked = logits.gather(-1, index).squeeze(-1)
        return picked - torch.logsumexp(logits, dim=-1)
    flat = logits.reshape(-1, logits.shape[-1])
    flat_idx = index.reshape(-1, 1)
    parts = []
    for chunk, idx in zip(flat.split(_ROW_CHUNK), flat_idx.split(_ROW_CHUNK)):
        z = _upcast(chunk)
        if temperature != 1.0:
            z = z / temperature
        parts.append(z.gather(-1, idx).squeeze(-1) - torch.logsumexp(z, dim=-1))
    return torch.cat(parts).view(tokens.shape)


def sequence_logprob(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-prob of each whole response: the sum of its token log-probs.

    Used for per-action ratios in VLA policies, where one action is D tokens.

    logp, mask: [B, L]. Returns [B].
    """
    _check_same_shape("mask", mask, logp)
    return torch.where(mask.bool(), logp, torch.zeros_like(logp)).sum(dim=-1)
