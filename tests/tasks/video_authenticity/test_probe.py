import json

import numpy as np
import pytest

from tasks.video_authenticity.generate import write_mp4
from tasks.video_authenticity.probe import FEATURES, main, temporal_features


def _smooth(rng, t=16, size=64):
    """A bright square sliding one pixel per frame over a constant grey: smooth motion, no flicker."""
    frames = np.full((t, size, size, 3), 100, np.uint8)
    x0 = int(rng.integers(0, size - 24))
    for i in range(t):
        frames[i, 20:36, x0 + i:x0 + i + 8] = 220
    return frames


def _flicker(rng, t=16, size=64):
    frames = _smooth(rng, t, size).astype(np.int16)
    frames[1::2] += 60  # every other frame brighter
    return np.clip(frames, 0, 255).astype(np.uint8)


def test_features_see_flicker_and_ignore_a_still_clip():
    rng = np.random.default_rng(0)
    still = np.full((8, 56, 56, 3), 90, np.uint8)
    f_still, f_smooth, f_flicker = (temporal_features(x) for x in (still, _smooth(rng, 8, 56), _flicker(rng, 8, 56)))
    assert f_still.shape == (len(FEATURES),)
    jump = FEATURES.index("max_brightness_jump")
    assert f_still[:8].max() == 0.0  # nothing changes: every change statistic is zero
    assert f_flicker[jump] > 0.15 > f_smooth[jump]  # 60/255 per flicker step vs a small moving square


@pytest.mark.slow
def test_probe_separates_flicker_and_counts_unreadable_clips(tmp_path):
    rng = np.random.default_rng(1)
    for split, n in (("train", 12), ("held_out", 8)):
        lines = []
        for i in range(n):
            for label, make in (("real", _smooth), ("fake", _flicker)):
                name = f"clips/{split}/{i}_{label}.mp4"
                write_mp4(tmp_path / name, make(rng), fps=8.0)
                rec = {"video": name, "label": label}
                if label == "fake":
                    rec.update(generator="flicker", level=3)
                lines.append(json.dumps(rec))
        if split == "held_out":
            lines.append(json.dumps({"video": "clips/missing.mp4", "label": "real"}))
        (tmp_path / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "probe.json"
    assert main(["--data", str(tmp_path), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert set(report) >= {"overall", "count", "skipped", "breakdown"}
    assert report["count"] == 16 and report["skipped"]["count"] == 1
    assert report["overall"] == 1.0
    assert report["breakdown"]["generator:flicker"]["count"] == 8
