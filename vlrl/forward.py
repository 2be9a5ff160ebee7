"""Training forward: per-token log-probs of responses, with one vision pass per distinct observation.

The G episodes of a group share their first observation. Instead of running the vision tower on G
copies of the same image (and again in backward), the image features of each distinct observation
in a micro-batch are computed once and handed to the language model for every row that uses them
(`mm_encoder_outputs`); autograd sums the G rows' gradients into the one vision pass.
With `shared_prefix` the language model also runs each distinct prompt once (vlrl/shared_prefix.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import BaseModelOutputWithPooling

from vlrl.algos import entropy_from_logits, token_logprobs
from vlrl.encoding import (Encoded, allowed_mask, banned_token_ids, encode, left_pad, mask_banned, mask_disallowed,
                           text_position_ids)
from vlrl.episode import Observation
from vlrl.models import base_model
from vlrl.shared_prefix import shared_prefix_logits


@dataclass
class Row:
    """One training sequence: an observation and a response to it."""

    observation: Observation
    response_ids: list[int]


def right_aligned(values: list[list[float]], width: int, fill: float = 0.0) -> torch.Tensor:
    """Ragged rows -> [N, width] with each row flush right (how responses sit in a left-padded batch)."""
    out = torch.full((len(values), width), fill, dtype=torch.float32)
    for i, v in enumerate(values):
        if v:
            out[i, width - len(v) :] = torch.tensor(v, dtype=torch.float32)
    return out


def _vision_features(model, encs: list[Encoded], modality: str) -> list[list[torch.Tensor]]:
    """Per distinct encoding, the list of its images' (or videos') merged features, one vision pass."""
    pix_key, grid_key = ("pixel_values", "image_grid_thw") if modality == "image" else ("pixel_values_videos", "video_grid_thw")
    with_media = [e for e in encs if grid_key in e.vision]
    if not with_media:
        return [[] for _ in encs]
    inner = base_model(model).model
    device = next(inner.parameters()).device
    pixels = torch.cat([e.vision[pix_key] for e in with_media]).to(device)
    grids = torch.cat([e.vision[grid_key] for e in with_media]).to(device)
    fn = inner.get_image_features if modality == "image" else inner.get_video_features
    feats = list(fn(pixels, grids, return_dict=True).pooler_output)
    per_enc, k = [], 0
    for e in encs:
        n = len(e.vision[grid_key]) if grid_key in e.vision else 0
        per_enc.append(feats[k : k + n])
        k += n
    return per_enc


def response_logprobs(model, processor, rows: list[Row], temperature: float = 1.0, with_entropy: bool = False,
                      shared_prefix: bool = False):
    """Log-probs of each row's response tokens under `model`.

    Returns logp [N, L] and mask [N, L] (L = longest response; rows right-aligned), and the masked
    mean entropy (a float) when `with_entropy`. `shared_prefix`: each distinct prompt runs through the
    language model once (vlrl/shared_prefix.py); same results, fewer tokens.
    """
    device = next(base_model(model).parameters()).device
    pad_id = processor.tokenizer.pad_token_id
    encs = [encode(processor, r.observation) for r in rows]

    # Distinct observations by identity: a group's rows share the same Observation object.
    distinct: dict[int, int] = {}
    uniq: list[Encoded] = []
    for r, e in zip(rows, encs):
        if id(r.observation) not in distinct:
            distinct[id(r.observation)] = len(uniq)
            uniq.append(e)
    slot = [distinct[id(r.observation)] for r in rows]

    width = max(len(r.response_ids) for r in rows)
    if shared_prefix:
        encoder_outputs = {}
        for modality in ("image", "video"):
            per_uniq = _vision_features(model, uniq, modality)
            if any(per_uniq):
                encoder_outputs[modality] = BaseModelOutputWithPooling(pooler_output=[f for fs in per_uniq for f in fs])
        logits, tokens = shared_prefix_logits(model, uniq, slot, [r.response_ids for r in rows], pad_id,
                                              encoder_outputs, device)
    else:
        logits, tokens = _full_logits(model, rows, encs, uniq, slot, width, pad_id, device)
    return _finish(processor, rows, logits, tokens, width, temperature, with_entropy, device)


def _full_logits(model, rows: list[Row], encs: list[Encoded], uniq: list[Encoded], slot: list[int], width: int,
                 pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain forward: every row as [prompt + response], left-padded. Returns logits [N, W, V], tokens [N, W]."""
    seqs = [torch.cat([e.input_ids, torch.tensor(r.response_ids, dtype=torch.long)]) for r, e in zip(rows, encs)]
    mms = [torch.cat([e.mm_token_type_ids, torch.zeros(len(r.response_ids), dtype=torch.long)]) for r, e in zip(rows, encs)]
    input_ids, attention_mask = left_pad(seqs, pad_id)
    mm_token_type_ids, _ = left_pad(mms, 0)
    inputs = {
        "input_ids": input_ids.to(device),
        "attention_mask": attention_mask.to(device),
        "mm_token_type_ids": mm_token_type_ids.to(device),
    }
    encoder_outputs = {}
    for modality, grid_key in (("image", "image_grid_thw"), ("video", "video_grid_thw")):
        per_uniq = _vision_features(model, uniq, modality)
        if any(per_uniq):
            per_row = [f for s in slot for f in per_uniq[s]]
            encoder_outputs[modality] = BaseModelOutputWithPooling(pooler_output=per_row)
            inputs[grid_key] = torch.cat([encs[i].vision[grid_key] for i in range(len(rows)) if grid_key in encs[i].vision]).to(device)
    if "video" in encoder_outputs and all("second_per_grid_ts" in e.vision for e in encs if "video_grid_thw" in e.vision):
        # Per row, like the grids: temporal positions spaced by each video's real time step, as in rollout.
        inputs["second_per_grid_ts"] = torch.cat([e.vision["second_per_grid_ts"] for e in encs if "video_grid_thw" in e.vision]).to(device)
    if encoder_outputs:
        inputs["mm_encoder_outputs"] = encoder_outputs
    else:
        inputs["position_ids"] = text_position_ids(inputs["attention_mask"])

    logits = model(**inputs, logits_to_keep=width + 1, use_cache=False).logits[:, :-1]  # [N, L, V]
    return logits, inputs["input_ids"][:, -width:]


def _finish(processor, rows: list[Row], logits: torch.Tensor, tokens: torch.Tensor, width: int, temperature: float,
            with_entropy: bool, device):
    """Banned/allowed masks, then log-probs [N, W] of `tokens` and the response mask (and entropy)."""
    logits = mask_banned(logits, banned_token_ids(processor), inplace=True)
    allowed = allowed_mask([r.observation for r in rows], width, logits.shape[-1], device)
    if allowed is not None:
        # Responses sit flush right: shift each row's per-position mask to its columns.
        for i, r in enumerate(rows):
            shift = width - len(r.response_ids)
            allowed[i] = torch.roll(allowed[i], shift, dims=0)
            allowed[i, :shift] = True  # padding columns stay finite
        mask_disallowed(logits, allowed)
    mask = right_aligned([[1.0] * len(r.response_ids) for r in rows], width).to(device)
    # A padding column can hold a banned token (an image placeholder of a short prompt's tail): its -inf log-prob
    # would turn every `(logp * mask).sum()` into NaN, so padding columns are 0, not just masked.
    logp = token_logprobs(logits.float(), tokens, temperature).masked_fill(mask == 0, 0.0)
    if not with_entropy:
        return logp, mask
    with torch.no_grad():
        entropy = float(entropy_from_logits(logits.float() / temperature, mask))
    return logp, mask, entropy
