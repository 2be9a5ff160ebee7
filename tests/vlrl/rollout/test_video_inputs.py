"""Video observations through rollout and the training forward: same log-probs (1e-5, fp32), the same
temporal M-RoPE positions (from each clip's fps via second_per_grid_ts), one vision pass per video per
group, and placeholder / feature mismatches that name the clip."""

import numpy as np
import pytest
import torch
from PIL import Image

from vlrl.config import ModelConfig, RolloutConfig
from vlrl.encoding import encode
from vlrl.episode import Observation
from vlrl.forward import Row, response_logprobs, right_aligned
from vlrl.models import base_model, load_model, load_processor, vision_tower
from vlrl.rollout.hf import HFEngine


def _clip(frames, height, width, seed):
    """[T, H, W, 3] uint8 noise (a fixed seed per clip)."""
    return np.random.default_rng(seed).integers(0, 256, (frames, height, width, 3), dtype=np.uint8)


def _video_obs(frames, height, width, fps, text="Is this clip real?", seed=0, name=None):
    content = [{"type": "video"}, {"type": "text", "text": text}]
    return Observation(messages=[{"role": "user", "content": content}], videos=[list(_clip(frames, height, width, seed))],
                       video_fps=[fps], video_names=[name or f"clip-{seed}.mp4"])


@pytest.fixture(scope="module")
def policy(tiny_model_path):
    cfg = ModelConfig(path=tiny_model_path)
    return load_model(cfg), load_processor(cfg)


def _rows(observations, groups, cut_step=3):
    rows, old = [], []
    for obs, group in zip(observations, groups):
        for j, s in enumerate(group):
            cut = len(s.response_ids) - cut_step * j  # ragged responses exercise padding
            rows.append(Row(obs, s.response_ids[:cut]))
            old.append(s.logprobs[:cut])
    return rows, old


@pytest.mark.parametrize("temperature", [1.0, 1.3])
def test_video_rollout_matches_training_forward_mixed_lengths_and_sizes(policy, temperature):
    model, processor = policy
    torch.manual_seed(0)
    engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=10, temperature=temperature))
    observations = [
        _video_obs(4, 56, 56, 2.0, seed=1),
        _video_obs(8, 56, 84, 4.0, text="a longer question so that the prompts differ in length", seed=2),
        _video_obs(6, 84, 56, 1.0, seed=3),
        Observation(messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "an image"}]}],
                    images=[Image.new("RGB", (84, 112), (200, 20, 20))]),
    ]
    groups = engine.generate(observations, n=3)
    rows, old = _rows(observations, groups)
    assert len({len(r.response_ids) for r in rows}) > 1
    grids = [tuple(encode(processor, o).vision["video_grid_thw"][0].tolist()) for o in observations[:3]]
    assert len(set(grids)) == 3, grids  # three different clip shapes in one batch
    with torch.no_grad():
        logp, mask = response_logprobs(model, processor, rows, temperature=temperature)
    diff = ((logp - right_aligned(old, logp.shape[1])).abs() * mask).max().item()
    assert diff <= 1e-5, diff


def test_one_vision_pass_per_video_group(policy):
    model, processor = policy
    calls = []
    handle = vision_tower(model).register_forward_hook(lambda m, i, o: calls.append(i[0].shape[0]))
    try:
        engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=4))
        obs = [_video_obs(4, 56, 56, 2.0, seed=4), _video_obs(8, 56, 84, 2.0, seed=5)]
        groups = engine.generate(obs, n=6)
        patches = sum(int(encode(processor, o).vision["video_grid_thw"].prod()) for o in obs)
        assert calls == [patches]  # both clips in one pass, before the x6 expansion
        rows = [Row(o, s.response_ids) for o, g in zip(obs, groups) for s in g]
        calls.clear()
        logp, _ = response_logprobs(model, processor, rows)
        logp.sum().backward()
        assert calls == [patches]
        model.zero_grad(set_to_none=True)
    finally:
        handle.remove()


def _capture_positions(model):
    """Forward pre-hook on the language model recording the [3, B, S] M-RoPE positions of each call."""
    seen = []

    def hook(module, args, kwargs):
        pos = kwargs.get("position_ids")
        seen.append(None if pos is None else pos[-3:].detach().clone())  # generate prepends a text row (4 rows)

    return seen, base_model(model).model.language_model.register_forward_pre_hook(hook, with_kwargs=True)


def _prompt_positions(policy, fps):
    """(rollout, training) temporal+spatial positions of one clip's prompt at `fps`: [3, P] each."""
    model, processor = policy
    obs = _video_obs(8, 56, 56, fps, seed=6)
    prompt_len = len(encode(processor, obs).input_ids)
    seen, handle = _capture_positions(model)
    try:
        torch.manual_seed(0)
        sample = HFEngine(model, processor, RolloutConfig(max_new_tokens=3)).generate([obs], n=1)[0][0]
        rollout = seen[0][:, 0, -prompt_len:]  # prefill call, left-padded prompt
        seen.clear()
        with torch.no_grad():
            response_logprobs(model, processor, [Row(obs, sample.response_ids)])
        n = len(sample.response_ids)
        training = seen[0][:, 0, -(prompt_len + n) : -n]
    finally:
        handle.remove()
    return rollout, training


def test_temporal_positions_follow_fps_and_rollout_equals_training(policy):
    slow_rollout, slow_training = _prompt_positions(policy, 1.0)
    fast_rollout, fast_training = _prompt_positions(policy, 4.0)
    assert torch.equal(slow_rollout, slow_training)
    assert torch.equal(fast_rollout, fast_training)
    # Same tokens, different clock: only the temporal row (0) changes, and slower clips spread further.
    assert torch.equal(slow_rollout[1:], fast_rollout[1:])
    assert not torch.equal(slow_rollout[0], fast_rollout[0])
    assert slow_rollout[0].max() > fast_rollout[0].max()


def test_second_per_grid_ts_from_fps(policy):
    _, processor = policy
    for fps, expected in ((2.0, 1.0), (4.0, 0.5), (1.0, 2.0)):  # temporal patch of 2 frames / fps
        enc = encode(processor, _video_obs(4, 56, 56, fps, seed=7))
        assert enc.vision["second_per_grid_ts"].tolist() == [pytest.approx(expected)]


def test_video_without_placeholder_names_the_clip(policy):
    _, processor = policy
    obs = _video_obs(4, 56, 56, 2.0, name="dataset/bad_clip.mp4")
    obs.messages = [{"role": "user", "content": [{"type": "text", "text": "no video placeholder"}]}]
    with pytest.raises(ValueError, match="bad_clip.mp4"):
        encode(processor, obs)


def test_placeholder_feature_mismatch_names_the_clip(policy):
    """A prompt whose placeholder run differs from the clip's feature count (here: one placeholder
    token dropped after processing) is refused by name."""
    _, processor = policy

    class Dropping:
        def __init__(self, inner):
            self.inner, self.tokenizer = inner, inner.tokenizer
            self.video_processor = inner.video_processor

        def apply_chat_template(self, *a, **k):
            return self.inner.apply_chat_template(*a, **k)

        def __call__(self, *a, **k):
            out = self.inner(*a, **k)
            pad = self.tokenizer.convert_tokens_to_ids("<|video_pad|>")
            ids = out["input_ids"][0]
            keep = torch.ones_like(ids, dtype=torch.bool)
            keep[(ids == pad).nonzero()[0, 0]] = False
            out["input_ids"] = ids[keep][None]
            out["mm_token_type_ids"] = out["mm_token_type_ids"][0][keep][None]
            return out

    with pytest.raises(ValueError, match=r"runs/0007\.mp4.*7 video placeholder tokens.*8 features"):
        encode(Dropping(processor), _video_obs(4, 56, 56, 2.0, name="runs/0007.mp4"))


def test_video_needs_its_fps(policy):
    _, processor = policy
    obs = _video_obs(4, 56, 56, 2.0, name="nofps.mp4")
    obs.video_fps = []
    with pytest.raises(ValueError, match="nofps.mp4.*video_fps"):
        encode(processor, obs)
