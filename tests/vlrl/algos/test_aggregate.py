"""The aggregation contract of the policy losses: summed over micro-batches (and, by the same arithmetic,
processes) with global counts, `aggregate` gives the full-batch loss and gradient."""

import pytest
import torch

from vlrl.algos import LOSS_TYPES, aggregate, loss_terms, policy_loss

F64 = torch.float64


# ---------------------------------------------------------------------------------------------------
# Aggregation contract across micro-batches (and, by the same arithmetic, processes)


def _split_sum(logp, old, ref, adv, mask, loss_type, n_mb, weights):
    b = logp.shape[0]
    num_tokens = int(mask.sum())
    total = 0.0
    per_mb = []
    for idx in torch.arange(b).chunk(n_mb):
        sl = slice(int(idx[0]), int(idx[-1]) + 1)
        terms = loss_terms(logp[sl], old[sl], adv[sl], mask[sl], ref_logp=ref[sl], beta=0.04, eps_high=0.28)
        total = total + aggregate(
            terms.per_token_loss, mask[sl], loss_type, num_sequences=b, num_tokens=num_tokens, num_microbatches=n_mb,
            max_completion_length=8, length_norm=5.0, seq_weights=None if weights is None else weights[sl],
        )
        per_mb.append(policy_loss(
            logp[sl], old[sl], adv[sl], mask[sl], loss_type=loss_type, ref_logp=ref[sl], beta=0.04, eps_high=0.28,
            max_completion_length=8, length_norm=5.0, seq_weights=None if weights is None else weights[sl],
        ))
    return total, per_mb


@pytest.mark.parametrize("n_mb", [2, 4])
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_aggregate_contract(loss_type, n_mb, random_case):
    # Ragged lengths, and unequal token counts per micro-batch for both splits (7 vs 8), so that
    # every normalisation differs from the others.
    logp, old, ref, adv, mask = random_case(11, b=4, length=6, lengths=[6, 1, 3, 5])
    weights = torch.tensor([1.0, 0.5, 2.0, 1.5], dtype=F64) if loss_type == "gui_g1" else None
    leaf_full = logp.clone().requires_grad_(True)
    leaf_split = logp.clone().requires_grad_(True)

    total, per_mb = _split_sum(leaf_split, old, ref, adv, mask, loss_type, n_mb, weights)
    if loss_type == "bnpo":
        # bnpo is per micro-batch by definition: the target is the mean of the micro-batch losses.
        target = torch.stack(per_mb).mean()
        (g_target,) = torch.autograd.grad(target, leaf_split, retain_graph=True)
        full = policy_loss(leaf_full, old, adv, mask, loss_type="bnpo", ref_logp=ref, beta=0.04, eps_high=0.28)
        # ... which is not the full-batch bnpo value (token counts differ per micro-batch).
        assert abs((full - target).item()) > 1e-6
    else:
        target = policy_loss(
            leaf_full, old, adv, mask, loss_type=loss_type, ref_logp=ref, beta=0.04, eps_high=0.28,
            max_completion_length=8, length_norm=5.0, seq_weights=weights,
        )
        (g_target,) = torch.autograd.grad(target, leaf_full)
    (g_total,) = torch.autograd.grad(total, leaf_split)
    torch.testing.assert_close(total, target.detach(), rtol=0, atol=1e-6)
    torch.testing.assert_close(g_total, g_target, rtol=0, atol=1e-6)


def test_aggregate_defaults_are_local_counts(random_case):
    logp, old, ref, adv, mask = random_case(12)
    per_tok = loss_terms(logp, old, adv, mask).per_token_loss
    for lt in LOSS_TYPES:
        a = aggregate(per_tok, mask, lt, max_completion_length=7)
        b = aggregate(per_tok, mask, lt, num_sequences=4, num_tokens=int(mask.sum()), num_microbatches=1,
                      max_completion_length=7)
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_aggregate_accepts_tensor_counts(random_case):
    logp, old, _, adv, mask = random_case(13)
    per_tok = loss_terms(logp, old, adv, mask).per_token_loss
    a = aggregate(per_tok, mask, "dapo", num_tokens=torch.tensor(40))
    b = aggregate(per_tok, mask, "dapo", num_tokens=40)
    torch.testing.assert_close(a, b)
