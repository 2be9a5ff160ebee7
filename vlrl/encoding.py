"""Observation -> model inputs, shared by rollout and training so both see identical tokens.

Prompts are left-padded: every response then ends at the right edge and the training forward only
needs logits for the last `L` positions. Qwen's 3-D M-RoPE positions are computed by the model from
`attention_mask` + `mm_token_type_ids` + grids, so padding does not shift them. (Without
`mm_token_type_ids`, transformers 5.x silently falls back to 1-D positions: see docs/INSTALL.md.)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vlrl.episode import Observation

VISION_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw")


@dataclass
class Encoded:
    """One observation, processed once. Tensors have no batch dimension except the vision ones."""

    input_ids: torch.Tensor  # [P]
    mm_token_type_ids: torch.Tensor  # [P]
    vision: dict[str, torch.Tensor]  # pixel_values [N_patches, C], image_grid_thw [n_images, 3], ...


def encode(processor, obs: Observation) -> Encoded:
    """Process `obs` (cached on the observation: a group's G episodes share one encoding)."""
    cached = obs.cache.get("encoded")
    if cached is not None:
        return cached
    text = processor.apply_chat_template(obs.messages, add_generation_prompt=True, tokenize=False)
    kwargs = {}
    if obs.images:
        kwargs["images"] = list(obs.images)
    if obs.videos:
        kwargs["videos"] = [list(v) for v in obs.videos]
    out = processor(text=[text], return_tensors="pt", **kwargs, **obs.processor_kwargs)
    ids = out["input_ids"][0]
    mm = out.get("mm_token_type_ids")
    mm = torch.zeros_like(ids) if mm is None else mm[0]
    vision = {k: out[k] for k in VISION_KEYS if k in out and out[k] is not None}
    enc = Encoded(input_ids=ids, mm_token_type_ids=mm, vision=vision)
    obs.cache["encoded"] = enc
    return enc


VISION_SPECIAL_TOKENS = ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")


def banned_token_ids(processor) -> list[int]:
    """Tokens a response must never contain: vision placeholders would make the training forward
    expect image features that do not exist. Sampling excludes them, and log-probs (rollout and
    training) are taken over the same reduced vocabulary so the two stay equal."""
    tok = processor.tokenizer
    ids = {tok.convert_tokens_to_ids(t) for t in VISION_SPECIAL_TOKENS}
    return sorted(i for i in ids if i is not None and i != tok.unk_token_id)


def mask_banned(logits: torch.Tensor, banned: list[int], inplace: bool = False) -> torch.Tensor:
    """logits [..., V] with the banned ids set to -inf. `inplace` avoids a vocab-sized copy when the
    caller owns the tensor (the training forward's fresh logits)."""
    if not banned:
        return logits
    if not inplace:
        logits = logits.clone()
    logits[..., banned] = float("-inf")
    return logits


def allowed_mask(observations: list, length: int, vocab: int, device=None) -> torch.Tensor | None:
    """[N, length, V] bool: True where response position j of row i may hold a token (from each
    observation's `allowed_ids`; unconstrained rows and positions are all True). None when no
    observation is constrained, so unconstrained tasks pay nothing."""
    if not any(getattr(o, "allowed_ids", None) for o in observations):
        return None
    mask = torch.ones(len(observations), length, vocab, dtype=torch.bool, device=device)
    for i, obs in enumerate(observations):
        for j, ids in enumerate((obs.allowed_ids or [])[:length]):
            mask[i, j] = False
            if isinstance(ids, range) and ids.step == 1:
                mask[i, j, ids.start : ids.stop] = True
            else:
                mask[i, j, torch.as_tensor(list(ids), dtype=torch.long)] = True
    return mask


def mask_disallowed(logits: torch.Tensor, allowed: torch.Tensor | None) -> torch.Tensor:
    """In place: logits [..., V] set to -inf where `allowed` (same shape, bool) is False."""
    if allowed is not None:
        logits.masked_fill_(~allowed, float("-inf"))
    return logits


def left_pad(seqs: list[torch.Tensor], pad_value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[N] sequences of varying length -> (padded [N, S], attention_mask [N, S]), padded on the left."""
    width = max(len(s) for s in seqs)
    out = torch.full((len(seqs), width), pad_value, dtype=seqs[0].dtype)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, width - len(s) :] = s
            mask[i, width - len(s) :] = 1
    return out, mask


def collate_vision(encs: list[Encoded]) -> dict[str, torch.Tensor]:
    """Concatenate vision tensors of several observations in row order (what Qwen's forward expects)."""
    batch: dict[str, torch.Tensor] = {}
    for key in VISION_KEYS:
        parts = [e.vision[key] for e in encs if key in e.vision]
        if parts:
            batch[key] = torch.cat(parts, dim=0)
    return batch


def collate_prompts(encs: list[Encoded], pad_id: int) -> dict[str, torch.Tensor]:
    """Batch for `generate`: left-padded input_ids, attention_mask, mm_token_type_ids and vision."""
    input_ids, attention_mask = left_pad([e.input_ids for e in encs], pad_id)
    mm, _ = left_pad([e.mm_token_type_ids for e in encs], 0)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "mm_token_type_ids": mm, **collate_vision(encs)}


def text_position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """[3, N, S] positions for a text-only batch (M-RoPE with t = h = w), robust to left padding."""
    pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    return pos.unsqueeze(0).expand(3, -1, -1)
