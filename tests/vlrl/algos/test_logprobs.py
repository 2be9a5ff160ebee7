"""Log-prob utilities (vlrl/algos/logprobs.py) against torch's log_softmax and hand-computed entropies."""

import math

import pytest
import torch

from vlrl.algos import entropy_from_logits, sequence_logprob, token_logprobs

F64 = torch.float64


# ---------------------------------------------------------------------------------------------------
# Log-prob utilities


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_token_logprobs_matches_log_softmax(temperature, dtype):
    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(3, 5, 17, generator=g) * 3).to(dtype)
    tokens = torch.randint(0, 17, (3, 5), generator=g)
    got = token_logprobs(logits, tokens, temperature=temperature)
    ref = torch.log_softmax(logits.double() / temperature, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    assert got.shape == (3, 5)
    assert got.dtype in (torch.float32, torch.float64)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got.double(), ref, rtol=0, atol=tol)


def test_token_logprobs_gradient_matches_reference():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 4, 9, generator=g, dtype=F64, requires_grad=True)
    tokens = torch.randint(0, 9, (2, 4), generator=g)
    (ga,) = torch.autograd.grad(token_logprobs(logits, tokens, 0.5).sum(), logits)
    ref = torch.log_softmax(logits / 0.5, -1).gather(-1, tokens.unsqueeze(-1)).sum()
    (gb,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(ga, gb)


def test_entropy_matches_reference():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 4, 11, generator=g, dtype=F64) * 2
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    logp = torch.log_softmax(logits, -1)
    ent_tok = -(logp.exp() * logp).sum(-1)
    expected = (ent_tok * mask).sum() / mask.sum()
    got = entropy_from_logits(logits, mask)
    assert got.dtype == F64
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    got16 = entropy_from_logits(logits.to(torch.bfloat16), mask)
    assert got16.dtype == torch.float32
    torch.testing.assert_close(got16.double(), expected, rtol=0, atol=5e-2)


def test_entropy_golden_uniform_and_masked_vocab():
    # Uniform over V=8 -> log 8; with 4 entries at -inf -> uniform over 4 -> log 4, no NaN.
    logits = torch.zeros(1, 2, 8)
    logits[0, 1, 4:] = float("-inf")
    logits.requires_grad_(True)
    mask = torch.tensor([[1, 0]])
    assert entropy_from_logits(logits, mask).item() == pytest.approx(math.log(8), abs=1e-6)
    mask = torch.tensor([[0, 1]])
    ent = entropy_from_logits(logits, mask)
    assert ent.item() == pytest.approx(math.log(4), abs=1e-6)
    ent.backward()
    assert torch.isfinite(logits.grad).all()


def test_sequence_logprob():
    logp = torch.tensor([[-0.5, -1.0, -9.0], [-0.25, -0.25, -0.25]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    torch.testing.assert_close(sequence_logprob(logp, mask), torch.tensor([-1.5, -0.75]))
