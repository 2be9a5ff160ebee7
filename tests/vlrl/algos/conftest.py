"""Shared cases of the loss tests (test_losses.py, test_aggregate.py)."""

import pytest
import torch

F64 = torch.float64


def _random_case(seed, b=4, length=5, ragged=True, lengths=None):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(b, length, generator=g, dtype=F64) * 2
    old = logp + (torch.rand(b, length, generator=g, dtype=F64) - 0.5) * 0.8  # ratios in ~[0.67, 1.5]
    ref = logp + (torch.rand(b, length, generator=g, dtype=F64) - 0.5)
    adv = torch.randn(b, generator=g, dtype=F64)
    if lengths is not None:
        lengths = torch.tensor(lengths)
    elif ragged:
        lengths = torch.randint(1, length + 1, (b,), generator=g)
    else:
        lengths = torch.full((b,), length)
    mask = torch.arange(length).unsqueeze(0) < lengths.unsqueeze(1)
    return logp, old, ref, adv, mask


@pytest.fixture
def random_case():
    """`random_case(seed, b=4, length=5, ragged=True, lengths=None)` -> (logp, old, ref, adv, mask): float64
    [b, length] log-probs near the sampling ones (ratios in ~[0.67, 1.5]), a reference, [b] advantages and a
    bool mask of ragged (or given) lengths; the same seed gives the same case."""
    return _random_case
