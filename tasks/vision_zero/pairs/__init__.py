"""Image pairs for the spy game: an original image, a modified one and a record of the difference.

Generators (each deterministic per seed; imported on demand because they load matplotlib or MuJoCo):

* `tasks.vision_zero.pairs.charts.chart_pair(seed)`: bar / line / pie charts from random data; one or
  two values or labels changed.
* `tasks.vision_zero.pairs.edits.edit_pair(image, seed)` and `folder_pair(folder, seed)`: a local edit
  (recolour, remove, paste, flip) of any image.
* `tasks.vision_zero.pairs.clevr.clevr_pair(seed)`: CLEVR-like 3-D scenes rendered offscreen with
  MuJoCo; k objects replaced in place.

Conventions shared by every generator: images are uint8 arrays [H, W, 3] (RGB); a pixel box is
[x0, y0, x1, y1] with the origin at the top-left corner and x1, y1 exclusive; `record` holds only
JSON types (str, int, float, bool, list, dict, None) so it can be written next to the images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Pair:
    """One game's images: civilians see `original`, the spy sees `modified`; `record` says what differs."""

    original: np.ndarray  # [H, W, 3] uint8
    modified: np.ndarray  # [H, W, 3] uint8, same shape
    record: dict

    def __post_init__(self):
        for name in ("original", "modified"):
            a = getattr(self, name)
            if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
                raise ValueError(f"{name} must be a uint8 [H, W, 3] array, got {a.dtype} {a.shape}")
            a.setflags(write=False)  # a pair is shared by every player of a game: nobody may edit it
        if self.original.shape != self.modified.shape:
            raise ValueError(f"image shapes differ: {self.original.shape} vs {self.modified.shape}")


def diff_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[H, W] bool: pixels where the two [H, W, 3] images differ in any channel."""
    return np.any(a != b, axis=-1)


def mask_box(mask: np.ndarray) -> list[int] | None:
    """The smallest box [x0, y0, x1, y1] holding every True pixel of an [H, W] mask; None when none is."""
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


def box_mask(shape: tuple[int, int], boxes: list[list[int]], margin: int = 0) -> np.ndarray:
    """[H, W] bool: True inside any of `boxes` grown by `margin` pixels (clipped to the image)."""
    h, w = shape
    mask = np.zeros((h, w), bool)
    for x0, y0, x1, y1 in boxes:
        mask[max(0, y0 - margin):min(h, y1 + margin), max(0, x0 - margin):min(w, x1 + margin)] = True
    return mask
