"""Curve helpers: the trailing mean drawn over noisy RL rewards, the matplotlib figure, the progress line and the
end-of-run summary."""

import pytest
from PIL import Image

from vlrl.metrics import plot_curves, trailing_mean
from vlrl.plots import curve_figure
from vlrl.progress import RL_KEYS, progress_line, run_summary, show_bar


def test_trailing_mean_golden():
    assert trailing_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert trailing_mean([2.0, 4.0, 9.0], 5) == [2.0, 3.0, 5.0]  # shorter than the window: running mean
    assert trailing_mean([], 3) == []
    with pytest.raises(ValueError, match="window"):
        trailing_mean([1.0], 0)


def test_curves_have_labels_grid_round_ticks_and_the_trend_over_the_faded_raw_series(tmp_path):
    import math

    records = [{"step": i, "reward/mean": float(i % 2) + i / 100, "success/rate": float(i % 3 == 0)} for i in range(1, 121)]
    records[-1]["eval/overall"] = 0.5
    fig = curve_figure(records, [("reward", ["reward/mean"]), ("success rate", ["success/rate", "eval/overall"]),
                                 ("nothing", ["missing"])], title="t")
    reward, success = fig.axes  # the panel without data is left out
    assert (reward.get_ylabel(), success.get_ylabel(), reward.get_xlabel()) == ("reward", "success rate", "step")
    assert all(g.get_visible() for g in reward.get_ygridlines())
    for ax in (reward, success):
        ticks = ax.get_yticks()
        step = ticks[1] - ticks[0]
        mantissa = round(step / 10 ** math.floor(math.log10(step)), 6)
        assert mantissa in (1, 2, 2.5, 5) and all(abs(t / step - round(t / step)) < 1e-6 for t in ticks), ticks
    raw, trend = reward.get_lines()
    assert raw.get_alpha() < 0.5 and trend.get_alpha() is None  # the raw series faded, the trend in full colour
    assert trend.get_label() == "reward/mean (mean of last 6 points)"
    assert list(trend.get_ydata()) == trailing_mean([r["reward/mean"] for r in records], 6)
    assert [ln.get_label() for ln in success.get_lines()][-1] == "eval/overall"  # one point: a marker
    out = tmp_path / "curve.png"
    assert plot_curves(records, ["reward/mean"], out, panels=[("reward", ["reward/mean"])])
    assert Image.open(out).size[0] >= 600
    assert not plot_curves(records, ["missing"], tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def test_progress_line_and_run_summary(tmp_path):
    import io

    line = progress_line(5, 100, {"reward/mean": 0.41234, "success/rate": 0.375, "loss": float("nan")}, RL_KEYS, 10.0, 5)
    assert line == "step 5/100 reward 0.4123 success 0.375 loss nan | 2.00 s/step, ETA 3m10s"
    assert not show_bar(True, io.StringIO())  # a log file: plain lines instead of a bar
    (tmp_path / "checkpoints" / "step_0000004").mkdir(parents=True)
    (tmp_path / "metrics.jsonl").write_text("")
    records = [{"step": i, "reward/mean": float(i)} for i in range(1, 9)]
    text = run_summary(records, RL_KEYS, 125.0, 8, tmp_path, window=3)
    assert "8 steps in 2m05s" in text and "reward     first 3:        2   last 3:        7   change +5" in text
    assert "success" not in text  # no values: no row
    assert f"{tmp_path / 'checkpoints' / 'step_0000004'}/" in text and str(tmp_path / "metrics.jsonl") in text


def test_progress_lines_show_the_time_budget_and_evaluation_progress():
    from vlrl.evaluate import eval_line

    # 2 s/step and 95 steps left = 3m10s, but only 60 s of trainer.max_minutes are left: the budget ends the run
    line = progress_line(5, 100, {}, RL_KEYS, 10.0, 5, budget_left_s=60.0)
    assert line == "step 5/100 | 2.00 s/step, ETA 1m00s (time budget)"
    assert progress_line(5, 100, {}, RL_KEYS, 10.0, 5, budget_left_s=600.0).endswith("ETA 3m10s")
    assert eval_line(40, 200, "eval", 300.0) == "[vlrl eval] 40/200 eval examples, 5m00s, ETA 20m00s"
