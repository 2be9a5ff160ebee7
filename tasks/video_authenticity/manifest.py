"""JSONL clip manifests: one record per line, so users bring GenVidBench-style or their own data.

    {"video": "clips/0001.mp4", "label": "fake", "generator": "flicker", "level": 3}
    {"video": "real/0002.mp4", "label": "real"}

* ``video`` (required): the clip's path, relative to the manifest's folder (an absolute path is kept);
* ``label`` (required): ``"real"`` or ``"fake"``;
* ``generator`` (optional): what made a fake clip (a model name, an artifact kind), for breakdowns;
* ``level`` (optional): a graded artifact level (a number or a name), for breakdowns and GRPO-Q.

Blank lines are ignored. A malformed record (bad JSON, a missing or mistyped field, an unknown key:
a typo such as "lable" would otherwise silently drop data) raises ManifestError naming the file and
line. Whether the video itself can be decoded is not checked here: `load_clips` reports unreadable
clips with a reason, so a run skips and counts them.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from tasks.video_authenticity.decode import Clip, ClipLoader, DecodeSpec, Unreadable

LABELS = ("real", "fake")
KEYS = ("video", "label", "generator", "level")


class ManifestError(ValueError):
    """A malformed manifest; the message starts with `FILE:LINE:`."""


@dataclass(frozen=True)
class Record:
    """One clip of a manifest."""

    video: Path  # resolved against the manifest's folder
    label: str  # "real" | "fake"
    generator: str | None = None
    level: int | float | str | None = None
    line: int = 0  # 1-based line of the manifest it came from (0: not from a file)

    @property
    def real(self) -> bool:
        return self.label == "real"


def parse_record(obj: object, root: Path) -> Record:
    """One decoded JSON value -> Record (paths resolved against `root`); ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError(f"a record is a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(KEYS))
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; a record has {list(KEYS)}")
    video = obj.get("video")
    if not isinstance(video, str) or not video.strip():
        raise ValueError(f"'video' must be a non-empty path string, got {video!r}")
    label = obj.get("label")
    if label not in LABELS:
        raise ValueError(f"'label' must be 'real' or 'fake', got {label!r}")
    generator = obj.get("generator")
    if generator is not None and (not isinstance(generator, str) or not generator.strip()):
        raise ValueError(f"'generator' must be a non-empty string or absent, got {generator!r}")
    level = obj.get("level")
    if level is not None:
        number = isinstance(level, (int, float)) and not isinstance(level, bool)
        if not (number and math.isfinite(level)) and not (isinstance(level, str) and level.strip()):
            raise ValueError(f"'level' must be a finite number, a non-empty string or absent, got {level!r}")
    return Record(video=root / video, label=label, generator=generator, level=level)


def read_manifest(path: str | os.PathLike) -> list[Record]:
    """All records of the JSONL manifest at `path`, in file order. Raises ManifestError ("FILE:LINE: why")
    on a malformed record, and when the file holds no record at all."""
    path = Path(path)
    root = path.resolve().parent
    records = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ManifestError(f"{path}:{n}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                rec = parse_record(json.loads(line), root)
            except json.JSONDecodeError as e:
                raise ManifestError(f"{path}:{n}: not valid JSON ({e.msg} at column {e.colno})") from None
            except ValueError as e:
                raise ManifestError(f"{path}:{n}: {e}") from None
            records.append(Record(rec.video, rec.label, rec.generator, rec.level, line=n))
    if not records:
        raise ManifestError(f"{path}: no records (one JSON object per line: {{\"video\": ..., \"label\": ...}})")
    return records


def load_clips(records: list[Record], loader: ClipLoader, spec: DecodeSpec | None = None
               ) -> tuple[list[tuple[Record, Clip]], list[tuple[Record, Unreadable]], dict]:
    """Decode every record's clip through `loader` (its cache: later stages get the same frames).

    Returns (usable [(record, clip)], skipped [(record, unreadable)], summary {"count": n, "reasons":
    {reason: n}} of the skipped records, the shape of an evaluation report's `skipped`).
    """
    usable, skipped, reasons = [], [], {}
    for rec in records:
        out = loader.load(rec.video, spec)
        if isinstance(out, Unreadable):
            skipped.append((rec, out))
            reasons[out.reason] = reasons.get(out.reason, 0) + 1
        else:
            usable.append((rec, out))
    return usable, skipped, {"count": len(skipped), "reasons": dict(sorted(reasons.items()))}
