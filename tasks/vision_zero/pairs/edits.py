"""Pairs from any image: one local edit inside a random box; every pixel outside the box is untouched.

Edits (`EDIT_KINDS`):

* ``recolour``: the box is blended with a saturated colour, new = round((1 - alpha) * pixel + alpha *
  colour), alpha 0.6 (texture stays visible, the colour changes). params: colour [r, g, b], alpha.
* ``remove``: the box is filled with one colour, the mean of the ring of pixels just outside it (up to
  2 pixels wide, clipped to the image): a crude inpainting that erases what was there. params: fill.
* ``paste``: a patch of the same size from elsewhere in the image (not overlapping the box) is copied
  into the box. params: source [x0, y0, x1, y1].
* ``flip``: the box's content is mirrored left-right (``axis: "x"``) or top-bottom (``axis: "y"``).

An edit must change at least `MIN_CHANGED` of the box's pixels (a flip of a symmetric region or a
fill of a flat one changes nothing a player could see); otherwise a new box and new parameters are
drawn, up to `tries` times, then ValueError (the image is too uniform).

Record: {"generator": "edit", "seed", "kind", "box": [x0, y0, x1, y1], "params": {...},
"changed_fraction", "size": [W, H]}, plus "image" (path relative to the folder) from `folder_pair`.
"""

from __future__ import annotations

import colorsys
from pathlib import Path

import numpy as np

from tasks.vision_zero.pairs import Pair

EDIT_KINDS = ("recolour", "remove", "paste", "flip")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
MIN_CHANGED = 0.25  # fraction of the box's pixels an edit must change
ALPHA = 0.6  # recolour blend weight of the new colour
RING = 2  # width in pixels of the border ring whose mean fills a removed box


def _as_array(image) -> np.ndarray:
    """PIL image or uint8 array [H, W, 3] -> a uint8 RGB array [H, W, 3]."""
    if not isinstance(image, np.ndarray):
        image = np.asarray(image.convert("RGB"))
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be uint8 [H, W, 3] or a PIL image, got {image.dtype} {image.shape}")
    return image


def _random_box(rng: np.random.Generator, w: int, h: int, min_side: float, max_side: float) -> list[int]:
    bw = max(4, round(rng.uniform(min_side, max_side) * w))
    bh = max(4, round(rng.uniform(min_side, max_side) * h))
    x0, y0 = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
    return [x0, y0, x0 + bw, y0 + bh]


def _overlap(a: list[int], b: list[int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _apply(rng: np.random.Generator, img: np.ndarray, kind: str, box: list[int]) -> tuple[np.ndarray, dict] | None:
    """The edited image and the edit's params; None when this box cannot take this edit (no room to paste)."""
    x0, y0, x1, y1 = box
    h, w = img.shape[:2]
    out = img.copy()
    region = img[y0:y1, x0:x1]
    if kind == "recolour":
        colour = np.array([round(255 * c) for c in colorsys.hsv_to_rgb(rng.random(), 1.0, 1.0)], np.float64)
        out[y0:y1, x0:x1] = np.round((1 - ALPHA) * region + ALPHA * colour).astype(np.uint8)
        return out, {"colour": colour.astype(int).tolist(), "alpha": ALPHA}
    if kind == "remove":
        ring = np.zeros((h, w), bool)
        ring[max(0, y0 - RING):min(h, y1 + RING), max(0, x0 - RING):min(w, x1 + RING)] = True
        ring[y0:y1, x0:x1] = False
        if not ring.any():
            return None
        fill = np.round(img[ring].mean(axis=0)).astype(np.uint8)
        out[y0:y1, x0:x1] = fill
        return out, {"fill": fill.astype(int).tolist()}
    if kind == "paste":
        bw, bh = x1 - x0, y1 - y0
        for _ in range(20):
            sx, sy = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
            source = [sx, sy, sx + bw, sy + bh]
            if not _overlap(source, box):
                out[y0:y1, x0:x1] = img[sy:sy + bh, sx:sx + bw]
                return out, {"source": source}
        return None
    if kind == "flip":
        axis = "x" if rng.random() < 0.5 else "y"
        out[y0:y1, x0:x1] = region[:, ::-1] if axis == "x" else region[::-1, :]
        return out, {"axis": axis}
    raise ValueError(f"kind must be one of {EDIT_KINDS}, got {kind!r}")


def edit_pair(image, seed: int, kind: str | None = None, min_side: float = 0.15, max_side: float = 0.35,
              tries: int = 20) -> Pair:
    """`image` and a copy with one local edit, from `seed` alone (same seed and image, same pair).

    Args:
        image: uint8 [H, W, 3] array or PIL image (converted to RGB); at least 8 pixels a side.
        kind: one of `EDIT_KINDS`, random when None.
        min_side, max_side: the box's sides as fractions of the image's (0 < min_side <= max_side <= 0.5,
            so a paste source can fit beside the box).
        tries: boxes drawn before giving up on an image too uniform to show the edit.
    """
    img = _as_array(image)
    h, w = img.shape[:2]
    if min(h, w) < 8:
        raise ValueError(f"image too small for a local edit: {w}x{h}")
    if not 0 < min_side <= max_side <= 0.5:
        raise ValueError(f"need 0 < min_side <= max_side <= 0.5, got {min_side}, {max_side}")
    if kind is not None and kind not in EDIT_KINDS:
        raise ValueError(f"kind must be one of {EDIT_KINDS}, got {kind!r}")
    rng = np.random.default_rng(seed)
    kind = EDIT_KINDS[int(rng.integers(len(EDIT_KINDS)))] if kind is None else kind
    for _ in range(tries):
        box = _random_box(rng, w, h, min_side, max_side)
        done = _apply(rng, img, kind, box)
        if done is None:
            continue
        out, params = done
        x0, y0, x1, y1 = box
        changed = float(np.any(out[y0:y1, x0:x1] != img[y0:y1, x0:x1], axis=-1).mean())
        if changed >= MIN_CHANGED:
            record = {"generator": "edit", "seed": int(seed), "kind": kind, "box": box, "params": params,
                      "changed_fraction": changed, "size": [w, h]}
            return Pair(img.copy(), out, record)
    raise ValueError(f"no {kind!r} edit changed {MIN_CHANGED:.0%} of its box in {tries} tries: image too uniform")


def image_files(folder: str | Path) -> list[Path]:
    """Image files under `folder` (recursively, by suffix, case-insensitive), sorted by relative path."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"not a folder: {root}")
    files = sorted((p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES),
                   key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise ValueError(f"no image files ({', '.join(IMAGE_SUFFIXES)}) under {root}")
    return files


def load_image(path: str | Path, max_side: int | None = None) -> np.ndarray:
    """RGB uint8 [H, W, 3]; downscaled (Lanczos, aspect kept) when its longer side exceeds `max_side`."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if max_side is not None and max(im.size) > max_side:
                scale = max_side / max(im.size)
                im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.LANCZOS)
            return np.asarray(im).copy()
    except (OSError, UnidentifiedImageError) as e:
        raise ValueError(f"cannot read image {path}: {e}") from None


def folder_pair(folder: str | Path, seed: int, kind: str | None = None, max_side: int | None = 512, **kwargs) -> Pair:
    """A pair from one image of `folder` chosen by `seed`; kwargs go to `edit_pair`."""
    files = image_files(folder)
    path = files[int(np.random.default_rng([seed, 1]).integers(len(files)))]  # a stream apart from the edit's
    pair = edit_pair(load_image(path, max_side), seed, kind, **kwargs)
    pair.record["image"] = path.relative_to(Path(folder)).as_posix()
    return pair
