"""ScreenSpot-Pro evaluation: tasks/screenspot with the Pro layout and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.gui_grounding.config import doc_field
from tasks.screenspot import Config as _ScreenSpotConfig
from tasks.screenspot import dump_examples, make_env, markdown, num_examples, report

__all__ = ["Config", "make_env", "num_examples", "report", "markdown", "dump_examples"]


@dataclass
class Config(_ScreenSpotConfig):
    """ScreenSpot-Pro evaluation config (group / application / ui_type breakdowns)."""

    name: str = doc_field("task name (used in logs and run names)", default="screenspot_pro")
    module: str = doc_field("python module implementing the task", default="tasks.screenspot_pro")
    data_dir: str = doc_field("folder with images/ and annotations/*.json", default="data/ScreenSpot-Pro")
    layout: str = doc_field("'auto' or screenspot_pro", default="screenspot_pro")
