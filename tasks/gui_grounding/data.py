"""Example sources for the grounding env: the synthetic generator, or a user's JSONL file.

JSONL format (one record per line; paths relative to the JSONL file's folder):

    {"image": "images/000001.png", "instruction": "Submit button", "bbox": [x1, y1, x2, y2],
     "metadata": {...}, "split": "train"}

``bbox`` is in original image pixels; ``metadata`` (optional) feeds the report breakdowns
(``platform``, ``element_type``, ...); ``split`` (optional) is "train" or "eval". When no record
has a ``split``, a record is held out for eval when a hash of (image, instruction) falls in the
first ``jsonl_eval_fraction`` of the hash range, so the split is stable under reordering.

Checked when the file is read (an error naming file and line stops the run): JSON, keys, a bbox
with x2 > x1 and y2 > y1, the image file exists. Checked when a record's image is read (the sample
is skipped, warned with file and line, and counted by reason in the run's metrics or the report's
``skipped``; training stops past ``trainer.max_skip_fraction``): the image decodes (empty, corrupt
and truncated files alike: ``unreadable_image``), and the bbox lies inside it (``bbox_outside``
chooses: skip as ``bbox_outside_image``, clip with a warning, or error).
"""

from __future__ import annotations

import functools
import json
import math
import os
from typing import Iterable

import warnings

from PIL import Image

from vlrl.episode import SampleError

from .config import generator_kwargs
from .example import Example
from .generator import generate, hash64, layout_seed


def write_jsonl(path: str, seeds: Iterable[int], image_dir: str = "images", split: str | None = None, **gen_kwargs) -> int:
    """Render synthetic screens for `seeds` to PNGs and a JSONL index; returns the record count.

    `image_dir` is relative to the JSONL file's folder. Extra kwargs go to `generator.generate`.
    """
    root = os.path.dirname(os.path.abspath(path))
    os.makedirs(os.path.join(root, image_dir), exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for seed in seeds:
            screen = generate(seed, **gen_kwargs)
            rel = os.path.join(image_dir, f"{seed}.png")
            screen.image.save(os.path.join(root, rel))
            rec = {"image": rel, "instruction": screen.instruction, "bbox": screen.bbox, "metadata": screen.metadata}
            if split is not None:
                rec["split"] = split
            f.write(json.dumps(rec) + "\n")
            n += 1
    return n


def _check_bbox(bbox, where: str) -> list[float]:
    if not isinstance(bbox, (list, tuple)) or len(bbox) != 4:
        raise ValueError(f"{where}: 'bbox' must be a list [x1, y1, x2, y2], got {bbox!r}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in bbox):
        raise ValueError(f"{where}: 'bbox' must hold 4 finite numbers, got {bbox!r}")
    if bbox[2] <= bbox[0] or bbox[3] <= bbox[1]:
        raise ValueError(f"{where}: 'bbox' needs x2 > x1 and y2 > y1, got {bbox!r}")
    return [float(v) for v in bbox]


BBOX_POLICIES = ("skip", "clip", "error")


class RecordError(RuntimeError):
    """A record that stops the run (not skipped): a box outside its image with bbox_outside=error."""


def read_image(path: str, where: str) -> Image.Image:
    """The RGB image at `path`; any failure to decode it (empty, corrupt, truncated, missing) is a
    SampleError(reason="unreadable_image") naming `where` (file:line or file#record) and the file."""
    try:
        with Image.open(path) as im:
            return im.convert("RGB")
    except Exception as e:  # noqa: BLE001  PIL raises OSError, SyntaxError, DecompressionBombError, ...
        raise SampleError(f"{where}: cannot read image {path}: {type(e).__name__}: {e}", reason="unreadable_image") from None


def box_in_image(bbox: list[float], size: tuple[int, int], where: str, policy: str = "skip") -> list[float]:
    """`bbox` [x1, y1, x2, y2] checked against the image size (W, H): returned as is when inside;
    otherwise per `policy`: skip (SampleError "bbox_outside_image"), clip (to the image, with a
    warning; skipped when nothing is left) or error (RecordError)."""
    w, h = size
    x1, y1, x2, y2 = bbox
    if x1 >= 0 and y1 >= 0 and x2 <= w and y2 <= h:
        return list(bbox)
    msg = f"{where}: bbox {list(bbox)} is not inside the {w}x{h} image"
    if policy == "error":
        raise RecordError(msg + " (task.bbox_outside=error; skip or clip instead to go on)")
    clipped = [max(0.0, x1), max(0.0, y1), min(float(w), x2), min(float(h), y2)]
    if policy == "skip" or clipped[2] <= clipped[0] or clipped[3] <= clipped[1]:
        raise SampleError(msg, reason="bbox_outside_image")
    warnings.warn(f"{msg}: clipped to {clipped} (task.bbox_outside=clip)", stacklevel=2)
    return clipped


def read_jsonl(path: str, check_images: bool = True) -> list[dict]:
    """Read and validate a grounding JSONL; errors name the file and line number.

    Returned records have an absolute ``image`` path, a float ``bbox`` and a ``metadata`` dict.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: JSONL data file not found")
    root = os.path.dirname(os.path.abspath(path))
    out = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: invalid JSON ({e.msg})") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: a record must be a JSON object")
            for key in ("image", "instruction", "bbox"):
                if key not in rec:
                    raise ValueError(f"{where}: missing key {key!r}")
            if not isinstance(rec["instruction"], str) or not rec["instruction"].strip():
                raise ValueError(f"{where}: 'instruction' must be a non-empty string")
            image = os.path.join(root, rec["image"])
            if check_images and not os.path.isfile(image):
                raise FileNotFoundError(f"{where}: image not found: {image}")
            split = rec.get("split")
            if split not in (None, "train", "eval"):
                raise ValueError(f"{where}: 'split' must be 'train' or 'eval', got {split!r}")
            meta = rec.get("metadata") or {}
            if not isinstance(meta, dict):
                raise ValueError(f"{where}: 'metadata' must be an object")
            out.append({"image": image, "instruction": rec["instruction"], "bbox": _check_bbox(rec["bbox"], where),
                        "metadata": meta, "split": split, "where": where})  # fmt: skip
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def _heldout(rec: dict, fraction: float) -> bool:
    return hash64(f"{os.path.basename(rec['image'])}\t{rec['instruction']}") / 2**64 < fraction


@functools.lru_cache(maxsize=8)
def _jsonl_split(path: str, split: str, fraction: float) -> tuple[dict, ...]:
    records = read_jsonl(path)
    if any(r["split"] is not None for r in records):
        chosen = [r for r in records if (r["split"] or "train") == split]
    else:
        chosen = [r for r in records if _heldout(r, fraction) == (split == "eval")]
    if not chosen:
        raise ValueError(f"{path}: no records in the {split!r} split")
    return tuple(chosen)


class SyntheticSource:
    """Generator screens; example `i` of a split uses layout seed `layout_seed(split, i // K)` with
    target offset `i % K`, K = `targets_per_screen` for training and 1 for held-out screens."""

    def __init__(self, cfg, split: str):
        self.split, self.kwargs = split, generator_kwargs(cfg)
        self.size = None if split == "train" else int(cfg.eval_examples)
        self.per_screen = int(cfg.targets_per_screen) if split == "train" else 1

    def __len__(self) -> int:
        return self.size if self.size is not None else 0

    def get(self, index: int) -> Example:
        seed = layout_seed(self.split, index // self.per_screen)
        s = generate(seed, target_offset=index % self.per_screen, **self.kwargs)
        return Example(s.image, s.instruction, s.bbox, {**s.metadata, "layout_seed": seed, "index": int(index)})

    def relative_areas(self, n: int) -> list[float]:
        """Target relative areas of the first `n` examples (layout only, no rendering)."""
        return [generate(layout_seed(self.split, i), render=False, **self.kwargs).metadata["target_rel_area"]
                for i in range(n)]  # fmt: skip


class JsonlSource:
    """Records of a JSONL file in one split (all of them when `split` is None); example `i` is
    record ``i % len``. An unreadable image or a box outside it: see the module docstring."""

    def __init__(self, path: str, split: str | None, fraction: float = 0.1, bbox_outside: str = "skip"):
        path = os.path.abspath(path)
        self.records = tuple(read_jsonl(path)) if split is None else _jsonl_split(path, split, float(fraction))
        self.size = len(self.records)
        self.bbox_outside = bbox_outside

    def __len__(self) -> int:
        return self.size

    def get(self, index: int) -> Example:
        rec = self.records[index % self.size]
        image = read_image(rec["image"], rec["where"])
        bbox = box_in_image(rec["bbox"], image.size, rec["where"], self.bbox_outside)
        return Example(image, rec["instruction"], bbox, {**rec["metadata"], "index": int(index)})

    def relative_areas(self, n: int) -> list[float]:
        """Target relative areas of up to `n` records spread over the file (image headers only). Records
        that will be skipped (unreadable image, box outside it) are left out; none left is an error."""
        step = max(1, self.size // n)
        out, first_problem = [], None
        for rec in self.records[::step][:n]:
            try:
                try:
                    with Image.open(rec["image"]) as im:  # reads the header only
                        size = im.size
                except Exception as e:  # noqa: BLE001  (as read_image: any failure is an unreadable image)
                    raise SampleError(f"{rec['where']}: cannot read image {rec['image']}: {type(e).__name__}: {e}") from None
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # clipping is warned when the example is drawn
                    x1, y1, x2, y2 = box_in_image(rec["bbox"], size, rec["where"], self.bbox_outside)
            except SampleError as e:
                first_problem = first_problem or str(e)
                continue
            out.append((x2 - x1) * (y2 - y1) / (size[0] * size[1]))
        if not out:
            raise ValueError(f"no usable record among the {len(self.records[::step][:n])} sampled for the area weighting "
                             f"(first: {first_problem}); fix the data or set task.difficulty=off")
        return out


def make_source(cfg, split: str):
    """The example source of a split (see `Config.data` / `Config.eval_data`)."""
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    spec = cfg.data if split == "train" or cfg.eval_data is None else cfg.eval_data
    if spec == "synthetic":
        return SyntheticSource(cfg, split)
    if spec == "blocks":
        from .blocks import BlocksSource

        return BlocksSource(cfg, split)
    if split == "eval" and cfg.eval_data is not None:
        return JsonlSource(spec, None, bbox_outside=cfg.bbox_outside)  # a separate eval file is used whole
    return JsonlSource(spec, split, cfg.jsonl_eval_fraction, cfg.bbox_outside)
