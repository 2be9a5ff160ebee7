"""Coordinate frames for Qwen2.5-VL grounding.

Qwen2.5-VL answers in absolute pixels of the image *it sees*: the original screenshot resized by
the image processor's ``smart_resize`` (both sides multiples of ``factor`` = patch 14 x merge 2 =
28, area within [min_pixels, max_pixels], aspect ratio kept as closely as possible). We call that
the "model frame". Ground truth is mapped original -> model frame for the reward, predictions are
mapped model frame -> original for click accuracy on benchmark data.

The resize rule itself is the processor's own ``smart_resize`` (imported from transformers, so the
frame always matches what the processor would do); only the per-axis scaling lives here.
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image

FACTOR = 28  # patch_size 14 * merge_size 2
DEFAULT_MIN_PIXELS = 56 * 56
DEFAULT_MAX_PIXELS = 224 * 224

Size = tuple[int, int]  # (width, height), PIL order


def _smart_resize():
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    return smart_resize


def model_frame_size(
    orig_size: Size,
    min_pixels: int = DEFAULT_MIN_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    factor: int = FACTOR,
) -> Size:
    """(W, H) of the image the model sees for an original image of size `orig_size` = (W, H)."""
    w, h = int(orig_size[0]), int(orig_size[1])
    if w <= 0 or h <= 0:
        raise ValueError(f"image size must be positive, got {orig_size!r}")
    new_h, new_w = _smart_resize()(h, w, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
    return int(new_w), int(new_h)


def scale_box(box: Sequence[float], src_size: Size, dst_size: Size) -> list[float]:
    """Map ``[x1, y1, x2, y2]`` from a (W, H) frame to another by per-axis scaling."""
    sx = dst_size[0] / src_size[0]
    sy = dst_size[1] / src_size[1]
    x1, y1, x2, y2 = box
    return [x1 * sx, y1 * sy, x2 * sx, y2 * sy]


def scale_point(point: Sequence[float], src_size: Size, dst_size: Size) -> list[float]:
    """Map ``[x, y]`` from a (W, H) frame to another."""
    return [point[0] * dst_size[0] / src_size[0], point[1] * dst_size[1] / src_size[1]]


def box_to_model(box: Sequence[float], orig_size: Size, model_size: Size) -> list[float]:
    """Ground-truth box, original pixels -> model frame."""
    return scale_box(box, orig_size, model_size)


def box_to_original(box: Sequence[float], model_size: Size, orig_size: Size) -> list[float]:
    """Predicted box, model frame -> original pixels."""
    return scale_box(box, model_size, orig_size)


def point_to_original(point: Sequence[float], model_size: Size, orig_size: Size) -> list[float]:
    """Predicted point, model frame -> original pixels."""
    return scale_point(point, model_size, orig_size)


def resize_to_model_frame(
    image: Image.Image,
    min_pixels: int = DEFAULT_MIN_PIXELS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> Image.Image:
    """Resize `image` to its exact model frame (bicubic, like the processor's resample=3).

    An image already at its model frame is returned unchanged: smart_resize is the identity on a
    size whose sides are multiples of 28 and whose area is within bounds, so the processor will not
    resize it again (as long as it is called with the same min/max pixels).
    """
    image = image.convert("RGB")
    size = model_frame_size(image.size, min_pixels, max_pixels)
    if size == image.size:
        return image
    return image.resize(size, Image.Resampling.BICUBIC)


def images_kwargs(min_pixels: int, max_pixels: int) -> dict:
    """Processor call kwargs that make the processor use the same frame (transformers 5 form)."""
    return {"size": {"shortest_edge": int(min_pixels), "longest_edge": int(max_pixels)}}
