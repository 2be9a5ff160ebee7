import json

import numpy as np
import pytest

from tasks.video_authenticity.probe import FEATURES, main, temporal_features

from .conftest import flicker, smooth, write_flicker_set


def test_features_see_flicker_and_ignore_a_still_clip():
    rng = np.random.default_rng(0)
    still = np.full((8, 56, 56, 3), 90, np.uint8)
    f_still, f_smooth, f_flicker = (temporal_features(x) for x in (still, smooth(rng, 8, 56), flicker(rng, 8, 56)))
    assert f_still.shape == (len(FEATURES),)
    jump = FEATURES.index("max_brightness_jump")
    assert f_still[:8].max() == 0.0  # nothing changes: every change statistic is zero
    assert f_flicker[jump] > 0.15 > f_smooth[jump]  # 60/255 per flicker step vs a small moving square


@pytest.mark.slow
def test_probe_separates_flicker_and_counts_unreadable_clips(tmp_path):
    write_flicker_set(tmp_path, {"train": 12, "held_out": 8}, np.random.default_rng(1))
    with open(tmp_path / "held_out.jsonl", "a") as f:
        f.write(json.dumps({"video": "clips/missing.mp4", "label": "real"}) + "\n")
    out = tmp_path / "probe.json"
    assert main(["--data", str(tmp_path), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) >= {"overall", "count", "skipped", "breakdown"}
    assert report["count"] == 16 and report["skipped"]["count"] == 1
    assert report["overall"] == 1.0
    assert report["breakdown"]["generator:flicker"]["count"] == 8
