"""Golden tests of the OpenVLA-style action tokenizer (pure numpy + the tiny model's tokenizer)."""

import numpy as np
import pytest

from tasks.robot_manipulation.action_tokenizer import (
    ActionStats,
    ActionTokenizer,
    action_to_text,
    ids_to_text,
    text_to_action,
    text_to_ids,
)

VOCAB = 2899  # len() of the tiny model's tokenizer


def _stats():
    return ActionStats(q01=[-0.5, -1.0, 0.0, -0.2, -0.2, -0.3, -1.0], q99=[0.5, 1.0, 2.0, 0.2, 0.2, 0.3, 1.0])


def test_last_256_ids_and_allowed_ids():
    tok = ActionTokenizer(VOCAB, _stats())
    ids = tok.allowed_action_ids()
    assert ids == list(range(VOCAB - 256, VOCAB)) and len(ids) == 256
    tok2 = ActionTokenizer(VOCAB, _stats(), n_bins=128, offset=10)
    assert tok2.allowed_action_ids() == list(range(10, 138))
    with pytest.raises(ValueError):
        ActionTokenizer(VOCAB, _stats(), offset=VOCAB - 100)


def test_round_trip_within_half_a_bin():
    tok = ActionTokenizer(VOCAB, _stats(), gripper_dim=None)
    rng = np.random.default_rng(0)
    q01, q99 = np.array(_stats().q01), np.array(_stats().q99)
    a = rng.uniform(q01, q99, size=(2000, 7))
    back = np.stack([tok.decode(tok.encode(x)) for x in a])
    half_bin = (q99 - q01) / 2 * (2 / 256) / 2
    assert np.all(np.abs(back - a) <= half_bin + 1e-12)
    np.testing.assert_allclose(tok.max_error(), half_bin)


def test_edge_bins_and_clipping():
    tok = ActionTokenizer(VOCAB, _stats(), gripper_dim=None)
    q01, q99 = np.array(_stats().q01), np.array(_stats().q99)
    assert tok.to_bins(q01).tolist() == [0] * 7  # normalised -1 -> first bin
    assert tok.to_bins(q99).tolist() == [255] * 7  # normalised +1 -> last bin (not 256)
    assert tok.to_bins(q01 - 5).tolist() == [0] * 7  # beyond q01 clips
    assert tok.to_bins(q99 + 5).tolist() == [255] * 7  # beyond q99 clips
    assert tok.encode(q99 + 5) == [VOCAB - 1] * 7
    # the end bins decode to their centres, half a bin inside the range
    half_bin = (q99 - q01) / 256 / 2
    np.testing.assert_allclose(tok.decode([VOCAB - 256] * 7), q01 + half_bin)
    np.testing.assert_allclose(tok.decode([VOCAB - 1] * 7), q99 - half_bin)
    # exact middle of [-1, 1] is the lower edge of bin 128
    assert tok.to_bins((q01 + q99) / 2).tolist() == [128] * 7


def test_gripper_binarised_both_conventions():
    tok = ActionTokenizer(VOCAB, _stats(), gripper_dim=6, gripper_close_positive=True)
    for g, want_bin, want in [(0.3, 255, 1.0), (1.0, 255, 1.0), (-0.01, 0, -1.0), (-1.0, 0, -1.0)]:
        a = [0, 0, 1, 0, 0, 0, g]
        assert tok.to_bins(a)[6] == want_bin
        assert tok.decode(tok.encode(a))[6] == want
    flipped = ActionTokenizer(VOCAB, _stats(), gripper_dim=6, gripper_close_positive=False)
    a = [0, 0, 1, 0, 0, 0, 1.0]  # +1 = open in this convention -> first bin ("open"), decodes back to +1
    assert flipped.to_bins(a)[6] == 0 and flipped.decode(flipped.encode(a))[6] == 1.0


def test_constant_dimension_and_bad_input():
    stats = ActionStats(q01=[0.0, 1.0], q99=[0.0, 2.0])
    tok = ActionTokenizer(300, stats, gripper_dim=None)
    assert tok.decode(tok.encode([0.0, 1.5]))[0] == 0.0
    with pytest.raises(ValueError):
        tok.encode([np.nan, 0.0])
    with pytest.raises(ValueError):
        tok.decode([99])
    with pytest.raises(ValueError):
        tok.decode([0, 99])  # not action ids


def test_stats_from_actions_save_load(tmp_path):
    rng = np.random.default_rng(1)
    acts = rng.normal(size=(1000, 7))
    s = ActionStats.from_actions(acts)
    np.testing.assert_allclose(s.q01, np.quantile(acts, 0.01, axis=0))
    np.testing.assert_allclose(s.q99, np.quantile(acts, 0.99, axis=0))
    assert s.count == 1000
    path = s.save(str(tmp_path))  # a directory: beside a checkpoint
    assert path.endswith("action_stats.json")
    s2 = ActionStats.load(str(tmp_path))
    assert s2 == s
    t1, t2 = ActionTokenizer(VOCAB, s), ActionTokenizer(VOCAB, s2)
    assert t1.encode(acts[0]) == t2.encode(acts[0])


@pytest.fixture(scope="module")
def hf_tok(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


def test_text_ids_action_round_trip(hf_tok):
    assert len(hf_tok) == VOCAB
    tok = ActionTokenizer(len(hf_tok), _stats())
    rng = np.random.default_rng(2)
    q01, q99 = np.array(_stats().q01), np.array(_stats().q99)
    for _ in range(200):
        a = rng.uniform(q01, q99)
        ids = tok.encode(a)
        text = ids_to_text(ids, hf_tok)
        assert text_to_ids(text, hf_tok, tok) == ids  # re-tokenising (or the exact segmentation) recovers the ids
        back = text_to_action(text, hf_tok, tok)
        assert np.all(np.abs(back[:6] - a[:6]) <= tok.max_error()[:6] + 1e-12)
        assert action_to_text(a, hf_tok, tok) == text


def test_invalid_text(hf_tok):
    tok = ActionTokenizer(len(hf_tok), _stats())
    six = ids_to_text(tok.allowed_action_ids()[:6], hf_tok)
    assert text_to_ids(six, hf_tok, tok) is None  # too few
    assert text_to_ids("hello world", hf_tok, tok) is None
    assert text_to_ids("", hf_tok, tok) is None
