import math

import pytest

from vlrl.stats import accuracy_cell, binomial_stderr, mean_stderr, paired_gain


def test_binomial_stderr_golden():
    assert binomial_stderr(0.5, 100) == pytest.approx(0.05)
    assert binomial_stderr(0.2, 400) == pytest.approx(0.02)
    assert binomial_stderr(0.3, 0) == 0.0


def test_accuracy_cell():
    assert accuracy_cell([1, 0, 1, 1]) == {"accuracy": 0.75, "stderr": pytest.approx(math.sqrt(0.75 * 0.25 / 4)), "count": 4}
    assert accuracy_cell([]) == {"accuracy": 0.0, "stderr": 0.0, "count": 0}


def test_mean_stderr_uses_the_sample_variance():
    m, se = mean_stderr([1.0, 2.0, 3.0, 4.0])  # sample variance 5/3
    assert m == 2.5 and se == pytest.approx(math.sqrt(5 / 3 / 4))
    assert mean_stderr([0.7]) == (0.7, 0.0)
    assert all(math.isnan(x) for x in mean_stderr([]))


def test_paired_gain_golden():
    # differences: +1, 0, 0, -1, +1 -> mean 0.2, sample var = (0.64 + 0.04 + 0.04 + 1.44 + 0.64) / 4 = 0.7
    m, se = paired_gain([0, 1, 0, 1, 0], [1, 1, 0, 0, 1])
    assert m == pytest.approx(0.2)
    assert se == pytest.approx(math.sqrt(0.7 / 5))
    # the sign is after - before, and equal per-item shifts have no spread
    assert paired_gain([0.5, 0.25], [0.25, 0.0]) == (pytest.approx(-0.25), 0.0)
    assert paired_gain([0.0], [1.0]) == (1.0, 0.0)
    for before, after in (([1, 0], [1]), ([], [])):
        with pytest.raises(ValueError, match="paired_gain"):
            paired_gain(before, after)
