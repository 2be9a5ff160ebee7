"""Rollout log-probs (from generate's logits) must match the training forward within 1e-5 (fp32)."""

import pytest
import torch
from PIL import Image

from vlrl.config import ModelConfig, RolloutConfig
from vlrl.encoding import encode
from vlrl.episode import Observation
from vlrl.forward import Row, response_logprobs, right_aligned
from vlrl.models import load_model, load_processor, vision_tower
from vlrl.rollout.hf import HFEngine


def _obs(size, color, text, n_images=1):
    content = [{"type": "image"}] * n_images + [{"type": "text", "text": text}]
    return Observation(
        messages=[{"role": "user", "content": content}],
        images=[Image.new("RGB", size, color)] * n_images,
    )


@pytest.fixture(scope="module")
def policy(tiny_model_path):
    cfg = ModelConfig(path=tiny_model_path)
    return load_model(cfg), load_processor(cfg)


@pytest.mark.parametrize("temperature", [1.0, 1.3])
def test_rollout_matches_training_forward_mixed_sizes(policy, temperature):
    model, processor = policy
    torch.manual_seed(0)
    engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=12, temperature=temperature))
    observations = [
        _obs((200, 120), (255, 0, 0), "click the red button"),
        _obs((84, 300), (0, 0, 255), "a longer instruction so that the prompts differ in length"),
        _obs((140, 140), (0, 255, 0), "two images", n_images=2),
    ]
    groups = engine.generate(observations, n=3)
    rows, old = [], []
    for obs, group in zip(observations, groups):
        for j, s in enumerate(group):
            # A random tiny model rarely samples EOS; prefixes keep their log-probs, so cut some
            # responses short to get a ragged, padded batch.
            cut = len(s.response_ids) - 3 * j
            rows.append(Row(obs, s.response_ids[:cut]))
            old.append(s.logprobs[:cut])
    lengths = {len(r.response_ids) for r in rows}
    assert len(lengths) > 1, "want ragged responses to exercise padding"
    with torch.no_grad():
        logp, mask = response_logprobs(model, processor, rows, temperature=temperature)
    old_t = right_aligned(old, logp.shape[1])
    diff = ((logp - old_t).abs() * mask).max().item()
    assert diff <= 1e-5, diff


def test_text_only_observation(policy):
    model, processor = policy
    torch.manual_seed(1)
    engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=8))
    obs = [
        Observation(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
        Observation(messages=[{"role": "user", "content": [{"type": "text", "text": "a much longer prompt here"}]}]),
    ]
    groups = engine.generate(obs, n=2)
    rows = [Row(o, s.response_ids) for o, g in zip(obs, groups) for s in g]
    old = [s.logprobs for g in groups for s in g]
    with torch.no_grad():
        logp, mask = response_logprobs(model, processor, rows)
    assert ((logp - right_aligned(old, logp.shape[1])).abs() * mask).max().item() <= 1e-5


def test_one_vision_pass_per_group(policy):
    """G samples of one prompt: one vision forward in rollout and one in the training forward."""
    model, processor = policy
    calls = []
    handle = vision_tower(model).register_forward_hook(lambda m, i, o: calls.append(i[0].shape[0]))
    try:
        engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=4))
        obs = [_obs((112, 112), (9, 9, 9), "x"), _obs((168, 112), (200, 9, 9), "y")]
        groups = engine.generate(obs, n=8)
        assert len(calls) == 1  # both prompts' images in one pass, before the x8 expansion
        rows = [Row(o, s.response_ids) for o, g in zip(obs, groups) for s in g]
        calls.clear()
        logp, mask = response_logprobs(model, processor, rows)
        logp.sum().backward()
        assert len(calls) == 1
        model.zero_grad(set_to_none=True)
    finally:
        handle.remove()


def test_constrained_decoding_samples_allowed_ids_and_logprobs_agree(policy):
    """Only allowed ids are sampled at constrained positions; both sides renormalise over the same sets."""
    model, processor = policy
    torch.manual_seed(2)
    vocab = model.get_output_embeddings().weight.shape[0]
    eos = processor.tokenizer.eos_token_id
    actions = range(vocab - 256, vocab)
    constrained = _obs((112, 112), (200, 30, 30), "In: What action should the robot take to lift the cube?\nOut:")
    constrained.allowed_ids = [actions] * 3 + [[eos]]
    free = _obs((90, 150), (30, 30, 200), "describe")
    engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=6, temperature=1.2))
    groups = engine.generate([constrained, free], n=4)
    for s in groups[0]:
        assert all(t in actions for t in s.response_ids[:3])
        assert s.response_ids[3:] == [eos] and s.finished
    # A random tiny model almost never picks the last 256 ids unconstrained: the mask did the work.
    assert sum(t in actions for s in groups[1] for t in s.response_ids) < 6
    rows = [Row(o, s.response_ids) for o, g in zip([constrained, free], groups) for s in g]
    old = [s.logprobs for g in groups for s in g]
    with torch.no_grad():
        logp, mask = response_logprobs(model, processor, rows, temperature=1.2)
    assert ((logp - right_aligned(old, logp.shape[1])).abs() * mask).max().item() <= 1e-5
    # The forced EOS has probability 1 over its one-element set.
    assert all(abs(s.logprobs[3]) < 1e-6 for s in groups[0])
    # Greedy decoding respects the constraint too.
    greedy = engine.generate([constrained], n=1, greedy=True)[0][0]
    assert all(t in actions for t in greedy.response_ids[:3]) and greedy.response_ids[3] == eos


def test_shared_prefill_equals_generate_expansion_and_runs_each_prompt_once(policy):
    """One prefill per prompt for its n samples: same sampled tokens (same seed) and log-probs as generate's expansion,
    and the language model sees each prompt's tokens once instead of n times."""
    model, processor = policy
    obs = [_obs((200, 120), (255, 0, 0), "click"), _obs((84, 300), (0, 0, 255), "a longer prompt than the first one"),
           Observation(messages=[{"role": "user", "content": [{"type": "text", "text": "text only"}]}])]
    seen = []
    layer0 = model.model.language_model.layers[0]
    handle = layer0.register_forward_hook(lambda m, i, o: seen.append(i[0].shape[0] * i[0].shape[1]))
    results = {}
    try:
        for share in (False, True):
            engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=5))
            engine.share_prefill = share
            seen.clear()
            torch.manual_seed(5)
            results[share] = (engine.generate(obs, n=4), list(seen))
    finally:
        handle.remove()
    (plain, plain_tokens), (shared, shared_tokens) = results[False], results[True]
    for gp, gs in zip(plain, shared):
        for a, b in zip(gp, gs):
            assert a.response_ids == b.response_ids
            assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs)) <= 1e-5
    prompt = max(len(encode(processor, o).input_ids) for o in obs)  # left-padded width
    assert plain_tokens[0] == 3 * 4 * prompt  # generate's first forward: every sample's whole prompt
    assert shared_tokens[0] == 3 * (prompt - 1) and shared_tokens[1] == 3 * 4  # once per prompt, then last tokens


def test_video_prompt_shared_prefill_matches_training_forward(policy):
    model, processor = policy
    torch.manual_seed(3)
    clip = [Image.new("RGB", (84, 56), (30 * k, 90, 200 - 30 * k)) for k in range(4)]
    obs = Observation(messages=[{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "what?"}]}],
                      videos=[clip], video_fps=[2.0])
    engine = HFEngine(model, processor, RolloutConfig(max_new_tokens=6))
    (group,) = engine.generate([obs], n=3)
    rows = [Row(obs, s.response_ids) for s in group]
    for shared in (False, True):
        with torch.no_grad():
            logp, mask = response_logprobs(model, processor, rows, shared_prefix=shared)
        old = right_aligned([s.logprobs for s in group], logp.shape[1])
        assert ((logp - old).abs() * mask).max().item() <= 1e-5
