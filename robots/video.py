"""Write rollout frames to MP4 with PyAV (H.264)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np


def write_mp4(path: str | Path, frames: Sequence[np.ndarray], fps: int = 20) -> Path:
    """Encode uint8 [H, W, 3] frames; odd sizes are padded to even (H.264 needs even dimensions)."""
    import av  # noqa: PLC0415  (optional: the video extra)

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    h, w = frames[0].shape[:2]
    H, W = h + h % 2, w + w % 2
    with av.open(str(path), mode="w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = W, H, "yuv420p"
        for f in frames:
            f = np.pad(np.asarray(f, dtype=np.uint8), ((0, H - h), (0, W - w), (0, 0)))
            for packet in stream.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path
