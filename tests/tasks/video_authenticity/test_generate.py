"""The built-in clip generator: deterministic scenes, every artifact kind visible and graded, disjoint
splits, decord-readable files and manifests the reader accepts, cached clips reused."""

import json

import numpy as np
import pytest

from tasks.video_authenticity.artifacts import KINDS, LEVELS, boiling, fake_clip, flicker, ghosting
from tasks.video_authenticity.generate import ClipSettings, artifact_of, build, scene_seed
from tasks.video_authenticity.manifest import read_manifest
from tasks.video_authenticity.scenes import Physics, sample_scene, simulate

SMALL = dict(frames=8, fps=8.0, size=64)


def test_scene_is_deterministic_and_bodies_move():
    a, b = simulate(sample_scene(3), **SMALL), simulate(sample_scene(3), **SMALL)
    assert np.array_equal(a.frames, b.frames)
    assert not np.array_equal(a.frames[0], a.frames[-1])  # things fall and roll
    assert sample_scene(3) != sample_scene(4)


def test_physics_violations_change_the_motion():
    scene = sample_scene(5)
    real = simulate(scene, **SMALL)
    up = simulate(scene, physics=Physics("antigravity", 2, 2.0), **SMALL)
    # Reversed gravity: bodies end higher than in the real clip; before the edit, the same frames.
    assert np.array_equal(real.frames[:2], up.frames[:2])
    assert up.positions[-1, :, 2].mean() > real.positions[-1, :, 2].mean() + 0.1
    sink = simulate(scene, physics=Physics("interpenetrate", 1, body=0), **SMALL)
    assert sink.positions[-1, 0, 2] < 0  # through the floor


def test_every_kind_alters_the_real_clip():
    scene = sample_scene(8)
    real = simulate(scene, with_masks=True, **SMALL)
    for kind in KINDS:
        fake, _ = fake_clip(scene, kind, 5, np.random.default_rng(0), real=real, **SMALL)
        assert fake.shape == real.frames.shape and fake.dtype == np.uint8
        assert np.abs(fake.astype(int) - real.frames).mean() > 0.5, kind


def test_post_processing_artifacts_grow_with_level():
    rng = np.random.default_rng(0)
    frames = np.full((8, 16, 16, 3), 120, np.uint8)
    frames[::2] = 60  # alternating frames: ghosting blends them
    masks = np.ones((8, 1, 16, 16), bool)

    def change(f):
        return [np.abs(f(level).astype(int) - frames).mean() for level in LEVELS]

    for fn in (lambda lv: flicker(frames, lv, np.random.default_rng(1)), lambda lv: ghosting(frames, lv),
               lambda lv: boiling(frames, masks, lv, np.random.default_rng(1))):
        c = change(fn)
        assert all(x < y for x, y in zip(c, c[1:])), c
    # Ghosting at level 1: frame t is 0.89 f_t + 0.11 f_{t-1}.
    g = ghosting(frames, 1)
    assert g[0, 0, 0, 0] == 60 and g[1, 0, 0, 0] == round(0.89 * 120 + 0.11 * 60)
    assert flicker(frames, 3, rng).shape == frames.shape


def test_splits_are_disjoint_and_artifacts_balanced():
    train = {scene_seed("train", i) for i in range(2000)}
    held = {scene_seed("held_out", i) for i in range(2000)}
    assert not train & held
    pairs = [artifact_of(s) for s in range(30)]
    assert sorted(pairs) == sorted((k, lv) for k in KINDS for lv in LEVELS)
    with pytest.raises(ValueError, match="split"):
        scene_seed("test", 0)


def test_build_writes_readable_clips_and_reuses_the_cache(tmp_path):
    from tasks.video_authenticity.decode import ClipLoader, DecodeSpec

    settings = ClipSettings(frames=8, fps=8.0, size=64)
    path = build(tmp_path, "held_out", 2, settings)
    records = read_manifest(path)
    assert [r.label for r in records] == ["real", "fake", "real", "fake"]
    assert records[1].generator == artifact_of(scene_seed("held_out", 0))[0]
    with ClipLoader(DecodeSpec(fps=4.0, min_frames=4, max_frames=8, max_pixels=56 * 56, min_pixels=28 * 28)) as loader:
        clip = loader.load(records[0].video)
        assert clip.frames.shape == (4, 56, 56, 3), getattr(clip, "detail", clip)
    stamp = records[0].video.stat().st_mtime_ns
    build(tmp_path, "held_out", 3, settings)  # one more scene: the first ones are not re-rendered
    assert records[0].video.stat().st_mtime_ns == stamp
    assert len(read_manifest(path)) == 6
    with pytest.raises(ValueError, match="meta.json"):
        build(tmp_path, "train", 1, ClipSettings(frames=10, fps=8.0, size=64))
    assert json.loads((tmp_path / "meta.json").read_text())["frames"] == 8
