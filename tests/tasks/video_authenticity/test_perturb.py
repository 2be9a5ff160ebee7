"""GRPO-TA perturbation sampler (tasks/video_authenticity/perturb.py): each kind's frames, the start
distribution and its clipping, the 1/3 proportions, input never modified."""

from collections import Counter

import numpy as np
import pytest

from tasks.video_authenticity import perturb
from tasks.video_authenticity.perturb import segment_start


class FixedRng:
    """Stands in for numpy.random.Generator with chosen draws: `normal` -> start, `random` -> kind."""

    def __init__(self, normal: float, uniform: float):
        self.normal_value, self.uniform_value, self.calls = normal, uniform, []

    def normal(self, loc, scale):
        self.calls.append(("normal", loc, scale))
        return self.normal_value

    def random(self):
        self.calls.append(("random",))
        return self.uniform_value


def clip(t=10, h=5, w=7, c=3) -> np.ndarray:
    """Every pixel distinct: frame i, row r, col k, channel j -> a unique value."""
    return np.arange(t * h * w * c, dtype=np.int64).reshape(t, h, w, c)


def test_freeze_copies_the_first_frame_top_left_quarter():
    frames = clip(t=10, h=5, w=7)
    before = frames.copy()
    rng = FixedRng(normal=2.4, uniform=0.1)  # start round(2.4) = 2, u < 1/3: freeze
    out, info = perturb(frames, rng)
    assert info == {"kind": "freeze", "start": 2, "length": 5}
    assert rng.calls == [("normal", 2.5, 1.0), ("random",)]  # N(0.25 T, 0.1 T)
    expected = before.copy()
    for i in range(2, 7):
        expected[i, :3, :4] = before[2, :3, :4]  # rows < 2.5 -> 0..2, columns < 3.5 -> 0..3
    np.testing.assert_array_equal(out, expected)
    assert (out[3, 3:] == before[3, 3:]).all() and (out[3, :, 4:] == before[3, :, 4:]).all()
    assert (out[3, :3, :4] != before[3, :3, :4]).all()  # the quarter really changed
    np.testing.assert_array_equal(frames, before)  # input untouched


def test_freeze_even_sizes():
    frames = clip(t=8, h=4, w=6, c=1)
    out, info = perturb(frames, FixedRng(normal=0.0, uniform=0.0))
    assert info == {"kind": "freeze", "start": 0, "length": 4}
    expected = frames.copy()
    expected[0:4, :2, :3] = frames[0, :2, :3]
    np.testing.assert_array_equal(out, expected)


def test_reverse_segment():
    frames = clip(t=9)
    before = frames.copy()
    out, info = perturb(frames, FixedRng(normal=3.0, uniform=0.5))
    assert info == {"kind": "reverse_segment", "start": 3, "length": 4}
    order = [0, 1, 2, 6, 5, 4, 3, 7, 8]
    np.testing.assert_array_equal(out, before[order])
    np.testing.assert_array_equal(frames, before)


def test_reverse_all():
    frames = clip(t=6)
    before = frames.copy()
    out, info = perturb(frames, FixedRng(normal=1.0, uniform=0.9))
    assert info == {"kind": "reverse_all", "start": 0, "length": 6}
    np.testing.assert_array_equal(out, before[::-1])
    np.testing.assert_array_equal(frames, before)
    out[0] = -1  # a new array, not a view of the input
    np.testing.assert_array_equal(frames, before)


@pytest.mark.parametrize("u,kind", [(0.0, "freeze"), (0.3333, "freeze"), (1 / 3, "reverse_segment"),
                                    (0.6666, "reverse_segment"), (2 / 3, "reverse_all"), (0.9999, "reverse_all")])
def test_kind_thresholds(u, kind):
    assert perturb(clip(t=4), FixedRng(normal=1.0, uniform=u))[1]["kind"] == kind


@pytest.mark.parametrize("t,raw,expected", [
    (10, -3.0, 0), (10, -0.4, 0), (10, 0.6, 1), (10, 5.0, 5), (10, 5.4, 5), (10, 40.0, 5),  # [0, T - 5]
    (9, 100.0, 5), (4, 2.6, 2), (4, -1e9, 0),  # T - floor(T/2): 9 - 4 = 5, 4 - 2 = 2
])
def test_segment_start_is_clipped(t, raw, expected):
    assert segment_start(t, raw) == expected


def test_clipped_start_reaches_the_frames():
    frames = clip(t=8)
    out, info = perturb(frames, FixedRng(normal=99.0, uniform=0.5))  # clipped to T - length = 4
    assert (info["start"], info["length"]) == (4, 4)
    np.testing.assert_array_equal(out, frames[[0, 1, 2, 3, 7, 6, 5, 4]])


def test_proportions_and_start_distribution():
    # Seeded, so the outcome is fixed; the tolerance (5.8 standard errors of a 1/3 proportion over 3,000
    # draws) would hold for any seed.
    rng = np.random.default_rng(1234)
    frames = np.zeros((40, 2, 2, 1), np.uint8)
    kinds, starts = Counter(), []
    for _ in range(3000):
        _, info = perturb(frames, rng)
        kinds[info["kind"]] += 1
        if info["kind"] != "reverse_all":
            starts.append(info["start"])
            assert 0 <= info["start"] <= 20 and info["length"] == 20
    for kind in ("freeze", "reverse_segment", "reverse_all"):
        assert abs(kinds[kind] / 3000 - 1 / 3) < 0.05, kinds
    starts = np.array(starts)
    assert abs(starts.mean() - 10.0) < 0.5  # 0.25 T
    assert abs(starts.std() - 4.0) < 0.5  # 0.1 T (rounding adds 1/12 to the variance)


def test_clipping_under_the_real_generator():
    # T = 4: length 2, starts in [0, 2], raw start N(1, 0.4). Find seeds whose first draw lands 3.75 sd out
    # on either side and check perturb clips them (its first draw is that normal).
    t, found = 4, {}
    for seed in range(200_000):
        rng = np.random.default_rng(seed)
        raw, u = rng.normal(0.25 * t, 0.1 * t), rng.random()
        side = "low" if raw < -0.5 else "high" if raw >= 2.5 else None
        if side and side not in found and u < 2 / 3:  # a segment kind, so the start is the clipped draw
            found[side] = (seed, raw)
        if len(found) == 2:
            break
    assert set(found) == {"low", "high"}
    for side, (seed, raw) in found.items():
        _, info = perturb(np.zeros((t, 2, 2, 1)), np.random.default_rng(seed))
        assert info["kind"] != "reverse_all" and info["start"] == (0 if side == "low" else 2), (side, raw, info)
        assert segment_start(t, raw) == (0 if side == "low" else 2)


def test_same_seed_same_result():
    frames = clip(t=12)
    a, ia = perturb(frames, np.random.default_rng(7))
    b, ib = perturb(frames, np.random.default_rng(7))
    assert ia == ib
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("bad", [np.zeros((3, 2, 2, 3)), np.zeros((8, 2, 2)), [[[[0]]]]])
def test_refuses_bad_clips(bad):
    with pytest.raises(ValueError, match="perturb"):
        perturb(bad, np.random.default_rng(0))


def test_dtype_kept():
    frames = np.random.default_rng(0).integers(0, 255, (6, 4, 4, 3), dtype=np.uint8)
    for seed in range(10):
        out, _ = perturb(frames, np.random.default_rng(seed))
        assert out.dtype == np.uint8 and out.shape == frames.shape
