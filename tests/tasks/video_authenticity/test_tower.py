import json
from pathlib import Path

import numpy as np
import pytest

from tasks.video_authenticity.manifest import Record
from tasks.video_authenticity.tower import by_kinds, main, scene_of

from .conftest import write_flicker_set


def test_by_kinds_keeps_both_clips_of_each_matching_scene():
    recs = [Record(Path("clips/train/0_real.mp4"), "real"), Record(Path("clips/train/0_fake.mp4"), "fake", "flicker"),
            Record(Path("clips/train/1_real.mp4"), "real"), Record(Path("clips/train/1_fake.mp4"), "fake", "morph"),
            Record(Path("clips/train/12_real.mp4"), "real"), Record(Path("clips/train/12_fake.mp4"), "fake", "flicker")]
    assert scene_of(recs[4].video) == "12"
    kept = by_kinds(recs, ["flicker"])
    assert [[r.label for r in rs] for rs in kept] == [["real", "fake"], ["real", "fake"]]
    assert [scene_of(rs[0].video) for rs in kept] == ["0", "12"]
    assert len(by_kinds(recs, ["all"])) == 3 and by_kinds(recs, ["ghosting"]) == []


@pytest.mark.slow
def test_tower_learns_flicker_and_leaves_the_language_model_alone(tmp_path):
    import torch
    from safetensors.torch import load_file

    write_flicker_set(tmp_path, {"train": 12}, np.random.default_rng(2))
    out = tmp_path / "model"
    summary = main(["--data", str(tmp_path), "--kinds", "flicker", "--out", str(out), "--steps", "100",
                    "--batch", "16", "--val-share", "0.34"])
    assert (summary["fit_clips"], summary["val_clips"]) == (16, 8)
    assert summary["final"]["val_acc"] >= 0.75  # chance is 0.5 on these 4 held-back scenes
    start = load_file("assets/tiny-qwen2.5-vl/model.safetensors")
    after = load_file(str(out / "model.safetensors"))
    assert set(after) == set(start)  # the throwaway head is not saved
    visual = [k for k in start if ".visual." in k or k.startswith("visual.")]
    assert visual and any(not torch.equal(start[k], after[k]) for k in visual)
    assert all(torch.equal(start[k], after[k]) for k in start if k not in visual)
    assert json.loads((out / "tower_summary.json").read_text())["kinds"] == ["flicker"]
