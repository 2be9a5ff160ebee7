"""Observation -> model inputs, shared by rollout and training so both see identical tokens.

Prompts are left-padded: every response then ends at the right edge and the training forward only
needs logits for the last `L` positions. Qwen's 3-D M-RoPE positions are computed by the model from
`attention_mask` + `mm_token_type_ids` + grids, so padding does not shift them. (Without
`mm_token_type_ids`, transformers 5.x silently falls back to 1-D positions: see docs/INSTALL.md.)

Videos arrive as already-sampled frames with their sampled fps (`Observation.video_fps`); the
processor turns the fps into `second_per_grid_ts` (seconds per temporal grid step), which both the
rollout engine and the training forward pass on, so temporal M-RoPE positions follow real time.
Without it the processor assumes 24 fps. A prompt whose video placeholders do not match its videos'
features is an error naming the clip, never a silent text-only prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vlrl.episode import Observation

# second_per_grid_ts [n_videos]: seconds per temporal grid step of each video (temporal M-RoPE spacing).
VISION_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts")


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
    kwargs = dict(obs.processor_kwargs)
    if obs.images:
        kwargs["images"] = list(obs.images)
    if obs.videos:
        kwargs.update(video_kwargs(obs))
    try:
        out = processor(text=[text], return_tensors="pt", **kwargs)
    except ValueError as e:
        if not obs.videos:
            raise
        raise ValueError(f"video(s) {video_labels(obs)}: the processor refused the prompt: {e}") from e
    ids = out["input_ids"][0]
    mm = out.get("mm_token_type_ids")
    mm = torch.zeros_like(ids) if mm is None else mm[0]
    vision = {k: out[k] for k in VISION_KEYS if k in out and out[k] is not None}
    check_video_placeholders(processor, obs, ids, vision)
    enc = Encoded(input_ids=ids, mm_token_type_ids=mm, vision=vision)
    obs.cache["encoded"] = enc
    return enc


def video_labels(obs: Observation) -> list[str]:
    """How errors name the observation's videos: `video_names` where given, else `video #i`."""
    return [obs.video_names[i] if i < len(obs.video_names) else f"video #{i}" for i in range(len(obs.videos))]


def video_kwargs(obs: Observation) -> dict:
    """Processor kwargs for `obs.videos`: the frames as given (no resampling) and metadata carrying
    each video's sampled fps, from which the processor derives `second_per_grid_ts`."""
    from transformers.video_utils import VideoMetadata

    names = video_labels(obs)
    if len(obs.video_fps) != len(obs.videos):
        raise ValueError(f"observation has {len(obs.videos)} video(s) {names} but {len(obs.video_fps)} video_fps "
                         "values: each video needs its sampled fps")
    metadata = []
    for name, frames, fps in zip(names, obs.videos, obs.video_fps):
        if not (fps > 0) or len(frames) == 0:
            raise ValueError(f"video {name}: needs frames and a positive fps (got {len(frames)} frames at {fps!r} fps)")
        metadata.append(VideoMetadata(total_num_frames=len(frames), fps=float(fps), frames_indices=list(range(len(frames)))))
    videos_kwargs = {**obs.processor_kwargs.get("videos_kwargs", {}), "video_metadata": metadata, "do_sample_frames": False}
    return {"videos": [list(v) for v in obs.videos], "videos_kwargs": videos_kwargs}


def placeholder_runs(ids: torch.Tensor, token_id: int) -> list[int]:
    """Lengths of the maximal runs of `token_id` in ids [P], in order."""
    runs, n = [], 0
    for t in ids.tolist() + [None]:
        if t == token_id:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return runs


def check_video_placeholders(processor, obs: Observation, ids: torch.Tensor, vision: dict) -> None:
    """Raise ValueError naming the clip when the prompt's `<|video_pad|>` runs (ids [P]) do not match
    the videos' feature counts (t*h*w / merge^2 per video): the model would otherwise fail later
    without saying which clip, or (other stacks) quietly drop the video."""
    token = processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")
    if token is None or token == processor.tokenizer.unk_token_id:
        return
    runs = placeholder_runs(ids, token)
    grids = vision.get("video_grid_thw")
    merge = getattr(getattr(processor, "video_processor", None), "merge_size", 2)
    expected = [] if grids is None else [int(g.prod()) // merge**2 for g in grids]
    if runs == expected:
        return
    names = video_labels(obs) if obs.videos else []
    for i in range(max(len(runs), len(expected))):
        have = runs[i] if i < len(runs) else 0
        want = expected[i] if i < len(expected) else 0
        if have != want:
            name = names[i] if i < len(names) else f"placeholder #{i} (no video)"
            raise ValueError(f"video {name}: the prompt holds {have} video placeholder tokens but the video has "
                             f"{want} features (prompt has {len(runs)} video placeholder(s) for {len(expected)} video(s))")


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
