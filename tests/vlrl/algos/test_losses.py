"""Golden tests for the clipped policy losses and the value loss (the aggregation contract across
micro-batches: test_aggregate.py; log-prob utilities: test_logprobs.py). Expected values come from hand
arithmetic or from plain-Python loops below, never from the code under test."""

import math

import pytest
import torch

from vlrl.algos import LOSS_TYPES, kl_penalty, loss_terms, policy_loss, value_loss

F64 = torch.float64

# ---------------------------------------------------------------------------------------------------
# Plain-Python reference


def ref_policy_loss(
    logp, old, adv, mask, loss_type, *, eps_low=0.2, eps_high=0.2, max_len=None, ref=None, beta=0.0,
    kl="k3", level="token", length_norm=64.0, weights=None,
):
    """Loops over nested lists; the independent re-derivation of the spec."""
    seq_sums, seq_counts = [], []
    for i in range(len(logp)):
        active = [t for t in range(len(logp[i])) if mask[i][t]]
        if level == "sequence":
            lr_seq = sum(logp[i][t] - old[i][t] for t in active) / max(len(active), 1)
        elif level == "action":
            lr_seq = sum(logp[i][t] - old[i][t] for t in active)
        s = 0.0
        for t in active:
            lr = lr_seq if level in ("sequence", "action") else logp[i][t] - old[i][t]
            r = math.exp(lr)
            r_clip = min(max(r, 1 - eps_low), 1 + eps_high)
            tok = -min(r * adv[i], r_clip * adv[i])
            if beta > 0:
                if kl == "k1":
                    tok += beta * (logp[i][t] - ref[i][t])
                else:
                    d = ref[i][t] - logp[i][t]
                    tok += beta * (math.exp(d) - d - 1)
            s += tok
        seq_sums.append(s)
        seq_counts.append(len(active))
    b = len(logp)
    if loss_type == "grpo":
        return sum(s / max(n, 1) for s, n in zip(seq_sums, seq_counts)) / b
    if loss_type in ("bnpo", "dapo"):
        return sum(seq_sums) / max(sum(seq_counts), 1)
    if loss_type == "dr_grpo":
        return sum(seq_sums) / (b * max_len)
    if loss_type == "gui_g1":
        w = weights or [1.0] * b
        return sum(wi * s / length_norm for wi, s in zip(w, seq_sums)) / b
    raise AssertionError(loss_type)


# ---------------------------------------------------------------------------------------------------
# Fixed example, B=2, L=3.
# Row 0: log-ratios [0.3, 0, (padding)], A = +1 -> ratio e^0.3 = 1.3499 > 1.2 is clipped high.
# Row 1: log-ratios [0, -0.2, -0.5], A = -2 -> ratio e^-0.5 = 0.6065 < 0.8 is clipped low.
LOGP = [[-0.8, -0.5, -2.0], [-0.3, -1.2, -0.7]]
OLD = [[-1.1, -0.5, -1.0], [-0.3, -1.0, -0.2]]
MASK = [[1, 1, 0], [1, 1, 1]]
ADV = [1.0, -2.0]
# Per-token losses: row 0: -min(1.3499, 1.2) = -1.2, -1.0; row 1: 2.0, 2*e^-0.2 = 1.6374615061559636,
# -min(-2*0.6065, -2*0.8) = 1.6.
ROW0 = [-1.2, -1.0]
ROW1 = [2.0, 2 * math.exp(-0.2), 1.6]
GOLDEN = {
    "grpo": (sum(ROW0) / 2 + sum(ROW1) / 3) / 2,  # 0.32291025102599393
    "bnpo": (sum(ROW0) + sum(ROW1)) / 5,  # 0.6074923012311927
    "dapo": (sum(ROW0) + sum(ROW1)) / 5,
    "dr_grpo": (sum(ROW0) + sum(ROW1)) / (2 * 4),  # max_completion_length = 4
    "gui_g1": (sum(ROW0) / 64 + sum(ROW1) / 64) / 2,
}


def _fixed(requires_grad=False):
    logp = torch.tensor(LOGP, dtype=F64, requires_grad=requires_grad)
    return logp, torch.tensor(OLD, dtype=F64), torch.tensor(ADV, dtype=F64), torch.tensor(MASK, dtype=torch.bool)


def test_golden_numbers_are_right():
    # Pin the hand arithmetic so the reference helper and the dict above agree with each other.
    assert GOLDEN["grpo"] == pytest.approx(0.32291025102599393, abs=1e-12)
    assert GOLDEN["bnpo"] == pytest.approx(0.6074923012311927, abs=1e-12)
    assert GOLDEN["dr_grpo"] == pytest.approx(0.37968268826949545, abs=1e-12)
    assert GOLDEN["gui_g1"] == pytest.approx(0.023730168016843466, abs=1e-12)
    for lt, v in GOLDEN.items():
        assert ref_policy_loss(LOGP, OLD, ADV, MASK, lt, max_len=4) == pytest.approx(v, abs=1e-12)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_policy_loss_golden(loss_type):
    logp, old, adv, mask = _fixed()
    got = policy_loss(logp, old, adv, mask, loss_type=loss_type, max_completion_length=4)
    assert got.item() == pytest.approx(GOLDEN[loss_type], abs=1e-12)


def test_policy_loss_float_mask_and_bool_mask_agree():
    logp, old, adv, mask = _fixed()
    a = policy_loss(logp, old, adv, mask, loss_type="grpo")
    b = policy_loss(logp, old, adv, mask.to(F64), loss_type="grpo")
    assert a.item() == b.item()


def test_gui_g1_seq_weights_golden():
    logp, old, adv, mask = _fixed()
    got = policy_loss(logp, old, adv, mask, loss_type="gui_g1", seq_weights=torch.tensor([2.0, 0.5], dtype=F64),
                      length_norm=10.0)
    expected = (2.0 * sum(ROW0) / 10 + 0.5 * sum(ROW1) / 10) / 2
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_diagnostics_golden():
    logp, old, adv, mask = _fixed()
    terms = loss_terms(logp, old, adv, mask)
    d = terms.diagnostics
    assert d["clip_frac_low"].item() == pytest.approx(1 / 5)
    assert d["clip_frac_high"].item() == pytest.approx(1 / 5)
    assert d["clip_frac"].item() == pytest.approx(2 / 5)
    ratio_mean = (math.exp(0.3) + 1 + 1 + math.exp(-0.2) + math.exp(-0.5)) / 5
    assert d["ratio_mean"].item() == pytest.approx(ratio_mean, abs=1e-12)
    assert "kl_mean" not in d
    assert all(not v.requires_grad for v in d.values())
    # The per-token loss is the golden per-token table, zero on padding.
    expected = torch.tensor([ROW0 + [0.0], ROW1], dtype=F64)
    torch.testing.assert_close(terms.per_token_loss, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("level", ["token", "sequence", "action"])
@pytest.mark.parametrize("beta,kl", [(0.0, "k3"), (0.05, "k1"), (0.1, "k3")])
def test_policy_loss_matches_python_reference(loss_type, level, beta, kl, random_case):
    logp, old, ref, adv, mask = random_case(7)
    weights = [0.5, 1.0, 2.0, 1.5] if loss_type == "gui_g1" else None
    got = policy_loss(
        logp, old, adv, mask, loss_type=loss_type, eps_low=0.2, eps_high=0.28, max_completion_length=6,
        ref_logp=ref, beta=beta, kl=kl, importance_level=level, length_norm=3.0,
        seq_weights=torch.tensor(weights, dtype=F64) if weights else None,
    )
    expected = ref_policy_loss(
        logp.tolist(), old.tolist(), adv.tolist(), mask.tolist(), loss_type, eps_low=0.2, eps_high=0.28,
        max_len=6, ref=ref.tolist(), beta=beta, kl=kl, level=level, length_norm=3.0, weights=weights,
    )
    assert got.item() == pytest.approx(expected, abs=1e-12)


def test_dr_grpo_full_length_single_sequence_equals_grpo(random_case):
    logp, old, _, adv, mask = random_case(1, b=1, length=6, ragged=False)
    a = policy_loss(logp, old, adv, mask, loss_type="dr_grpo", max_completion_length=6)
    b = policy_loss(logp, old, adv, mask, loss_type="grpo")
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_bnpo_equals_dapo_single_microbatch(random_case):
    logp, old, ref, adv, mask = random_case(2)
    a = policy_loss(logp, old, adv, mask, loss_type="bnpo", ref_logp=ref, beta=0.1)
    b = policy_loss(logp, old, adv, mask, loss_type="dapo", ref_logp=ref, beta=0.1)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # ... and they are not grpo on ragged lengths, so the equivalence above is not vacuous.
    c = policy_loss(logp, old, adv, mask, loss_type="grpo", ref_logp=ref, beta=0.1)
    assert abs((a - c).item()) > 1e-4


def test_gui_g1_equals_grpo_with_length_norm_equal_to_length(random_case):
    logp, old, _, adv, mask = random_case(3, length=5, ragged=False)
    a = policy_loss(logp, old, adv, mask, loss_type="gui_g1", length_norm=5.0)
    b = policy_loss(logp, old, adv, mask, loss_type="grpo")
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_sequence_ratio_equals_token_ratio_for_constant_log_ratio(random_case):
    logp, _, _, adv, mask = random_case(4)
    shift = torch.tensor([0.05, -0.1, 0.3, -0.4], dtype=F64).unsqueeze(1)  # constant per row
    old = logp - shift
    for lt in LOSS_TYPES:
        a = policy_loss(logp, old, adv, mask, loss_type=lt, importance_level="token", max_completion_length=5)
        b = policy_loss(logp, old, adv, mask, loss_type=lt, importance_level="sequence", max_completion_length=5)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    # Not constant -> the two differ (sanity check that the flag does something).
    old2 = old.clone()
    old2[0, 0] += 0.3
    a = policy_loss(logp, old2, adv, mask, loss_type="grpo")
    b = policy_loss(logp, old2, adv, mask, loss_type="grpo", importance_level="sequence")
    assert abs((a - b).item()) > 1e-6


def test_sequence_ratio_is_masked_mean():
    logp = torch.tensor([[0.0, 0.0, -5.0]], dtype=F64)
    old = torch.tensor([[-0.1, -0.3, 0.0]], dtype=F64)  # padding log-ratio -5 must be ignored
    mask = torch.tensor([[1, 1, 0]])
    terms = loss_terms(logp, old, torch.tensor([1.0], dtype=F64), mask, importance_level="sequence", eps_high=1.0)
    r = math.exp(0.2)
    torch.testing.assert_close(terms.per_token_loss, torch.tensor([[-r, -r, 0.0]], dtype=F64))


def test_action_ratio_is_product_of_token_probabilities():
    """VLA-RL's per-action ratio: p(action) / p_old(action) = prod over its D tokens; padding ignored."""
    logp = torch.tensor([[-0.5, -1.0, -0.2, -9.0]], dtype=F64)
    old = torch.tensor([[-0.6, -1.1, -0.25, 0.0]], dtype=F64)
    mask = torch.tensor([[1, 1, 1, 0]])
    r = math.exp(0.1 + 0.1 + 0.05)  # 1.284: inside [0.8, 1.3]
    terms = loss_terms(logp, old, torch.tensor([2.0], dtype=F64), mask, importance_level="action", eps_high=0.3)
    torch.testing.assert_close(terms.per_token_loss, torch.tensor([[-2 * r, -2 * r, -2 * r, 0.0]], dtype=F64))
    # With eps_high 0.2 the action ratio 1.284 is clipped at 1.2 although every token ratio (<= 1.11) is not.
    clipped = loss_terms(logp, old, torch.tensor([2.0], dtype=F64), mask, importance_level="action", eps_high=0.2)
    torch.testing.assert_close(clipped.per_token_loss[0, :3], torch.full((3,), -2.4, dtype=F64))
    token = loss_terms(logp, old, torch.tensor([2.0], dtype=F64), mask, importance_level="token", eps_high=0.2)
    assert token.diagnostics["clip_frac"].item() == 0.0 and clipped.diagnostics["clip_frac"].item() == 1.0


def test_clipped_high_token_has_zero_gradient():
    logp, old, adv, mask = _fixed(requires_grad=True)
    loss = policy_loss(logp, old, adv, mask, loss_type="bnpo")
    loss.backward()
    g = logp.grad
    assert g[0, 0].item() == 0.0  # A > 0 and ratio 1.35 > 1.2
    assert g[1, 2].item() == 0.0  # A < 0 and ratio 0.61 < 0.8
    assert g[0, 2].item() == 0.0  # padding
    # Unclipped token: d/dlogp of -r*A/5 = -r*A/5 with r = 1, A = 1.
    assert g[0, 1].item() == pytest.approx(-1 / 5, abs=1e-12)
    assert g[1, 1].item() == pytest.approx(2 * math.exp(-0.2) / 5, abs=1e-12)


def test_clip_not_applied_on_the_helpful_side():
    # A > 0 with ratio below 1 - eps: the unclipped branch is the min, so the gradient is not zero.
    logp = torch.tensor([[-1.0]], dtype=F64, requires_grad=True)
    old = torch.tensor([[0.0]], dtype=F64)
    loss = policy_loss(logp, old, torch.tensor([1.0], dtype=F64), torch.ones(1, 1), loss_type="grpo")
    loss.backward()
    assert loss.item() == pytest.approx(-math.exp(-1.0))
    assert logp.grad.item() == pytest.approx(-math.exp(-1.0))


def test_on_policy_old_logp_is_treated_as_constant():
    # old_logp = logp (same tensor, not detached): ratio 1 and d(-r*A)/dlogp = -A per token.
    logp = torch.tensor([[-1.0, -2.0]], dtype=F64, requires_grad=True)
    loss = policy_loss(logp, logp, torch.tensor([3.0], dtype=F64), torch.ones(1, 2), loss_type="dapo")
    loss.backward()
    assert loss.item() == pytest.approx(-3.0)
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.5, -1.5]], dtype=F64))


def test_kl_estimators_golden():
    logp = torch.tensor([[-1.0, -2.0]], dtype=F64)
    ref = torch.tensor([[-0.5, -2.5]], dtype=F64)  # d = ref - logp = [0.5, -0.5]
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), torch.tensor([[-0.5, 0.5]], dtype=F64))
    k3 = torch.tensor([[math.exp(0.5) - 1.5, math.exp(-0.5) - 0.5]], dtype=F64)  # [0.148721, 0.106531]
    assert k3[0, 0].item() == pytest.approx(0.1487212707, abs=1e-9)
    assert k3[0, 1].item() == pytest.approx(0.1065306597, abs=1e-9)
    torch.testing.assert_close(kl_penalty(logp, ref, "k3"), k3)
    # In the loss: ratio 1, A = 0 -> the loss is exactly beta * mean KL.
    mask = torch.ones(1, 2)
    zero_adv = torch.zeros(1, dtype=F64)
    for kl, vals in (("k1", [-0.5, 0.5]), ("k3", k3[0].tolist())):
        terms = loss_terms(logp, logp.clone(), zero_adv, mask, ref_logp=ref, beta=0.1, kl=kl)
        assert terms.diagnostics["kl_mean"].item() == pytest.approx(sum(vals) / 2, abs=1e-12)
        got = policy_loss(logp, logp.clone(), zero_adv, mask, loss_type="grpo", ref_logp=ref, beta=0.1, kl=kl)
        assert got.item() == pytest.approx(0.1 * sum(vals) / 2, abs=1e-12)


def test_beta_zero_needs_no_reference():
    logp, old, adv, mask = _fixed()
    for lt in LOSS_TYPES:
        loss = policy_loss(logp, old, adv, mask, loss_type=lt, ref_logp=None, beta=0.0, max_completion_length=4)
        assert torch.isfinite(loss)


def test_padding_with_inf_logprobs_stays_finite(random_case):
    logp, old, ref, adv, mask = random_case(5)
    logp = logp.masked_fill(~mask, float("-inf")).requires_grad_(True)
    old = old.masked_fill(~mask, float("-inf"))
    ref = ref.masked_fill(~mask, 50.0)
    for level in ("token", "sequence"):
        loss = policy_loss(logp, old, adv, mask, loss_type="dapo", ref_logp=ref, beta=0.1, importance_level=level)
        (grad,) = torch.autograd.grad(loss, logp)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        assert (grad[~mask] == 0).all()


def test_per_token_advantages(random_case):
    logp, old, _, adv, mask = random_case(6)
    a = policy_loss(logp, old, adv, mask, loss_type="grpo")
    b = policy_loss(logp, old, adv.unsqueeze(1).expand(-1, 5).contiguous(), mask, loss_type="grpo")
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_validation_errors():
    logp, old, adv, mask = _fixed()
    with pytest.raises(ValueError, match="max_completion_length"):
        policy_loss(logp, old, adv, mask, loss_type="dr_grpo")
    with pytest.raises(ValueError, match="loss_type"):
        policy_loss(logp, old, adv, mask, loss_type="ppo")
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(logp, old, adv, mask, loss_type="grpo", beta=0.1)
    with pytest.raises(ValueError, match="kl"):
        policy_loss(logp, old, adv, mask, loss_type="grpo", kl="k2")
    with pytest.raises(ValueError, match="importance_level"):
        policy_loss(logp, old, adv, mask, loss_type="grpo", importance_level="turn")
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(logp, old, adv[:1], mask, loss_type="grpo")
    with pytest.raises(ValueError, match="mask"):
        policy_loss(logp, old, adv, mask[:, :2], loss_type="grpo")
    with pytest.raises(ValueError, match="seq_weights"):
        policy_loss(logp, old, adv, mask, loss_type="grpo", seq_weights=torch.ones(2))


# ---------------------------------------------------------------------------------------------------
# Value loss


def test_value_loss_golden():
    v = torch.tensor([1.0, 2.0, 1.0], dtype=F64)
    old = torch.tensor([0.5, 2.5, 0.5], dtype=F64)
    ret = torch.tensor([2.0, 1.0, 0.0], dtype=F64)
    # Unclipped errors (v - R)^2 = [1, 1, 1].
    assert value_loss(v, old, ret).item() == pytest.approx(0.5)
    # v_clip = old + clamp(v - old, +-0.2) = [0.7, 2.3, 0.7] -> (v_clip - R)^2 = [1.69, 1.69, 0.49];
    # elementwise max with [1, 1, 1] = [1.69, 1.69, 1.0] -> 0.5 * 4.38 / 3 = 0.73.
    assert value_loss(v, old, ret, clip=0.2).item() == pytest.approx(0.73, abs=1e-12)
    mask = torch.tensor([1, 1, 0])
    assert value_loss(v, old, ret, mask=mask, clip=0.2).item() == pytest.approx(0.845, abs=1e-12)


def test_value_loss_gradient_zero_when_clipped_branch_wins():
    v = torch.tensor([1.0], dtype=F64, requires_grad=True)
    loss = value_loss(v, torch.tensor([0.5], dtype=F64), torch.tensor([2.0], dtype=F64), clip=0.2)
    loss.backward()
    assert v.grad.item() == 0.0
