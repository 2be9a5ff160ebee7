"""The VLM reward model (inputs, heads, save/load) and the common reward interface (batching, LRU cache)."""

import numpy as np
import pytest
import torch
from PIL import Image

from rewards.learned.base import LRUCache, Query, cached_batch, frame_key
from rewards.learned.prm import PRM_CONFIG, PRMReward
from rewards.learned.progress import values_from_deltas
from rewards.learned.progress_model import ProgressReward, predict_pairs
from rewards.learned.synthetic import synthetic_episode
from rewards.learned.vlm_reward import OFFSET, VLMReward, VLMRewardConfig, patchify

RNG = np.random.default_rng(0)
FRAMES = RNG.integers(0, 255, (6, 84, 84, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def progress_model(tiny_model_path):
    torch.manual_seed(0)
    return VLMReward(VLMRewardConfig(model_path=tiny_model_path)).eval()


def test_lru_cache_and_cached_batch():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # a is now the most recent
    c.put("c", 3)
    assert "b" not in c and "a" in c and len(c) == 2
    calls = []

    def compute(idx):
        calls.append(list(idx))
        return [k * 10 for k in idx]

    cache = LRUCache(100)
    assert cached_batch(cache, ["x", "y", "x", "z"], compute, batch_size=2) == [0, 10, 0, 30]
    assert calls == [[0, 1], [3]]  # the duplicate "x" is computed once, chunks of 2
    assert cached_batch(cache, ["z", "x"], compute, 2) == [30, 0] and len(calls) == 2


def test_frame_key_is_content_based():
    a = FRAMES[0]
    assert frame_key(a) == frame_key(a.copy()) != frame_key(FRAMES[1])
    assert frame_key(a[:42]) != frame_key(a[42:])


def test_patchify_matches_the_processor(progress_model):
    m = progress_model
    ours = patchify(torch.as_tensor(FRAMES[:3]), m.mean, m.std, m.patch, m.merge, m.temporal)
    ref = m.processor.image_processor(images=[Image.fromarray(f) for f in FRAMES[:3]], return_tensors="pt")
    assert ours.shape == ref["pixel_values"].shape
    assert torch.allclose(ours, ref["pixel_values"], atol=1e-5)


def test_forward_matches_processor_path(progress_model):
    """Our fast input path (cached prompt, torch patchify, shared vision features) == the processor's."""
    m = progress_model
    text = m.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": "Before:"}, {"type": "image"}, {"type": "text", "text": "After:"},
                                      {"type": "image"},
                                      {"type": "text", "text": "Task: lift the red cube. Progress from before to after?"}]}],
        add_generation_prompt=True, tokenize=False)
    ref_in = m.processor(text=[text], images=[Image.fromarray(FRAMES[0]), Image.fromarray(FRAMES[1])], return_tensors="pt")
    with torch.no_grad():
        h_ref = m.vlm.model(**ref_in, use_cache=False).last_hidden_state[:, -1]
        ours = m(FRAMES[:2], [(0, 1)], ["lift the red cube"])
    assert torch.allclose(ours, m.head(h_ref), atol=1e-5)
    # left padding with a longer instruction in the batch does not change a row's output
    with torch.no_grad():
        both = m(FRAMES[:2], [(0, 1), (1, 0)], ["lift the red cube", "stack the red cube on top of the green cube now"])
    assert torch.allclose(both[0], ours[0], atol=1e-4)


def test_regression_loss_predict_and_save_load(progress_model, tmp_path):
    m = progress_model
    labels = np.array([[40.0, 0.0], [-20.0, 1.0]])
    loss, pred = m.loss(FRAMES[:3], [(0, 1), (2, 0)], ["lift the red cube"] * 2, labels)
    assert loss.ndim == 0 and torch.isfinite(loss) and pred.shape == (2, 2)
    p = m.predict(FRAMES[:3], [(0, 1), (2, 0)], ["lift the red cube"] * 2)
    assert np.allclose(p, pred.numpy(), atol=1e-5)
    assert np.all(np.abs(p[:, 0]) <= 100) and np.all((p[:, 1] > 0) & (p[:, 1] < 1))
    m.save(tmp_path / "m")
    m2 = VLMReward.load(tmp_path / "m")
    assert np.allclose(m2.predict(FRAMES[:3], [(0, 1), (2, 0)], ["lift the red cube"] * 2), p, atol=1e-5)


def test_generative_head_answers_and_reads_back(tiny_model_path):
    torch.manual_seed(0)
    m = VLMReward(VLMRewardConfig(model_path=tiny_model_path, head="generative")).eval()
    ids = m.answer_ids(np.array([[-37.0, 1.0], [100.0, 0.0]]))
    tok = m.processor.tokenizer
    assert [tok.decode([i]) for i in ids[0]] == [str(-37 + OFFSET), "1"]
    assert [tok.decode([i]) for i in ids[1]] == ["200", "0"]
    loss, pred = m.loss(FRAMES[:2], [(0, 1)], ["lift the red cube"], np.array([[-37.0, 1.0]]))
    assert torch.isfinite(loss) and pred.shape == (1, 2)
    p = m.predict(FRAMES[:2], [(0, 1)], ["lift the red cube"])
    assert -100 <= p[0, 0] <= 100 and 0 <= p[0, 1] <= 1
    assert p[0, 0] == pytest.approx(float(pred[0, 0]), abs=1e-3)  # same first-token distribution


def test_generative_head_learns_a_fixed_answer(tiny_model_path):
    torch.manual_seed(0)
    m = VLMReward(VLMRewardConfig(model_path=tiny_model_path, head="generative"))
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3)
    labels = np.array([[30.0, 1.0], [-30.0, 0.0]])
    for _ in range(40):
        loss, _ = m.loss(FRAMES[:4], [(0, 1), (2, 3)], ["lift the red cube"] * 2, labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
    p = m.eval().predict(FRAMES[:4], [(0, 1), (2, 3)], ["lift the red cube"] * 2)
    assert p[0, 0] > 0 > p[1, 0] and p[0, 1] > 0.5 > p[1, 1]


def test_progress_reward_interface_and_cache(progress_model):
    ep = synthetic_episode(0, "expert", T=8)
    rm = ProgressReward(progress_model, scale=0.01)
    r = rm([Query(ep.frames, ep.instruction)])[0]
    assert r.shape == (8,)
    deltas = predict_pairs(progress_model, ep.frames, [(t, t + 1) for t in range(8)], [ep.instruction] * 8)[:, 0]
    assert r == pytest.approx(np.diff(np.concatenate([[0], values_from_deltas(deltas)])) * 0.01, abs=1e-6)
    # per step on a growing episode: only the newest pair is computed
    rm.cache.clear()
    for t in range(1, 9):
        misses = rm.cache.misses
        last = rm.last_rewards([Query(ep.frames[: t + 1], ep.instruction)])
        assert rm.cache.misses - misses == 1
    assert last[0] == pytest.approx(r[-1], abs=1e-6)
    # batched over queries, different lengths; stride 3 gives rewards only at chain ends
    out = ProgressReward(progress_model, stride=3)([Query(ep.frames, ep.instruction), Query(ep.frames[:2], "x")])
    assert [len(o) for o in out] == [8, 1] and np.count_nonzero(out[0]) <= 3
    assert rm.done([Query(ep.frames, ep.instruction)]).shape == (1,)


def test_prm_reward_modes(tiny_model_path):
    import dataclasses

    torch.manual_seed(0)
    model = VLMReward(dataclasses.replace(PRM_CONFIG, model_path=tiny_model_path)).eval()
    q = [Query(FRAMES, "lift the red cube")]
    dense = PRMReward(model, "dense")(q)[0]
    assert dense.shape == (5,) and np.all((dense > 0) & (dense < 1))
    term = PRMReward(model, "terminal")(q)[0]
    assert term[:-1].tolist() == [0.0] * 4 and term[-1] == pytest.approx(dense[-1])
    assert PRMReward(model, "delta")(q)[0] == pytest.approx(np.diff(np.concatenate([[0], dense])))


def test_in_context_reference_prompt_batch_and_save(tiny_model_path, tmp_path):
    """k reference frames precede every pair: prompt, frame sharing, aux labels, saved default reference."""
    from rewards.learned.progress_model import evaluate_progress
    from rewards.learned.synthetic import synthetic_episodes
    from rewards.learned.train_progress import batch_from_pairs
    from rewards.learned.pairs import sample_pairs, sample_references
    from rewards.learned.vlm_reward import reference_config, reference_prompt

    assert reference_prompt(3).startswith("Reference:<image>0%<image>50%<image>100% Before:<image>After:<image>")
    with pytest.raises(ValueError, match="reference_frames"):
        VLMRewardConfig(reference_frames=2)  # two images in the prompt: no room for a reference

    eps = synthetic_episodes(range(3), T=12, size=28)
    pairs = sample_pairs(eps, 8, np.random.default_rng(0))
    refs = sample_references(eps, pairs, np.random.default_rng(0))
    frames, index, instrs, labels = batch_from_pairs(eps, pairs, refs, k=3)
    assert all(len(row) == 5 for row in index) and labels.shape == (8, 2 + 5)
    assert len(frames) == len({i for row in index for i in row})  # each distinct frame once
    for n, (p, r) in enumerate(zip(pairs, refs)):
        assert np.array_equal(frames[index[n][0]], eps[r].frames[0])
        assert np.array_equal(frames[index[n][3]], eps[p.episode].frames[p.i])
        assert labels[n, 2] == 0.0 and labels[n, 4] == 1.0  # reference frames at 0% and 100%

    torch.manual_seed(0)
    m = VLMReward(reference_config(3, model_path=tiny_model_path, aux_weight=0.5))
    loss, pred = m.loss(frames, index, instrs, labels)
    assert torch.isfinite(loss) and pred.shape == (8, 2)
    m.eval()
    ep = eps[0]
    with pytest.raises(ValueError, match="reference"):
        predict_pairs(m, ep.frames, [(0, 1)], [ep.instruction])
    ref = eps[3].frames[[0, 5, 10]]
    p_ref = predict_pairs(m, ep.frames, [(0, 4), (4, 0)], [ep.instruction] * 2, reference=ref)
    other = predict_pairs(m, ep.frames, [(0, 4)], [ep.instruction], reference=eps[6].frames[[0, 5, 10]])
    assert not np.allclose(p_ref[0], other[0])  # the reference is really part of the input
    m.reference = ref
    m.save(tmp_path / "m")
    rm = ProgressReward.load(str(tmp_path / "m"))  # the saved reference is the default
    assert np.array_equal(rm.reference, ref)
    r = rm([Query(ep.frames[:5], ep.instruction)])[0]
    d = predict_pairs(rm.model, ep.frames, [(t, t + 1) for t in range(4)], [ep.instruction] * 4)[:, 0]
    assert r == pytest.approx(np.diff(np.concatenate([[0], values_from_deltas(d)])) * 0.01, abs=1e-6)
    assert evaluate_progress(rm.model, eps[:3], stride=4, n_pairs=8)["episodes"] == 3
