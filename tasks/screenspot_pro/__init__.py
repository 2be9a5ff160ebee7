"""ScreenSpot-Pro evaluation: tasks/screenspot with the Pro layout and defaults."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.screenspot import Config as _ScreenSpotConfig
from tasks.screenspot import dump_examples, make_env, markdown, num_examples, report
from vlrl.config import opt

__all__ = ["Config", "make_env", "num_examples", "report", "markdown", "dump_examples"]


@dataclass
class Config(_ScreenSpotConfig):
    """ScreenSpot-Pro evaluation config (group / application / ui_type breakdowns)."""

    name: str = opt("screenspot_pro", "task name (used in logs and run names)")
    module: str = opt("tasks.screenspot_pro", "python module implementing the task")
    data_dir: str = opt("data/ScreenSpot-Pro", "folder with images/ and annotations/*.json")
    layout: str = opt("screenspot_pro", "'auto' or screenspot_pro")
