"""Golden tests for group-relative advantages (TRL semantics, NaN = "could not score")."""

import math

import pytest
import torch

from vlrl.algos import group_advantages

REWARDS = [1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 2.0, 2.0]  # two groups of G=4


def _t(xs):
    return torch.tensor(xs, dtype=torch.float64)


def test_group_scale_golden():
    # Group 1: mean 0.5, unbiased std sqrt((4 * 0.25) / 3) = 0.5773502692 -> +-0.5 / (0.5773502692 + 1e-4).
    # Group 2: identical rewards -> 0 / (0 + 1e-4) = 0.
    a = 0.8658754297607016
    adv = group_advantages(_t(REWARDS), 4)
    torch.testing.assert_close(adv, _t([a, -a, -a, a, 0, 0, 0, 0]), rtol=0, atol=1e-12)


def test_batch_scale_golden():
    # Numerator is still the group mean (0.5 / 2); std over all 8 rewards: mean 1.25,
    # sum of squares 2*0.0625 + 2*1.5625 + 4*0.5625 = 5.5, unbiased std sqrt(5.5 / 7) = 0.8864052604.
    a = 0.5 / (math.sqrt(5.5 / 7) + 1e-4)
    assert a == pytest.approx(0.5640124456324701, abs=1e-12)
    adv = group_advantages(_t(REWARDS), 4, scale="batch")
    torch.testing.assert_close(adv, _t([a, -a, -a, a, 0, 0, 0, 0]), rtol=0, atol=1e-12)


def test_none_scale_golden():
    adv = group_advantages(_t(REWARDS), 4, scale="none")
    torch.testing.assert_close(adv, _t([0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0]), rtol=0, atol=0)


def test_batch_and_group_differ_when_group_stds_differ():
    r = _t([0.0, 1.0, 0.0, 10.0])
    g = group_advantages(r, 2, scale="group")
    b = group_advantages(r, 2, scale="batch")
    # Per group: std sqrt(0.5) and sqrt(50), so both groups normalise to the same magnitude.
    torch.testing.assert_close(g.abs()[0], g.abs()[2], rtol=1e-3, atol=0)
    # Batch std is shared, so group 2 (larger spread) gets 10x the advantage of group 1.
    torch.testing.assert_close(b[2] / b[0], torch.tensor(10.0, dtype=torch.float64))


def test_nan_masked_from_mean_and_std():
    # Valid {1, 0, 3}: mean 4/3, unbiased var ((1/9) + (16/9) + (25/9)) / 2 = 7/3.
    s = math.sqrt(7 / 3) + 1e-4
    expected = [(1 - 4 / 3) / s, 0.0, (0 - 4 / 3) / s, (3 - 4 / 3) / s]
    assert expected[0] == pytest.approx(-0.21820360545686493, abs=1e-12)
    adv = group_advantages(_t([1.0, float("nan"), 0.0, 3.0]), 4)
    assert not torch.isnan(adv).any()
    torch.testing.assert_close(adv, _t(expected), rtol=0, atol=1e-12)
    assert adv[1].item() == 0.0


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_single_valid_and_all_nan_groups_are_zero(scale):
    nan = float("nan")
    r = _t([nan, nan, 5.0, nan, nan, nan, nan, nan, 1.0, 0.0, 1.0, 1.0])
    adv = group_advantages(r, 4, scale=scale)
    assert not torch.isnan(adv).any()
    assert torch.equal(adv[:8], torch.zeros(8, dtype=torch.float64))
    assert adv[9].item() < 0 < adv[8].item()


def test_batch_scale_ignores_nan():
    nan = float("nan")
    with_nan = group_advantages(_t([1.0, 0.0, nan, 3.0, 3.0, nan]), 3, scale="batch")
    # Same valid rewards without the NaN slots: group means and batch std are identical.
    without = group_advantages(_t([1.0, 0.0, 3.0, 3.0]), 2, scale="batch")
    torch.testing.assert_close(with_nan[[0, 1, 3, 4]], without)
    assert with_nan[2].item() == 0.0 and with_nan[5].item() == 0.0


def test_eps_zero_identical_rewards_no_nan():
    adv = group_advantages(_t([2.0, 2.0, 1.0, 1.0]), 2, eps=0.0)
    assert torch.equal(adv, torch.zeros(4, dtype=torch.float64))


def test_int_rewards_and_dtype():
    adv = group_advantages(torch.tensor([1, 0]), 2, scale="none")
    assert adv.dtype == torch.float32
    torch.testing.assert_close(adv, torch.tensor([0.5, -0.5]))


def test_validation():
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(_t([1.0, 2.0, 3.0]), 2)
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(_t([1.0, 2.0]), 0)
    with pytest.raises(ValueError, match="scale"):
        group_advantages(_t([1.0, 2.0]), 2, scale="global")
    with pytest.raises(ValueError, match="rewards"):
        group_advantages(_t([[1.0, 2.0]]), 2)


def test_group_size_types():
    r = _t([1.0, 0.0])
    torch.testing.assert_close(group_advantages(r, torch.tensor(2), scale="none"), _t([0.5, -0.5]))
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(r, 2.0)
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(r, True)
