"""Pair construction, labels and the by-episode split (golden values by hand)."""

import numpy as np
import pytest

from rewards.learned.pairs import KINDS, MISMATCH_EVAL, MISMATCH_TRAIN, PairMix, consecutive_pairs, pair_labels, sample_pairs, split_by_seed
from rewards.learned.progress import values_from_deltas
from rewards.learned.sim_data import aligned_progress, frame_index_progress, state_features
from rewards.learned.synthetic import synthetic_episodes

PROG = np.array([0.0, 0.2, 0.6, 1.0, 1.0])
SUCC = np.array([False, False, False, True, True])


def test_pair_labels_hand_computed():
    # relative: 20 -> 60 closes 50 % of the remaining 80; done = success at the later frame
    assert pair_labels(PROG, SUCC, 1, 2) == (pytest.approx(50.0), 0.0)
    # reverse from > 50: 60 -> 20 : (20 - 60) / (100 - 20) = -50
    assert pair_labels(PROG, SUCC, 2, 1) == (pytest.approx(-50.0), 0.0)
    assert pair_labels(PROG, SUCC, 1, 3) == (pytest.approx(100.0), 1.0)
    assert pair_labels(PROG, SUCC, 3, 4) == (0.0, 1.0)  # stagnation at the goal: 0, done
    assert pair_labels(PROG, SUCC, 2, 2) == (0.0, 0.0)
    assert pair_labels(PROG, SUCC, 1, 3, mismatched=True) == (0.0, 0.0)
    assert pair_labels(PROG, SUCC, 2, 1, label="absolute") == (pytest.approx(-40.0), 0.0)


def test_consecutive_labels_chain_back_to_progress():
    p = np.array([0.0, 0.1, 0.3, 0.7, 0.5, 0.9, 1.0])
    s = p >= 1.0
    deltas = [pair_labels(p, s, i, i + 1)[0] for i in range(len(p) - 1)]
    assert values_from_deltas(deltas) == pytest.approx(100 * p[1:])


def test_consecutive_pairs():
    assert consecutive_pairs(9, 4) == [(0, 4), (4, 8)]
    assert consecutive_pairs(10, 4) == [(0, 4), (4, 8), (8, 9)]  # the last frame is always included
    assert consecutive_pairs(3, 1) == [(0, 1), (1, 2)]


def test_sample_pairs_kinds_and_labels():
    eps = synthetic_episodes(range(3), T=12, size=28)
    pairs = sample_pairs(eps, 400, np.random.default_rng(0), PairMix(), stride=3)
    kinds = {p.kind for p in pairs}
    assert kinds == set(KINDS)
    for p in pairs:
        ep = eps[p.episode]
        if p.kind == "forward":
            assert p.i < p.j and p.instruction == ep.instruction
        elif p.kind == "reverse":
            assert p.i > p.j
        elif p.kind == "local":
            assert abs(p.i - p.j) == 3
        elif p.kind == "stagnation":
            assert p.i == p.j and p.delta == 0.0
        else:
            assert p.instruction in MISMATCH_TRAIN and p.delta == 0.0 and p.done == 0.0
        if p.kind != "mismatch":
            assert (p.delta, p.done) == pytest.approx(pair_labels(ep.progress, ep.success, p.i, p.j))
    # expert episodes rise: forward pairs there are never negative
    fw = [p for p in pairs if p.kind == "forward" and eps[p.episode].kind == "expert"]
    assert fw and all(p.delta >= 0 for p in fw)
    # deterministic in the generator
    again = sample_pairs(eps, 400, np.random.default_rng(0), PairMix(), stride=3)
    assert [(p.episode, p.i, p.j, p.instruction) for p in again] == [(p.episode, p.i, p.j, p.instruction) for p in pairs]
    assert not set(MISMATCH_TRAIN) & set(MISMATCH_EVAL)


def test_split_by_seed_keeps_variants_together():
    eps = synthetic_episodes(range(10), T=6, size=28)
    tr, te = split_by_seed(eps, 0.2, seed=0)
    assert sorted(tr + te) == list(range(len(eps)))
    assert {eps[k].seed for k in tr}.isdisjoint({eps[k].seed for k in te})
    assert len({eps[k].seed for k in te}) == 2


def test_progress_labels_of_sim_episodes():
    assert frame_index_progress(np.array([0, 0, 0, 0, 1, 1], bool)).tolist() == pytest.approx([0, 0.25, 0.5, 0.75, 1, 1])
    assert frame_index_progress(np.zeros(3, bool)).tolist() == [0, 0, 0]
    # a failed episode takes the progress of the nearest reference frame (a frozen arm keeps its progress)
    ref_eef = np.array([[0, 0, 0.0], [0, 0, 0.1], [0, 0, 0.2]])
    ref = state_features(ref_eef, np.zeros((3, 3)), np.zeros(3))
    ep = state_features(np.array([[0, 0, 0.0], [0, 0, 0.11], [0, 0, 0.11], [0, 0, 0.02]]), np.zeros((4, 3)), np.zeros(4))
    assert aligned_progress(ep, ref, np.array([0, 0.5, 1.0])).tolist() == [0, 0.5, 0.5, 0]


def test_reference_indices_and_sampling_avoid_the_pairs_own_scene():
    from rewards.learned.pairs import reference_indices, sample_references
    from rewards.learned.synthetic import synthetic_episode

    ep = synthetic_episode(0, "expert", T=24, hold=4)  # first success at frame 20
    assert np.flatnonzero(ep.success)[0] == 20
    assert reference_indices(ep, 3).tolist() == [0, 10, 20]
    assert reference_indices(ep, 5).tolist() == [0, 5, 10, 15, 20]
    with pytest.raises(ValueError, match="successful episode"):
        reference_indices(synthetic_episode(0, "early_stop", T=24), 3)

    eps = synthetic_episodes(range(3), T=12, size=28)  # per seed: expert (succeeds), early_stop, drop
    pairs = sample_pairs(eps, 60, np.random.default_rng(0))
    refs = sample_references(eps, pairs, np.random.default_rng(1))
    assert all(eps[r].succeeded and eps[r].seed != eps[p.episode].seed for p, r in zip(pairs, refs))
    assert len({eps[r].seed for r in refs}) == 3  # every other scene gets used
    one_scene = [e for e in eps if e.seed == 0]
    one_pairs = sample_pairs(one_scene, 5, np.random.default_rng(0))
    assert set(sample_references(one_scene, one_pairs, np.random.default_rng(0))) == {0}  # fallback: same scene
