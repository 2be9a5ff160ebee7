"""Rollout prefill once per prompt: the G samples of a group share the prompt's KV cache.

`generate(num_return_sequences=G)` expands the prompts to B*G rows before its first forward, so the prompt
(hundreds of image tokens) goes through the language model G times. Here the prompts minus their last
token run once (B rows, vision included), the cache is repeated to B*G rows, and `generate` continues from
it: its first step feeds only each row's last prompt token. Positions are the model's own (get_rope_index,
as in the training forward), and `rope_deltas` is set so transformers' decoding positions continue from
them; the sampled tokens' log-probs equal the training forward's (tests/vlrl/rollout/).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicCache

from vlrl.models import base_model, cache_kwarg
from vlrl.shared_prefix import prompt_positions

GRID_KEYS = ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")


def can_share(batch: dict[str, torch.Tensor]) -> bool:
    """Every prompt ends with a text token (the token generate's first step feeds) and has two or more."""
    return batch["input_ids"].shape[1] >= 2 and not bool(batch["mm_token_type_ids"][:, -1].any())


@torch.no_grad()
def prefill_once(model, batch: dict[str, torch.Tensor], n: int) -> dict:
    """`generate` kwargs for B left-padded prompts (`batch`: collate_prompts on the device) sampled `n` times
    each: input_ids / attention_mask / mm_token_type_ids repeated to [B*n, P] (row order: n samples per
    prompt, as num_return_sequences gives) and `cache`, the prompts' KV cache for P - 1 tokens, repeated."""
    hf = base_model(model)
    ids, mask, mm = batch["input_ids"], batch["attention_mask"], batch["mm_token_type_ids"]
    grids = {k: batch[k] for k in GRID_KEYS if k in batch}
    pos = prompt_positions(hf, ids, mask, mm, grids)  # [3, B, P]
    vision = {k: v for k, v in batch.items() if k not in ("input_ids", "attention_mask", "mm_token_type_ids",
                                                          "second_per_grid_ts")}
    cache = DynamicCache(config=hf.config)
    key = cache_kwarg(hf)
    hf(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :, :-1], **{key: cache}, use_cache=True,
       logits_to_keep=1, **vision)
    cache.batch_repeat_interleave(n)
    # Decoding positions are (attention_mask.cumsum - 1) + rope_deltas: deltas make the last prompt token land on
    # its M-RoPE position, and every generated token one further.
    real = mask.long().sum(-1)  # [B]
    hf.model.rope_deltas = (pos[0, :, -1] + 1 - real).unsqueeze(-1).repeat_interleave(n, dim=0)  # [B*n, 1]
    return {"input_ids": ids.repeat_interleave(n, dim=0), "attention_mask": mask.repeat_interleave(n, dim=0),
            "mm_token_type_ids": mm.repeat_interleave(n, dim=0), key: cache}
