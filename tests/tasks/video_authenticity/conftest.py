"""Tiny clips written with PyAV for the video authenticity tests."""

import json
from pathlib import Path

import numpy as np
import pytest


def write_clip(path: Path, frames: int = 12, height: int = 48, width: int = 64, fps: int = 6) -> Path:
    """An MPEG-4 clip whose frame i has red = 20 * i (mod 256), green 100, blue 0.

    Sizes: decord 0.6.0 misreads frames 16 or 48 pixels wide (a row-alignment bug), so tests use 64."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            rgb = np.zeros((height, width, 3), np.uint8)
            rgb[..., 0], rgb[..., 1] = (20 * i) % 256, 100
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.fixture
def clip_writer():
    return write_clip


def smooth(rng, t=16, size=64):
    """A bright square sliding one pixel per frame over a constant grey: smooth motion, no flicker."""
    frames = np.full((t, size, size, 3), 100, np.uint8)
    x0 = int(rng.integers(0, size - 24))
    for i in range(t):
        frames[i, 20:36, x0 + i:x0 + i + 8] = 220
    return frames


def flicker(rng, t=16, size=64):
    frames = smooth(rng, t, size).astype(np.int16)
    frames[1::2] += 60  # every other frame brighter
    return np.clip(frames, 0, 255).astype(np.uint8)


def write_flicker_set(root: Path, scenes: dict, rng) -> None:
    """A built-in-layout clip set under `root`: `{split: scenes}`, one smooth real and one flicker fake clip per
    scene, manifests `root/<split>.jsonl` with clips `clips/<split>/<scene>_<label>.mp4`."""
    from tasks.video_authenticity.generate import write_mp4

    for split, n in scenes.items():
        lines = []
        for i in range(n):
            for label, make in (("real", smooth), ("fake", flicker)):
                name = f"clips/{split}/{i}_{label}.mp4"
                write_mp4(root / name, make(rng), fps=8.0)
                rec = {"video": name, "label": label}
                if label == "fake":
                    rec.update(generator="flicker", level=3)
                lines.append(json.dumps(rec))
        (root / f"{split}.jsonl").write_text("\n".join(lines) + "\n")
