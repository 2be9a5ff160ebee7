"""Local-edit pairs: pixels outside the recorded box are identical, inside they are what the edit says."""

import json

import numpy as np
import pytest
from PIL import Image

from tasks.vision_zero.pairs import diff_mask, mask_box
from tasks.vision_zero.pairs.edits import EDIT_KINDS, MIN_CHANGED, edit_pair, folder_pair, image_files, load_image


def textured(seed=0, h=60, w=80) -> np.ndarray:
    """Noise on a gradient: no region is flat or symmetric, so every edit shows."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([xx * 3, yy * 4, (xx + yy) * 2], axis=-1)
    return np.clip(base + rng.integers(0, 60, (h, w, 3)), 0, 255).astype(np.uint8)


def _outside_identical(pair):
    x0, y0, x1, y1 = pair.record["box"]
    m = diff_mask(pair.original, pair.modified)
    m[y0:y1, x0:x1] = False
    assert not m.any(), "pixels changed outside the recorded box"


@pytest.mark.parametrize("kind", EDIT_KINDS)
def test_edit_is_where_the_record_says(kind):
    img = textured()
    for seed in range(5):
        pair = edit_pair(img, seed, kind)
        rec = pair.record
        json.dumps(rec)
        assert rec["kind"] == kind and rec["size"] == [80, 60]
        assert np.array_equal(pair.original, img)
        x0, y0, x1, y1 = rec["box"]
        assert 0 <= x0 < x1 <= 80 and 0 <= y0 < y1 <= 60
        _outside_identical(pair)
        box_diff = mask_box(diff_mask(pair.original, pair.modified))
        assert box_diff is not None
        assert box_diff[0] >= x0 and box_diff[1] >= y0 and box_diff[2] <= x1 and box_diff[3] <= y1
        inside, orig = pair.modified[y0:y1, x0:x1].astype(int), img[y0:y1, x0:x1].astype(int)
        changed = np.any(inside != orig, axis=-1).mean()
        assert changed == pytest.approx(rec["changed_fraction"]) and changed >= MIN_CHANGED
        p = rec["params"]
        if kind == "recolour":
            expected = np.round(0.4 * orig + 0.6 * np.array(p["colour"]))
            assert np.array_equal(inside, expected)
        elif kind == "remove":
            ring = np.zeros((60, 80), bool)
            ring[max(0, y0 - 2):y1 + 2, max(0, x0 - 2):x1 + 2] = True
            ring[y0:y1, x0:x1] = False
            assert p["fill"] == np.round(img[ring].mean(axis=0)).astype(int).tolist()
            assert (inside == np.array(p["fill"])).all()
        elif kind == "paste":
            sx0, sy0, sx1, sy1 = p["source"]
            assert not (sx0 < x1 and x0 < sx1 and sy0 < y1 and y0 < sy1), "source overlaps the box"
            assert np.array_equal(inside, img[sy0:sy1, sx0:sx1])
        else:
            flipped = orig[:, ::-1] if p["axis"] == "x" else orig[::-1, :]
            assert np.array_equal(inside, flipped)


def test_same_seed_same_pair_random_kind():
    img = textured(1)
    kinds = set()
    for seed in range(12):
        a, b = edit_pair(img, seed), edit_pair(img, seed)
        assert a.record == b.record and np.array_equal(a.modified, b.modified)
        kinds.add(a.record["kind"])
    assert kinds == set(EDIT_KINDS)
    assert edit_pair(img, 0).record != edit_pair(img, 1).record


def test_flat_image_cannot_show_a_remove_or_a_flip():
    flat = np.full((40, 40, 3), 128, np.uint8)
    for kind in ("remove", "flip", "paste"):
        with pytest.raises(ValueError, match="uniform"):
            edit_pair(flat, 0, kind)
    assert edit_pair(flat, 0, "recolour").record["changed_fraction"] == 1.0  # a tint shows anywhere


@pytest.mark.parametrize("kwargs", [{"kind": "blur"}, {"min_side": 0.4, "max_side": 0.3}, {"max_side": 0.6}])
def test_edit_pair_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        edit_pair(textured(), 0, **kwargs)


def test_pil_input():
    img = textured(2)
    a = edit_pair(Image.fromarray(img).convert("RGBA"), 3)
    assert np.array_equal(a.original, img) and a.record == edit_pair(img, 3).record


def test_folder_pair(tmp_path):
    imgs = {f"{n}.png": textured(n) for n in range(3)}
    (tmp_path / "sub").mkdir()
    for name, img in imgs.items():
        Image.fromarray(img).save(tmp_path / ("sub" if name == "2.png" else "") / name)
    (tmp_path / "notes.txt").write_text("not an image")
    assert [p.name for p in image_files(tmp_path)] == ["0.png", "1.png", "2.png"]
    seen = set()
    for seed in range(8):
        pair = folder_pair(tmp_path, seed)
        assert pair.record == folder_pair(tmp_path, seed).record
        name = pair.record["image"]
        assert np.array_equal(pair.original, np.asarray(Image.open(tmp_path / name)))
        _outside_identical(pair)
        seen.add(name)
    assert seen == {"0.png", "1.png", "sub/2.png"}


def test_folder_errors_and_downscale(tmp_path):
    with pytest.raises(ValueError, match="no image files"):
        image_files(tmp_path)
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="bad.png"):
        load_image(tmp_path / "bad.png")
    Image.fromarray(textured(0, 60, 120)).save(tmp_path / "big.png")
    assert load_image(tmp_path / "big.png", max_side=40).shape == (20, 40, 3)
