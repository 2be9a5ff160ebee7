"""Golden tests for success-rate curriculum weights."""

import pytest
import torch

from vlrl.algos import curriculum_weights, learnability_weights

F64 = torch.float64


def test_golden_temperature_one():
    # Weights 1 - SR + 1e-9 = [1 + 1e-9, 0.5 + 1e-9, 1e-9], total 1.5 + 3e-9.
    w = curriculum_weights(torch.tensor([0.0, 0.5, 1.0], dtype=F64), 1.0)
    z = 1.5 + 3e-9
    torch.testing.assert_close(w, torch.tensor([(1 + 1e-9) / z, (0.5 + 1e-9) / z, 1e-9 / z], dtype=F64),
                               rtol=1e-12, atol=0)
    assert w.sum().item() == pytest.approx(1.0, abs=1e-15)


def test_golden_temperature_half():
    # Exponent 2: [1, 0.25, 1e-18] (up to 1e-9 terms) / 1.25 -> [0.8, 0.2, 8e-19].
    w = curriculum_weights([0.0, 0.5, 1.0], 0.5)
    torch.testing.assert_close(w, torch.tensor([0.8, 0.2, 0.0]), rtol=0, atol=1e-6)
    assert w.dtype == torch.float32


def test_temperature_behaviour():
    sr = torch.tensor([0.1, 0.4, 0.7, 0.95], dtype=F64)
    ws = [curriculum_weights(sr, t) for t in (0.05, 0.5, 1.0, 4.0, 1e6)]
    # Hardest task always gets the most mass; argmax concentrates as T -> 0, flattens as T grows.
    for w in ws:
        assert int(w.argmax()) == 0
        assert torch.all(w[:-1] >= w[1:])
    top = [w[0].item() for w in ws]
    assert all(a > b for a, b in zip(top, top[1:]))
    assert top[0] > 0.99
    torch.testing.assert_close(ws[-1], torch.full((4,), 0.25, dtype=F64), rtol=0, atol=1e-5)


def test_small_temperature_does_not_underflow():
    # (1e-9)^(1/0.001) underflows to 0 for every task; the result must still be a distribution.
    w = curriculum_weights(torch.tensor([1.0, 1.0, 1.0]), 0.001)
    torch.testing.assert_close(w, torch.full((3,), 1 / 3))


def test_solved_task_keeps_nonzero_mass():
    w = curriculum_weights(torch.tensor([1.0, 0.0], dtype=F64), 1.0)
    assert 0 < w[0].item() < 1e-8


def test_validation():
    with pytest.raises(ValueError, match="temperature"):
        curriculum_weights(torch.tensor([0.5]), 0.0)
    with pytest.raises(ValueError, match="success_rates"):
        curriculum_weights(torch.tensor([1.5]), 1.0)
    with pytest.raises(ValueError, match="success_rates"):
        curriculum_weights(torch.tensor([float("nan")]), 1.0)
    with pytest.raises(ValueError, match="success_rates"):
        curriculum_weights(torch.tensor([]), 1.0)


def test_learnability_golden():
    # SR (1 - SR) + 0.01 = [0.26, 0.1975, 0.01] (tried), untried counts as SR 0.5: 0.26. Total 0.7275.
    w = learnability_weights(torch.tensor([0.5, 0.25, 1.0, 0.0], dtype=F64), torch.tensor([True, True, True, False]), 1.0)
    z = 0.7275
    torch.testing.assert_close(w, torch.tensor([0.26 / z, 0.1975 / z, 0.01 / z, 0.26 / z], dtype=F64), rtol=1e-12, atol=0)
    # T = 0.5 squares the weights: [0.0676, 0.0676, 0.1975^2] / 0.17420625 (SR 0.75 weighs as SR 0.25).
    w = learnability_weights(torch.tensor([0.5, 0.0, 0.75]), torch.tensor([True, False, True]), 0.5)
    torch.testing.assert_close(w, torch.tensor([0.0676, 0.0676, 0.03900625]) / 0.17420625, rtol=1e-5, atol=0)


def test_learnability_solved_and_hopeless_weigh_alike_and_stay_reachable():
    w = learnability_weights(torch.tensor([0.0, 1.0, 0.5], dtype=F64), torch.ones(3, dtype=torch.bool), 1.0)
    assert w[0].item() == w[1].item() > 0
    assert w[2].item() == pytest.approx(26 * w[0].item())


def test_learnability_validation():
    with pytest.raises(ValueError, match="temperature"):
        learnability_weights(torch.tensor([0.5]), torch.tensor([True]), 0.0)
    with pytest.raises(ValueError, match="success_rates"):
        learnability_weights(torch.tensor([-0.1]), torch.tensor([True]), 1.0)
    with pytest.raises(ValueError, match="one shape"):
        learnability_weights(torch.tensor([0.5, 0.5]), torch.tensor([True]), 1.0)
