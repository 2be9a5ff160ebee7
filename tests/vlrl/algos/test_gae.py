"""Golden tests for GAE: bootstrapping, terminal / truncation boundaries, batching."""

import pytest
import torch

from vlrl.algos import gae

F64 = torch.float64


def _t(xs, dtype=F64):
    return torch.tensor(xs, dtype=dtype)


def _ref_gae(rewards, values, dones, gamma, lam, last_value, truncated=None, next_values=None):
    """Plain-Python loop over one row."""
    n = len(rewards)
    adv = [0.0] * n
    carry, v_next = 0.0, last_value
    for t in reversed(range(n)):
        if dones[t]:
            nv, c = 0.0, 0.0
        elif truncated is not None and truncated[t]:
            nv, c = next_values[t], 0.0
        else:
            nv, c = v_next, carry
        adv[t] = rewards[t] + gamma * nv - values[t] + gamma * lam * c
        carry, v_next = adv[t], values[t]
    return adv


def test_three_step_golden():
    # gamma 0.9, lam 0.8 (gamma*lam = 0.72), bootstrap 0.2 after the last step:
    # d2 = 2 + 0.9*0.2 - 0.3 = 1.88                A2 = 1.88
    # d1 = 0 + 0.9*0.3 - 0.4 = -0.13               A1 = -0.13 + 0.72*1.88 = 1.2236
    # d0 = 1 + 0.9*0.4 - 0.5 = 0.86                A0 = 0.86 + 0.72*1.2236 = 1.740992
    adv, ret = gae(_t([1.0, 0.0, 2.0]), _t([0.5, 0.4, 0.3]), _t([0, 0, 0], torch.bool), 0.9, 0.8, last_value=0.2)
    torch.testing.assert_close(adv, _t([1.740992, 1.2236, 1.88]), rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, _t([2.240992, 1.6236, 2.18]), rtol=0, atol=1e-12)


def test_done_at_last_step_ignores_last_value():
    a1, _ = gae(_t([1.0, 0.0, 2.0]), _t([0.5, 0.4, 0.3]), _t([0, 0, 1], torch.bool), 0.9, 0.8, last_value=0.2)
    a2, _ = gae(_t([1.0, 0.0, 2.0]), _t([0.5, 0.4, 0.3]), _t([0, 0, 1], torch.bool), 0.9, 0.8, last_value=99.0)
    torch.testing.assert_close(a1, a2)
    assert a1[2].item() == pytest.approx(2.0 - 0.3)


def test_done_in_the_middle_golden_and_no_leakage():
    # Episode 1 = steps 0-1 (done after 1), episode 2 = steps 2-3, bootstrapped with last_value 1.
    # A3 = 1 + 0.9*1 - 0.5 = 1.4; A2 = 1 + 0.45 - 0.5 + 0.72*1.4 = 1.958
    # A1 = 1 - 0.5 = 0.5 (terminal); A0 = 0.95 + 0.72*0.5 = 1.31
    r, v, d = _t([1.0, 1.0, 1.0, 1.0]), _t([0.5] * 4), _t([0, 1, 0, 0], torch.bool)
    adv, ret = gae(r, v, d, 0.9, 0.8, last_value=1.0)
    torch.testing.assert_close(adv, _t([1.31, 0.5, 1.958, 1.4]), rtol=0, atol=1e-12)
    torch.testing.assert_close(ret, adv + v)
    # Changing anything in episode 2 leaves episode 1's advantages untouched.
    adv2, _ = gae(_t([1.0, 1.0, -7.0, 3.0]), _t([0.5, 0.5, 4.0, -2.0]), d, 0.9, 0.8, last_value=-5.0)
    torch.testing.assert_close(adv2[:2], adv[:2], rtol=0, atol=0)
    # Without the done flag it would leak (the test above can fail).
    adv3, _ = gae(r, v, _t([0, 0, 0, 0], torch.bool), 0.9, 0.8, last_value=1.0)
    assert abs(adv3[1].item() - adv[1].item()) > 0.1


def test_truncation_bootstraps_from_next_values():
    # Same layout, but episode 1 was cut off after step 1 with V(next obs) = 2:
    # A1 = 1 + 0.9*2 - 0.5 = 2.3 (no carry from step 2); A0 = 0.95 + 0.72*2.3 = 2.606.
    r, v = _t([1.0, 1.0, 1.0, 1.0]), _t([0.5] * 4)
    dones = _t([0, 0, 0, 0], torch.bool)
    trunc = _t([0, 1, 0, 0], torch.bool)
    next_values = _t([123.0, 2.0, 123.0, 123.0])  # only read at truncated steps
    adv, _ = gae(r, v, dones, 0.9, 0.8, last_value=1.0, truncated=trunc, next_values=next_values)
    torch.testing.assert_close(adv, _t([2.606, 2.3, 1.958, 1.4]), rtol=0, atol=1e-12)
    # No leakage across the truncation boundary either.
    adv2, _ = gae(
        _t([1.0, 1.0, 50.0, 1.0]), v, dones, 0.9, 0.8, last_value=1.0, truncated=trunc, next_values=next_values
    )
    torch.testing.assert_close(adv2[:2], adv[:2], rtol=0, atol=0)


def test_done_wins_over_truncated():
    r, v = _t([1.0, 1.0]), _t([0.5, 0.5])
    a, _ = gae(r, v, _t([1, 0], torch.bool), 0.9, 0.8, truncated=_t([1, 0], torch.bool), next_values=_t([9.0, 9.0]))
    assert a[0].item() == pytest.approx(0.5)


def test_truncated_requires_next_values():
    with pytest.raises(ValueError, match="next_values"):
        gae(_t([1.0, 1.0]), _t([0.0, 0.0]), _t([0, 0], torch.bool), 0.9, 0.8, truncated=_t([1, 0], torch.bool))
    # All-false truncation needs nothing.
    gae(_t([1.0, 1.0]), _t([0.0, 0.0]), _t([0, 0], torch.bool), 0.9, 0.8, truncated=_t([0, 0], torch.bool))


def test_reward_to_go_with_unit_gamma_lambda():
    adv, ret = gae(_t([1.0, 2.0, 3.0]), torch.zeros(3, dtype=F64), _t([0, 0, 0], torch.bool), 1.0, 1.0)
    torch.testing.assert_close(adv, _t([6.0, 5.0, 3.0]))
    torch.testing.assert_close(ret, adv)
    adv, _ = gae(_t([1.0, 2.0, 3.0]), torch.zeros(3, dtype=F64), _t([0, 1, 0], torch.bool), 1.0, 1.0)
    torch.testing.assert_close(adv, _t([3.0, 2.0, 3.0]))


def test_batched_equals_rows_and_reference():
    g = torch.Generator().manual_seed(0)
    n, t = 3, 7
    r = torch.randn(n, t, generator=g, dtype=F64)
    v = torch.randn(n, t, generator=g, dtype=F64)
    d = torch.rand(n, t, generator=g) < 0.25
    tr = torch.rand(n, t, generator=g) < 0.25
    nv = torch.randn(n, t, generator=g, dtype=F64)
    last = torch.randn(n, generator=g, dtype=F64)
    adv, ret = gae(r, v, d, 0.95, 0.9, last_value=last, truncated=tr, next_values=nv)
    assert adv.shape == ret.shape == (n, t)
    for i in range(n):
        a_i, r_i = gae(r[i], v[i], d[i], 0.95, 0.9, last_value=last[i], truncated=tr[i], next_values=nv[i])
        torch.testing.assert_close(adv[i], a_i, rtol=0, atol=0)
        torch.testing.assert_close(ret[i], r_i, rtol=0, atol=0)
        ref = _ref_gae(r[i].tolist(), v[i].tolist(), d[i].tolist(), 0.95, 0.9, last[i].item(), tr[i].tolist(),
                       nv[i].tolist())
        torch.testing.assert_close(adv[i], _t(ref), rtol=0, atol=1e-12)


def test_float_dones_and_no_grad():
    v = _t([0.5, 0.4]).requires_grad_(True)
    adv, ret = gae(_t([1.0, 1.0]), v, _t([0.0, 1.0]), 0.9, 0.8)
    assert not adv.requires_grad and not ret.requires_grad
    torch.testing.assert_close(adv, _t([1.0 + 0.9 * 0.4 - 0.5 + 0.72 * 0.6, 0.6]))


def test_shape_validation():
    with pytest.raises(ValueError, match="values"):
        gae(_t([1.0, 1.0]), _t([0.0]), _t([0, 0], torch.bool), 0.9, 0.8)
    with pytest.raises(ValueError, match="dones"):
        gae(_t([1.0, 1.0]), _t([0.0, 0.0]), _t([0], torch.bool), 0.9, 0.8)
    with pytest.raises(ValueError, match="last_value"):
        z = torch.zeros(2, 3)
        gae(z, z, z.bool(), 0.9, 0.8, last_value=torch.zeros(3))
    with pytest.raises(ValueError, match="next_values"):
        gae(z, z, z.bool(), 0.9, 0.8, truncated=torch.ones(2, 3, dtype=torch.bool), next_values=torch.zeros(6))
