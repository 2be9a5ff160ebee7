"""Shared-prefix training forward: each distinct prompt through the language model once (Prefix Grouper).

The G rows of a group share one Observation, so their sequences share the whole prompt. The plain forward
runs every row as [prompt + response]: the prompt is computed G times, forward and backward. Here the
distinct prompts (minus their last token) run once, batched, with gradients and a KV cache; the cache is
indexed out to the rows (autograd sums the rows' gradients back into the one prefix); then each row runs
[last prompt token + response] attending to its prompt's keys and values. Starting the suffix at the last
prompt token makes its logits line up exactly with the plain forward's (`logits_to_keep = L + 1`).

Same positions as the full sequence: the prompts' 3-D M-RoPE positions come from the model's own
`get_rope_index` (the function the plain forward uses), and a response, being text, continues from the
prompt's last position one step per token. Outputs and gradients equal the plain forward's up to float
rounding (tests/vlrl/test_shared_prefix.py).

The two passes use their own cache layers, each safe to replay (gradient checkpointing recomputes a layer's
forward in backward, calling the cache again): the prefix pass's layers keep the last keys/values given
(a replay stores equal ones), the suffix pass's layers read the prefix and store nothing. So transformers'
checkpointed layers may keep the cache (`_can_checkpoint_with_cache`, set only for these two calls).

Limit (`resolve`): FSDP2 is not supported yet (off by default there, refused when asked for).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from transformers.cache_utils import Cache, DynamicLayer
from transformers.modeling_layers import GradientCheckpointingLayer

from vlrl.config import UsageError
from vlrl.encoding import Encoded, left_pad, text_position_ids
from vlrl.models import base_model, cache_kwarg

GRID_KEYS = ("image_grid_thw", "video_grid_thw", "second_per_grid_ts")


class _PrefixLayer(DynamicLayer):
    """Prefix pass: keeps the keys/values [U, H, P - 1, D] it is given (replacing: a checkpoint replay stores the same)."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self.values = key_states, value_states
        return key_states, value_states


class _SuffixLayer(DynamicLayer):
    """Suffix pass: the rows' prefix keys/values [N, H, P - 1, D] in front of the new ones; stores nothing."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values = keys, values

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        return torch.cat([self.keys, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)


@contextmanager
def _checkpointed_layers_keep_cache(model):
    """Let gradient-checkpointed decoder layers use the (replay-safe) caches above during the two passes."""
    layers = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    for m in layers:
        m._can_checkpoint_with_cache = True
    try:
        yield
    finally:
        for m in layers:
            del m._can_checkpoint_with_cache  # back to the class's False


UNSUPPORTED_BACKENDS = ("fsdp2",)  # FSDP2 frees a block's gathered weights after its first backward of the step


def resolve(requested: bool | None, backend: str) -> bool:
    """Whether the training forward shares prompts: `trainer.shared_prefix` under the run's backend.

    requested: the field (None = where supported); backend: the strategy's name (vlrl/parallel/). Two forwards
    per backward work with data parallel and ZeRO-3, not with FSDP2: asking for it there is refused."""
    if requested is None:
        return backend not in UNSUPPORTED_BACKENDS
    if requested and backend in UNSUPPORTED_BACKENDS:
        raise UsageError(f"trainer.shared_prefix=true is not supported under {backend} yet (two forwards per "
                         "backward); leave it unset (null) or set trainer.shared_prefix=false")
    return requested


def suffix_positions(last_pos: torch.Tensor, suffix_mask: torch.Tensor) -> torch.Tensor:
    """[3, N, S] M-RoPE positions of left-padded suffixes that start at their prompt's last token.

    last_pos [N]: the position of each row's last prompt token (text: t = h = w); suffix_mask [N, S].
    Column k of a row's real tokens gets last_pos + k; padding columns get last_pos (they attend to the
    prompt only and their outputs are dropped)."""
    step = (suffix_mask.long().cumsum(-1) - 1).clamp(min=0)
    return (last_pos[:, None] + step).unsqueeze(0).expand(3, -1, -1)


def prompt_positions(model, ids: torch.Tensor, mask: torch.Tensor, mm: torch.Tensor,
                     grids: dict[str, torch.Tensor]) -> torch.Tensor:
    """[3, U, P] positions of left-padded prompts, as the model computes them for the full sequence."""
    if not any(k in grids for k in ("image_grid_thw", "video_grid_thw")):
        return text_position_ids(mask)
    inner = base_model(model).model
    pos, _ = inner.get_rope_index(ids, mm_token_type_ids=mm, attention_mask=mask, **grids)
    return pos


def shared_prefix_logits(model, uniq: list[Encoded], slot: list[int], responses: list[list[int]], pad_id: int,
                         encoder_outputs: dict, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of each row's response tokens, prompts computed once.

    uniq: the U distinct encodings; slot [N]: row -> index in uniq; responses: N token lists (W = longest);
    encoder_outputs: {"image"/"video": BaseModelOutputWithPooling} with one entry per image of `uniq`, in order.
    Returns logits [N, W, V] (rows flush right, position j predicts token j) and tokens [N, W]."""
    if any(len(e.input_ids) < 2 or int(e.mm_token_type_ids[-1]) != 0 for e in uniq):
        raise ValueError("trainer.shared_prefix: a prompt must end with a text token and have at least two tokens")
    width = max(len(r) for r in responses)
    ids, mask = left_pad([e.input_ids for e in uniq], pad_id)  # [U, P]
    mm, _ = left_pad([e.mm_token_type_ids for e in uniq], 0)
    grids = {k: torch.cat([e.vision[k] for e in uniq if k in e.vision]).to(device)
             for k in GRID_KEYS if any(k in e.vision for e in uniq)}
    ids, mask, mm = ids.to(device), mask.to(device), mm.to(device)
    pos = prompt_positions(model, ids, mask, mm, grids)  # [3, U, P]

    # Prefix: every prompt but its last token, once, with a cache that keeps the autograd graph.
    prefix_kwargs = {k: v for k, v in grids.items() if k != "second_per_grid_ts"}
    if encoder_outputs:
        prefix_kwargs["mm_encoder_outputs"] = encoder_outputs
    # Suffix: [last prompt token + response], left-padded so responses end flush right as in the plain forward.
    rows = torch.tensor(slot, dtype=torch.long, device=device)
    last_tok = ids[:, -1].cpu()
    seqs = [torch.cat([last_tok[s : s + 1], torch.tensor(r, dtype=torch.long)]) for s, r in zip(slot, responses)]
    sids, smask = left_pad(seqs, pad_id)
    sids, smask = sids.to(device), smask.to(device)
    spos = suffix_positions(pos[0, :, -1][rows], smask)
    full_mask = torch.cat([mask[rows, :-1], smask], dim=1)  # [N, P - 1 + W + 1]

    n_layers = base_model(model).config.get_text_config().num_hidden_layers
    prefix_cache = Cache(layers=[_PrefixLayer() for _ in range(n_layers)])
    key = cache_kwarg(model)
    with _checkpointed_layers_keep_cache(model):
        model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :, :-1], **{key: prefix_cache},
              use_cache=True, logits_to_keep=1, **prefix_kwargs)
        # [U, ...] -> [N, ...]: backward sums the G rows' gradients into their one prefix.
        cache = Cache(layers=[_SuffixLayer(layer.keys[rows], layer.values[rows]) for layer in prefix_cache.layers])
        logits = model(input_ids=sids, attention_mask=full_mask, position_ids=spos, **{key: cache}, use_cache=True,
                       logits_to_keep=width + 1).logits[:, :-1]  # [N, W, V]
    return logits, sids[:, -width:]
