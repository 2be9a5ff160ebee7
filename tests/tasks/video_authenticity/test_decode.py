"""Decode-once clip loader (tasks/video_authenticity/decode.py): sampling, resizing, the cache, and
missing / zero-length / corrupt / truncated / too short / hanging / crashing clips reported with a reason."""

import importlib
import json
import time

import numpy as np
import pytest

from tasks.video_authenticity.decode import (ClipLoader, DecodeSpec, TooShort, Unreadable, frame_count,
                                             frame_indices, resized_size)
from tasks.video_authenticity.manifest import load_clips, read_manifest


@pytest.fixture(scope="module")
def loader():
    with ClipLoader(DecodeSpec(), timeout_s=60) as ld:  # one decoder process for the module's tests
        yield ld


# --------------------------------------------------------------------------------- pure sampling

def test_frame_count_matches_qwen_vl_utils():
    from qwen_vl_utils.vision_process import smart_nframes

    spec = DecodeSpec(fps=2.0, min_frames=4, max_frames=16)
    for total in (4, 5, 9, 12, 30, 61, 300, 1000):
        for source_fps in (6.0, 24.0, 29.97, 30.0):
            ours = frame_count(total, source_fps, spec)
            theirs = smart_nframes({"fps": 2.0, "min_frames": 4, "max_frames": 16}, total, source_fps)
            assert ours == theirs, (total, source_fps)


def test_frame_count_refuses_too_short_clips():
    spec = DecodeSpec(min_frames=4)
    with pytest.raises(TooShort):
        frame_count(3, 30.0, spec)  # qwen-vl-utils would give 2 frames here
    assert frame_count(4, 30.0, spec) == 4  # 0.13 s of video: min_frames wins over the duration


def test_frame_indices():
    assert frame_indices(12, 4) == [0, 4, 7, 11]
    assert frame_indices(10, 10) == list(range(10))


def test_resized_size_matches_qwen_vl_utils():
    from qwen_vl_utils.vision_process import smart_resize

    spec = DecodeSpec(max_pixels=128 * 28 * 28, min_pixels=4 * 28 * 28)
    for h, w in [(48, 64), (240, 320), (480, 854), (1080, 1920), (20, 30), (100, 2000), (28, 28), (720, 405)]:
        assert resized_size(h, w, spec) == smart_resize(h, w, 28, spec.min_pixels, spec.max_pixels), (h, w)
        rh, rw = resized_size(h, w, spec)
        assert rh % 28 == 0 and rw % 28 == 0 and rh * rw <= spec.max_pixels


@pytest.mark.parametrize("field,value", [("fps", 0), ("min_frames", 1), ("max_frames", 2), ("max_pixels", 100),
                                         ("min_pixels", 10)])
def test_spec_validation_names_the_field(field, value):
    with pytest.raises(ValueError, match=f"'video.{field}'"):
        DecodeSpec(**{field: value})


def test_loader_validation():
    with pytest.raises(ValueError, match="decode_timeout_s"):
        ClipLoader(timeout_s=0)


# --------------------------------------------------------------------------------- decoding

def test_decodes_samples_and_resizes(tmp_path, clip_writer, loader):
    path = clip_writer(tmp_path / "a.mp4", frames=12, height=48, width=64, fps=6)  # 2 s -> 4 frames at 2 fps
    clip = loader.load(path)
    assert not isinstance(clip, Unreadable), clip
    assert clip.frames.shape == (4, 56, 56, 3) and clip.frames.dtype == np.uint8  # 48x64 -> 56x56 (28-multiples)
    assert clip.fps == pytest.approx(2.0)
    assert clip.timestamps == pytest.approx((0.0, 4 / 6, 7 / 6, 11 / 6))  # frames 0, 4, 7, 11
    assert (clip.source_fps, clip.source_frames) == (pytest.approx(6.0), 12)
    red = clip.frames[:, 20:36, 20:36, 0].mean(axis=(1, 2))
    np.testing.assert_allclose(red, [0, 80, 140, 220], atol=10)  # the right frames, lossy codec
    assert not clip.frames.flags.writeable  # shared through the cache
    assert [im.size for im in clip.pil()] == [(56, 56)] * 4


def test_decodes_once_per_spec(tmp_path, clip_writer, loader):
    path = clip_writer(tmp_path / "b.mp4")
    decoded, hits = loader.decoded, loader.cache_hits
    first = loader.load(path)
    assert loader.load(str(path)) is first  # same frames for every stage
    assert loader.load(tmp_path / "." / "b.mp4") is first  # the key is the resolved path
    assert (loader.decoded, loader.cache_hits) == (decoded + 1, hits + 2)
    other = loader.load(path, DecodeSpec(max_frames=8, fps=6.0))  # another budget: decoded again
    assert other is not first and other.frames.shape[0] == 8
    assert loader.decoded == decoded + 2
    assert loader.stats()["decode_s"] > 0


def test_cache_drops_least_recently_used(tmp_path, clip_writer):
    a, b = clip_writer(tmp_path / "a.mp4"), clip_writer(tmp_path / "b.mp4")
    one_clip = 4 * 56 * 56 * 3
    with ClipLoader(cache_bytes=one_clip, timeout_s=60) as ld:
        first = ld.load(a)
        ld.load(b)  # evicts a
        assert ld.stats()["cached_bytes"] == one_clip
        again = ld.load(a)
        assert again is not first and ld.decoded == 3
        np.testing.assert_array_equal(again.frames, first.frames)  # decoding is deterministic


def test_unusable_clips_are_reported_not_raised(tmp_path, clip_writer, loader):
    good = clip_writer(tmp_path / "good.mp4", frames=24, height=64, width=96)
    data = good.read_bytes()
    (tmp_path / "truncated.mp4").write_bytes(data[: len(data) // 2])
    (tmp_path / "corrupt.mp4").write_bytes(np.random.default_rng(0).integers(0, 256, 4000, dtype=np.uint8).tobytes())
    (tmp_path / "empty.mp4").write_bytes(b"")
    (tmp_path / "folder.mp4").mkdir()
    clip_writer(tmp_path / "short.mp4", frames=3)
    expected = {"missing.mp4": "missing", "empty.mp4": "empty", "corrupt.mp4": "unreadable",
                "truncated.mp4": "unreadable", "folder.mp4": "unreadable", "short.mp4": "too_short"}
    before = loader.skipped()
    for name, reason in expected.items():
        out = loader.load(tmp_path / name)
        assert isinstance(out, Unreadable) and out.reason == reason, (name, out)
        assert out.detail
        assert loader.load(tmp_path / name) is out  # failures are cached: one attempt per file
    after = loader.skipped()
    assert after["count"] - before["count"] == 6
    assert after["reasons"]["unreadable"] - before["reasons"].get("unreadable", 0) == 3
    assert not isinstance(loader.load(good), Unreadable)  # the decoder still works afterwards


def test_load_clips_skips_and_counts(tmp_path, clip_writer, loader):
    clip_writer(tmp_path / "clips" / "r.mp4")
    clip_writer(tmp_path / "clips" / "f.mp4")
    (tmp_path / "clips" / "z.mp4").write_bytes(b"")
    lines = [{"video": "clips/r.mp4", "label": "real"}, {"video": "clips/f.mp4", "label": "fake", "level": 2},
             {"video": "clips/z.mp4", "label": "fake"}, {"video": "clips/gone.mp4", "label": "real"}]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    usable, skipped, summary = load_clips(read_manifest(manifest), loader)
    assert [r.video.name for r, _ in usable] == ["r.mp4", "f.mp4"]
    assert [(r.video.name, u.reason) for r, u in skipped] == [("z.mp4", "empty"), ("gone.mp4", "missing")]
    assert summary == {"count": 2, "reasons": {"empty": 1, "missing": 1}}


# ----------------------------------------------------------------------- hangs and crashes

DECODERS = '''
import os, time
from tasks.video_authenticity.decode import decode_file

def decode(path, spec, threads):
    name = os.path.basename(path)
    if name.startswith("hang"):
        time.sleep(600)
    if name.startswith("crash"):
        os._exit(3)  # what a native segfault in the decoder looks like from the parent
    return decode_file(path, spec, threads)
'''


@pytest.mark.slow
def test_hanging_and_crashing_decodes_are_bounded(tmp_path, clip_writer, monkeypatch):
    (tmp_path / "vlrl_test_decoders.py").write_text(DECODERS)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned decoder process inherits sys.path
    decoders = importlib.import_module("vlrl_test_decoders")
    good = clip_writer(tmp_path / "good.mp4")
    (tmp_path / "hang.mp4").write_bytes(b"x" * 100)
    (tmp_path / "crash.mp4").write_bytes(b"x" * 100)
    with ClipLoader(timeout_s=3, decode_fn=decoders.decode) as ld:
        assert not isinstance(ld.load(good, DecodeSpec(max_frames=6)), Unreadable)  # decoder started and warm
        t0 = time.perf_counter()
        out = ld.load(tmp_path / "hang.mp4")
        assert out.reason == "timeout" and time.perf_counter() - t0 < 3 + 10
        assert not isinstance(ld.load(good), Unreadable)  # a fresh decoder took over
        out = ld.load(tmp_path / "crash.mp4")
        assert out.reason == "decoder_crashed" and "exit code 3" in out.detail
        assert not isinstance(ld.load(good, DecodeSpec(max_frames=8)), Unreadable)
        assert ld.skipped() == {"count": 2, "reasons": {"decoder_crashed": 1, "timeout": 1}}
