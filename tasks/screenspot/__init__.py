"""ScreenSpot / ScreenSpot-v2 / ScreenSpot-Pro evaluation (GUI grounding, click accuracy).

Reuses the scoring, prompts and report of tasks/gui_grounding; this folder adds the readers for
the official layouts (readers.py) and an env over their records (env.py). See README.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.gui_grounding import episode_success
from tasks.gui_grounding.config import ScoringConfig
from vlrl.config import opt

from .env import ScreenSpotEnv, check_split, load_records
from .readers import LAYOUTS, DatasetError, Record, detect_layout, read_records
from .report import dump_annotated, report, to_markdown, write_markdown

__all__ = ["Config", "make_env", "num_examples", "report", "markdown", "dump_examples", "episode_success", "ScreenSpotEnv", "read_records", "detect_layout",
           "DatasetError", "Record", "dump_annotated", "to_markdown", "write_markdown"]  # fmt: skip


@dataclass
class Config(ScoringConfig):
    """ScreenSpot-family evaluation config."""

    name: str = opt("screenspot", "task name (used in logs and run names)")
    module: str = opt("tasks.screenspot", "python module implementing the task")
    max_pixels: int = opt(12845056, "smart_resize upper bound on the model-frame area (Qwen2.5-VL ships 12845056)")
    data_dir: str = opt("data/screenspot", "folder holding an official layout (ScreenSpot, -v2 or -Pro)")
    layout: str = opt("auto", "'auto' (detect from data_dir) or screenspot / screenspot_v2 / screenspot_pro")
    subsets: list[str] = opt([], "platforms (mobile/desktop/web) or Pro annotation stems to keep; [] = all")
    limit: int | None = opt(None, "evaluate only the first N records; null = all")

    def __post_init__(self):
        super().__post_init__()
        if self.layout != "auto" and self.layout not in LAYOUTS:
            raise ValueError(f"layout: must be 'auto' or one of {list(LAYOUTS)}, got {self.layout!r}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit: must be >= 1 or null, got {self.limit}")
        if not self.data_dir:
            raise ValueError("data_dir: must name the dataset folder")


def make_env(cfg: Config, split: str = "eval") -> ScreenSpotEnv:
    """Env over the records (evaluation only: split must be 'eval')."""
    return ScreenSpotEnv(cfg, split)


def num_examples(cfg: Config, split: str = "eval") -> int:
    """Number of records (after `subsets` and `limit`)."""
    check_split(split)
    return len(load_records(cfg)[1])


def markdown(rep: dict, cfg: Config) -> str:
    """The report as a Markdown table (written next to the JSON by vlrl/evaluate.py)."""
    return to_markdown(rep)


def dump_examples(episodes, out_dir, cfg) -> list[str]:
    """Annotated images (GT green, prediction red) for a person to look at."""
    return dump_annotated(episodes, str(out_dir), limit=len(episodes), big_box_fraction=cfg.big_box_fraction)
