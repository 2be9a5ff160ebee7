"""Evaluation env over ScreenSpot / ScreenSpot-v2 / ScreenSpot-Pro records.

reset(i) -> record i (file order, then record order). Scoring is the GUI grounding one (rewards in
the model frame); `hit` is click accuracy in ORIGINAL pixels: the predicted box centre (or point)
is mapped back from the model frame and must fall inside the original GT box.
"""

from __future__ import annotations

import functools
import os

from tasks.gui_grounding.env import grounding_observation, grounding_step
from vlrl.episode import Observation, StepResult

from .readers import Record, detect_layout, read_record_image, read_records


@functools.lru_cache(maxsize=8)
def _cached_records(data_dir: str, layout: str, subsets: tuple[str, ...]) -> tuple[Record, ...]:
    return tuple(read_records(data_dir, layout, list(subsets) or None))


def load_records(cfg) -> tuple[str, tuple[Record, ...]]:
    """(resolved layout, records after `subsets` and `limit`) for a config."""
    data_dir = os.path.abspath(cfg.data_dir)
    layout = detect_layout(data_dir) if cfg.layout == "auto" else cfg.layout
    recs = _cached_records(data_dir, layout, tuple(cfg.subsets))
    return layout, recs[: cfg.limit] if cfg.limit is not None else recs


def check_split(split: str) -> None:
    if split != "eval":
        raise ValueError(f"split: ScreenSpot tasks are evaluation-only (split 'eval'), got {split!r}")


class ScreenSpotEnv:
    """One env per episode; reset(i) loads record i."""

    def __init__(self, cfg, split: str = "eval"):
        check_split(split)
        self.cfg = cfg
        self.layout, self.records = load_records(cfg)
        self.info: dict | None = None

    def __len__(self) -> int:
        return len(self.records)

    def reset(self, seed: int) -> Observation:
        i = int(seed)
        if not 0 <= i < len(self.records):
            raise IndexError(f"record index {i} out of range: the dataset has {len(self.records)} records")
        rec = self.records[i]
        image = read_record_image(rec)
        extra = {"tags": dict(rec.tags), "layout": self.layout, "source": rec.source, "id": rec.id,
                 "image_path": rec.image_path, "index": i}  # fmt: skip
        obs = grounding_observation(image, rec.instruction, rec.bbox, self.cfg, extra)
        self.info = obs.info
        return obs

    def step(self, response_text: str) -> StepResult:
        if self.info is None:
            raise RuntimeError("step() called before reset()")
        return grounding_step(response_text, self.info, self.cfg)
