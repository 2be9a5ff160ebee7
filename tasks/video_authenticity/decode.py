"""Decode-once clip loading: frames sampled and resized to a budget, cached, with a decode timeout.

`ClipLoader.load(path)` returns a `Clip` (frames [T, H, W, 3] uint8, sampled fps, timestamps) or an
`Unreadable` (path, reason, detail): a missing, zero-length, corrupt, too short or hanging file is a
counted reason, never an exception and never a hang. Every stage of a run (length filtering,
rollout, the training forward) asks the same loader, so a clip is decoded once per
(path, fps, min/max frames, min/max pixels): failures are cached too, so a bad file costs one attempt.

Decoding runs in one child process (spawned, not forked: the parent may hold CUDA and threads) with
decord. The parent waits at most `timeout_s` per clip; a decoder that does not answer in time is
killed and restarted, and one that dies (a native crash on a corrupt file) is restarted, its clip
counted as "decoder_crashed".

Sampling follows qwen-vl-utils (`smart_nframes` with `fps`, `smart_resize`), so frames match what
its decord path would feed a Qwen-VL processor, with one difference: a clip that cannot give
`min_frames` frames is refused ("too_short") instead of silently giving fewer.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import stat
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

REASONS = ("missing", "empty", "unreadable", "too_short", "timeout", "decoder_crashed")
FRAME_FACTOR = 2  # frames come in pairs (Qwen-VL's temporal patch size)


@dataclass(frozen=True)
class DecodeSpec:
    """What to sample from a clip. Defaults: VidGuard-R1's budget (2 fps, 4-16 frames, <= 128*28*28 pixels)."""

    fps: float = 2.0  # frames sampled per second of video
    min_frames: int = 4  # fewer than this (after rounding down to pairs) -> "too_short"
    max_frames: int = 16  # at most this many frames per clip
    max_pixels: int = 128 * 28 * 28  # per frame, after resizing
    min_pixels: int = 4 * 28 * 28  # per frame: smaller frames are scaled up
    factor: int = 28  # sides are multiples of this (patch size * spatial merge: 28 for Qwen2.5-VL)

    def __post_init__(self):
        checks = {"fps": self.fps > 0, "min_frames": self.min_frames >= FRAME_FACTOR,
                  "max_frames": self.max_frames >= max(self.min_frames, FRAME_FACTOR),
                  "factor": self.factor >= 1, "min_pixels": self.min_pixels >= self.factor ** 2,
                  "max_pixels": self.max_pixels >= self.min_pixels}
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"invalid config value for 'video.{name}': {getattr(self, name)!r} "
                                 "(fps > 0, 2 <= min_frames <= max_frames, factor^2 <= min_pixels <= max_pixels)")


@dataclass(frozen=True, eq=False)
class Clip:
    """A decoded clip. `frames` is read-only: it is shared by every stage through the cache."""

    path: str
    frames: np.ndarray  # [T, H, W, 3] uint8, H and W multiples of spec.factor
    fps: float  # sampled frames per second: T / duration (Qwen's second_per_grid_ts comes from it)
    timestamps: tuple[float, ...]  # [T] seconds into the source of each frame
    source_fps: float
    source_frames: int
    decode_s: float  # wall time of the decode, process round trip included

    def pil(self) -> list:
        """The frames as PIL images (what vlrl.episode.Observation.videos holds)."""
        from PIL import Image

        return [Image.fromarray(f) for f in self.frames]


@dataclass(frozen=True)
class Unreadable:
    """A clip that could not be used: `reason` is one of REASONS, `detail` says what happened."""

    path: str
    reason: str
    detail: str


class DecodeError(Exception):
    reason = "unreadable"


class TooShort(DecodeError):
    reason = "too_short"


# ------------------------------------------------------------------------------------ pure sampling

def _floor_to(x: float, f: int) -> int:
    return int(math.floor(x / f) * f)


def _ceil_to(x: float, f: int) -> int:
    return int(math.ceil(x / f) * f)


def frame_count(total: int, source_fps: float, spec: DecodeSpec) -> int:
    """Frames to sample from a clip of `total` frames at `source_fps` (qwen-vl-utils' smart_nframes):
    duration * spec.fps, clamped to [min_frames, max_frames] and to `total`, rounded down to pairs.
    Raises TooShort when that is fewer than spec.min_frames."""
    lo, hi = _ceil_to(spec.min_frames, FRAME_FACTOR), _floor_to(spec.max_frames, FRAME_FACTOR)
    n = _floor_to(min(max(total / source_fps * spec.fps, lo), hi, total), FRAME_FACTOR)
    if n < max(spec.min_frames, FRAME_FACTOR):
        raise TooShort(f"{total} frames give {n} samples, fewer than min_frames={spec.min_frames}")
    return n


def frame_indices(total: int, n: int) -> list[int]:
    """[n] evenly spaced frame indices over 0..total-1, first and last included (round half to even)."""
    return np.rint(np.linspace(0, total - 1, n)).astype(int).tolist()


def resized_size(height: int, width: int, spec: DecodeSpec) -> tuple[int, int]:
    """(H, W) multiples of spec.factor, aspect ratio kept, pixels within [min_pixels, max_pixels]
    (qwen-vl-utils' smart_resize)."""
    f = spec.factor
    if max(height, width) / min(height, width) > 200:
        raise DecodeError(f"aspect ratio {height}x{width} is over 200")
    h, w = max(f, round(height / f) * f), max(f, round(width / f) * f)
    if h * w > spec.max_pixels:
        beta = math.sqrt(height * width / spec.max_pixels)
        h, w = max(f, _floor_to(height / beta, f)), max(f, _floor_to(width / beta, f))
    elif h * w < spec.min_pixels:
        beta = math.sqrt(spec.min_pixels / (height * width))
        h, w = _ceil_to(height * beta, f), _ceil_to(width * beta, f)
    return h, w


def decode_file(path: str, spec: DecodeSpec, threads: int = 1) -> dict:
    """Decode `path` with decord: {"frames" [T, H, W, 3] uint8, "fps", "timestamps", "source_fps",
    "source_frames"}. Raises DecodeError (or whatever decord raises) when the file cannot be used."""
    import decord
    from PIL import Image

    reader = decord.VideoReader(path, num_threads=threads)
    total, source_fps = len(reader), float(reader.get_avg_fps())
    if total <= 0:
        raise TooShort("no frames")
    if not math.isfinite(source_fps) or source_fps <= 0:
        raise DecodeError(f"no usable frame rate ({source_fps})")
    n = frame_count(total, source_fps, spec)
    idx = frame_indices(total, n)
    raw = reader.get_batch(idx).asnumpy()  # [T, h, w, 3] uint8
    h, w = resized_size(raw.shape[1], raw.shape[2], spec)
    if (h, w) != raw.shape[1:3]:
        raw = np.stack([np.asarray(Image.fromarray(f).resize((w, h), Image.BICUBIC)) for f in raw])
    return {"frames": np.ascontiguousarray(raw, dtype=np.uint8), "fps": n / total * source_fps,
            "timestamps": tuple(i / source_fps for i in idx), "source_fps": source_fps, "source_frames": total}


def precheck(path: str) -> Unreadable | None:
    """The failures visible without decoding: missing, not a regular file, zero length, no read access."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return Unreadable(path, "missing", "no such file")
    except OSError as e:
        return Unreadable(path, "unreadable", f"stat failed: {e}")
    if not stat.S_ISREG(st.st_mode):
        return Unreadable(path, "unreadable", "not a regular file")
    if st.st_size == 0:
        return Unreadable(path, "empty", "zero-length file")
    if not os.access(path, os.R_OK):
        return Unreadable(path, "unreadable", "no read permission")
    return None


# ------------------------------------------------------------------------------- the decoder process

def _serve(conn, decode_fn: Callable, threads: int) -> None:
    """Child loop: (path, spec) in, ("ok", result) or (reason, detail) out; None ends it."""
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        path, spec = msg
        try:
            conn.send(("ok", decode_fn(path, spec, threads)))
        except Exception as e:  # any decoder failure is the clip's, reported with its reason
            conn.send((getattr(e, "reason", "unreadable"), f"{type(e).__name__}: {e}"[:500]))


class _Decoder:
    """One spawned decoder process, restarted after a timeout or a crash."""

    def __init__(self, decode_fn: Callable, threads: int, start_timeout_s: float):
        self.decode_fn, self.threads, self.start_timeout_s = decode_fn, threads, start_timeout_s
        self.proc = self.conn = None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, self.decode_fn, self.threads), daemon=True,
                                name="vlrl-video-decoder")
        self.proc.start()
        child.close()
        self.conn = parent
        if not parent.poll(self.start_timeout_s):
            self.stop()
            raise RuntimeError(f"the video decoder process did not start within {self.start_timeout_s}s")
        parent.recv()

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.is_alive():
                self.conn.send(None)
                self.proc.join(2)
        except OSError:
            pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()
        self.proc = self.conn = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join(5)
            self.conn.close()
            self.proc = self.conn = None

    def decode(self, path: str, spec: DecodeSpec, timeout_s: float) -> tuple[str, object]:
        """("ok", result dict) or (reason, detail)."""
        if self.proc is None or not self.proc.is_alive():
            if self.proc is not None:
                self.kill()
            self._start()
        self.conn.send((path, spec))
        if not self.conn.poll(timeout_s):
            self.kill()
            return "timeout", f"no answer from the decoder within {timeout_s}s"
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self.proc.join(5)  # EOF can arrive before the dead child is reaped: wait for its exit code
            code = self.proc.exitcode
            self.kill()
            return "decoder_crashed", f"the decoder process died (exit code {code})"


# ------------------------------------------------------------------------------------------ loader

class ClipLoader:
    """Decodes each clip once per DecodeSpec and hands the same frames to every caller.

    Args: spec: the default sampling budget; timeout_s: the most one clip's decode may take;
    cache_bytes: decoded frames kept (least recently used dropped first; failures always kept);
    threads: decord threads in the decoder process; decode_fn(path, spec, threads) -> dict: the decoder
    (a module-level function: it is sent to the child process by name); start_timeout_s: the most the
    decoder process may take to start (its imports), not counted in a clip's timeout.
    Thread-safe; `close()` (or `with`) ends the decoder process.
    """

    def __init__(self, spec: DecodeSpec | None = None, timeout_s: float = 30.0, cache_bytes: int = 2 << 30,
                 threads: int = 1, decode_fn: Callable = decode_file, start_timeout_s: float = 120.0):
        if timeout_s <= 0:
            raise ValueError(f"invalid config value for 'video.decode_timeout_s': {timeout_s!r} (must be > 0)")
        if cache_bytes < 0:
            raise ValueError(f"invalid config value for 'video.cache_bytes': {cache_bytes!r} (must be >= 0)")
        self.spec, self.timeout_s, self.cache_bytes = spec or DecodeSpec(), float(timeout_s), int(cache_bytes)
        self._decoder = _Decoder(decode_fn, threads, start_timeout_s)
        self._clips: OrderedDict[tuple, Clip] = OrderedDict()
        self._failed: dict[tuple, Unreadable] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.decoded = self.cache_hits = 0
        self.decode_s = 0.0

    def load(self, path: str | os.PathLike, spec: DecodeSpec | None = None) -> Clip | Unreadable:
        """The clip at `path` sampled by `spec` (default: the loader's), from the cache when it was loaded before."""
        spec = spec or self.spec
        key = (str(Path(path).resolve()), spec)
        with self._lock:
            if key in self._clips:
                self._clips.move_to_end(key)
                self.cache_hits += 1
                return self._clips[key]
            if key in self._failed:
                self.cache_hits += 1
                return self._failed[key]
            out = self._decode(key[0], spec)
            if isinstance(out, Unreadable):
                self._failed[key] = out
            else:
                self._remember(key, out)
            return out

    def _decode(self, path: str, spec: DecodeSpec) -> Clip | Unreadable:
        bad = precheck(path)
        if bad is not None:
            return bad
        t0 = time.perf_counter()
        status, payload = self._decoder.decode(path, spec, self.timeout_s)
        dt = time.perf_counter() - t0
        self.decode_s += dt
        if status != "ok":
            return Unreadable(path, status if status in REASONS else "unreadable", str(payload))
        self.decoded += 1
        frames = payload["frames"]
        frames.setflags(write=False)
        return Clip(path, frames, float(payload["fps"]), tuple(payload["timestamps"]),
                    float(payload["source_fps"]), int(payload["source_frames"]), dt)

    def _remember(self, key: tuple, clip: Clip) -> None:
        self._clips[key] = clip
        self._bytes += clip.frames.nbytes
        while self._bytes > self.cache_bytes and self._clips:
            _, old = self._clips.popitem(last=False)
            self._bytes -= old.frames.nbytes

    def skipped(self) -> dict:
        """{"count": n, "reasons": {reason: n}} over the distinct (clip, spec) pairs that could not be
        loaded: the record vlrl.task.merge_skipped sums into reports."""
        reasons: dict[str, int] = {}
        for bad in self._failed.values():
            reasons[bad.reason] = reasons.get(bad.reason, 0) + 1
        return {"count": len(self._failed), "reasons": dict(sorted(reasons.items()))}

    def stats(self) -> dict:
        """Decode counters for metrics: clips decoded, cache hits, total decode seconds, cached bytes, skipped."""
        return {"decoded": self.decoded, "cache_hits": self.cache_hits, "decode_s": self.decode_s,
                "cached_bytes": self._bytes, "skipped": self.skipped()}

    def close(self) -> None:
        with self._lock:
            self._decoder.stop()

    def __enter__(self) -> ClipLoader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self._decoder.stop()
        except Exception:  # interpreter shutdown: the daemon process ends with us anyway
            pass
