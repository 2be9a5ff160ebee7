"""Tiny clips written with PyAV for the video authenticity tests."""

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
