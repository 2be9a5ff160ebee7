"""Readers for the official ScreenSpot, ScreenSpot-v2 and ScreenSpot-Pro folder layouts.

* ScreenSpot: ``screenspot_imgs/`` + ``screenspot_{mobile,desktop,web}.json``.
* ScreenSpot-v2: ``screenspotv2_image/`` + ``screenspot_{mobile,desktop,web}_v2.json``.
  Both: a JSON list of records ``{"img_filename", "bbox": [x, y, w, h], "instruction",
  "data_type": "text" | "icon", "data_source"}``; the platform comes from the file name.
* ScreenSpot-Pro: ``images/`` + ``annotations/*.json``; records ``{"img_filename",
  "bbox": [x1, y1, x2, y2], "instruction", "application", "platform", "img_size", "ui_type",
  "group", "id"}``.

All boxes are returned as ``[x1, y1, x2, y2]`` in original pixels. Errors name the file and the
record index. A bad annotation stops the run when the files are read; an image that does not decode
(or whose size differs from ``img_size``) is found when its record is evaluated, by the same rule
as the GUI grounding JSONL: skipped, warned and counted in the report's ``skipped``.
"""

from __future__ import annotations

import glob
import json
import math
import os
from dataclasses import dataclass, field

from PIL import Image

from tasks.gui_grounding.data import read_image
from vlrl.episode import SampleError

V1_FILES = {p: f"screenspot_{p}.json" for p in ("mobile", "desktop", "web")}
V2_FILES = {p: f"screenspot_{p}_v2.json" for p in ("mobile", "desktop", "web")}
LAYOUTS = {
    "screenspot": ("screenspot_imgs", V1_FILES),
    "screenspot_v2": ("screenspotv2_image", V2_FILES),
    "screenspot_pro": ("images", None),
}


class DatasetError(SampleError):
    """A bad record or file in an evaluation dataset (message names file and record index)."""

    def __init__(self, message: str, reason: str = "bad_record"):
        super().__init__(message, reason)


@dataclass
class Record:
    image_path: str
    instruction: str
    bbox: list[float]  # [x1, y1, x2, y2], original pixels
    tags: dict = field(default_factory=dict)  # breakdown keys (platform, element_type / group, ...)
    source: str = ""  # "file#index"
    img_size: tuple[int, int] | None = None
    id: str | None = None


def read_record_image(rec: Record) -> Image.Image:
    """The record's image (RGB): SampleError "unreadable_image" when it does not decode, DatasetError
    "image_size_mismatch" when it is not the annotated `img_size` (both name the record)."""
    image = read_image(rec.image_path, rec.source)
    if rec.img_size is not None and tuple(image.size) != tuple(rec.img_size):
        raise DatasetError(f"{rec.source}: img_size {list(rec.img_size)} != actual image size {list(image.size)}",
                           reason="image_size_mismatch")
    return image


def detect_layout(data_dir: str) -> str:
    """Which official layout `data_dir` holds: screenspot, screenspot_v2 or screenspot_pro."""
    if not os.path.isdir(data_dir):
        raise FileNotFoundError(f"{data_dir}: data directory not found")
    found = []
    for name, (img_dir, files) in LAYOUTS.items():
        if files is None:
            ok = os.path.isdir(os.path.join(data_dir, "annotations")) and glob.glob(os.path.join(data_dir, "annotations", "*.json"))
        else:
            ok = any(os.path.isfile(os.path.join(data_dir, f)) for f in files.values())
        if ok:
            found.append(name)
    if len(found) != 1:
        what = "no known layout" if not found else f"several layouts ({', '.join(found)}); set `layout`"
        raise DatasetError(
            f"{data_dir}: {what}. Expected screenspot_imgs/ + screenspot_<platform>.json (ScreenSpot), "
            "screenspotv2_image/ + screenspot_<platform>_v2.json (ScreenSpot-v2) or images/ + annotations/*.json (ScreenSpot-Pro)"
        )
    return found[0]


def _load_list(path: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as e:
        raise DatasetError(f"{path}: invalid JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a JSON list of records, got {type(data).__name__}")
    return data


def _numbers(v, n: int, where: str, key: str) -> list[float]:
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise DatasetError(f"{where}: {key!r} must be a list of {n} numbers, got {v!r}")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v):
        raise DatasetError(f"{where}: {key!r} must hold finite numbers, got {v!r}")
    return [float(x) for x in v]


def _record(rec, where: str, img_root: str, xywh: bool, check_images: bool) -> tuple[str, str, list[float]]:
    if not isinstance(rec, dict):
        raise DatasetError(f"{where}: a record must be a JSON object")
    for key in ("img_filename", "bbox", "instruction"):
        if key not in rec:
            raise DatasetError(f"{where}: missing key {key!r}")
    if not isinstance(rec["instruction"], str) or not rec["instruction"].strip():
        raise DatasetError(f"{where}: 'instruction' must be a non-empty string")
    b = _numbers(rec["bbox"], 4, where, "bbox")
    if xywh:
        if b[2] <= 0 or b[3] <= 0:
            raise DatasetError(f"{where}: 'bbox' [x, y, w, h] needs w > 0 and h > 0, got {rec['bbox']!r}")
        b = [b[0], b[1], b[0] + b[2], b[1] + b[3]]
    elif b[2] <= b[0] or b[3] <= b[1]:
        raise DatasetError(f"{where}: 'bbox' [x1, y1, x2, y2] needs x2 > x1 and y2 > y1, got {rec['bbox']!r}")
    path = os.path.join(img_root, str(rec["img_filename"]))
    if check_images and not os.path.isfile(path):
        raise DatasetError(f"{where}: image not found: {path}")
    return path, rec["instruction"], b


def read_screenspot(data_dir: str, layout: str, subsets=None, check_images: bool = True) -> list[Record]:
    """ScreenSpot / ScreenSpot-v2 records; `subsets` filters platforms (mobile, desktop, web)."""
    img_dir, files = LAYOUTS[layout]
    img_root = os.path.join(data_dir, img_dir)
    out = []
    for platform, fname in files.items():
        path = os.path.join(data_dir, fname)
        if (subsets and platform not in subsets) or not os.path.isfile(path):
            continue
        for i, rec in enumerate(_load_list(path)):
            where = f"{path} record {i}"
            image, instruction, box = _record(rec, where, img_root, True, check_images)
            tags = {"platform": platform, "element_type": str(rec.get("data_type", "unknown")),
                    "data_source": str(rec.get("data_source", "unknown"))}  # fmt: skip
            out.append(Record(image, instruction, box, tags, f"{fname}#{i}", None, rec.get("id")))
    return out


def read_screenspot_pro(data_dir: str, subsets=None, check_images: bool = True) -> list[Record]:
    """ScreenSpot-Pro records; `subsets` filters annotation file stems (e.g. "vscode_macos")."""
    img_root = os.path.join(data_dir, "images")
    out = []
    for path in sorted(glob.glob(os.path.join(data_dir, "annotations", "*.json"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        if subsets and stem not in subsets:
            continue
        for i, rec in enumerate(_load_list(path)):
            where = f"{path} record {i}"
            image, instruction, box = _record(rec, where, img_root, False, check_images)
            size = None
            if rec.get("img_size") is not None:
                w, h = _numbers(rec["img_size"], 2, where, "img_size")
                if w <= 0 or h <= 0:
                    raise DatasetError(f"{where}: 'img_size' must be positive, got {rec['img_size']!r}")
                size = (int(w), int(h))
            tags = {k: str(rec.get(k, "unknown")) for k in ("group", "application", "platform", "ui_type")}
            out.append(Record(image, instruction, box, tags, f"{os.path.basename(path)}#{i}", size, rec.get("id")))
    return out


def read_records(data_dir: str, layout: str = "auto", subsets=None, check_images: bool = True) -> list[Record]:
    """Records of an official layout (auto-detected by default), in file then record order."""
    if layout == "auto":
        layout = detect_layout(data_dir)
    if layout not in LAYOUTS:
        raise ValueError(f"layout: must be 'auto' or one of {list(LAYOUTS)}, got {layout!r}")
    if layout == "screenspot_pro":
        recs = read_screenspot_pro(data_dir, subsets, check_images)
    else:
        recs = read_screenspot(data_dir, layout, subsets, check_images)
    if not recs:
        raise DatasetError(f"{data_dir}: no records for layout {layout!r} and subsets {subsets!r}")
    return recs
