import math

import pytest

from vlrl.stats import accuracy_cell, binomial_stderr, mean_stderr


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
