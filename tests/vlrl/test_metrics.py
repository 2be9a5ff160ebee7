"""Curve helpers of vlrl.metrics: the trailing mean drawn over noisy RL rewards, and the PNG."""

import pytest
from PIL import Image

from vlrl.metrics import plot_curves, trailing_mean


def test_trailing_mean_golden():
    assert trailing_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert trailing_mean([2.0, 4.0, 9.0], 5) == [2.0, 3.0, 5.0]  # shorter than the window: running mean
    assert trailing_mean([], 3) == []
    with pytest.raises(ValueError, match="window"):
        trailing_mean([1.0], 0)


def test_plot_curves_draws_long_series_faded_with_their_trailing_mean(tmp_path):
    records = [{"step": i, "reward/mean": float(i % 2)} for i in range(1, 121)]
    out = tmp_path / "curve.png"
    assert plot_curves(records, ["reward/mean", "eval/overall"], out, title="t")
    colours = {c for _, c in Image.open(out).convert("RGB").getcolors(1 << 16)}
    assert (0x1F, 0x77, 0xB4) in colours  # the trailing mean, full colour
    assert (0xBC, 0xD6, 0xE9) in colours  # the raw series, faded
    assert not plot_curves(records, ["missing"], tmp_path / "none.png")
