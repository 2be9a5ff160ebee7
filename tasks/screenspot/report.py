"""ScreenSpot report: click accuracy overall and per platform x element type (ScreenSpot, v2) or
per group / application / ui_type (ScreenSpot-Pro), plus the grounding diagnostics."""

from __future__ import annotations

from tasks.gui_grounding.report import dump_annotated, episode_rows, summarize, to_markdown, write_markdown

BREAKDOWNS = {
    "screenspot": (("platform", "element_type"), ("platform",), ("element_type",)),
    "screenspot_v2": (("platform", "element_type"), ("platform",), ("element_type",)),
    "screenspot_pro": (("group",), ("application",), ("ui_type",), ("group", "ui_type"), ("platform",)),
}

__all__ = ["report", "dump_annotated", "to_markdown", "write_markdown", "BREAKDOWNS"]


def report(episodes, cfg) -> dict:
    """Evaluation report of ScreenSpot-family episodes (layout read from the observations)."""
    episodes = list(episodes)
    layouts = {ep.turns[0].observation.info.get("layout") for ep in episodes}
    layout = layouts.pop() if len(layouts) == 1 else None
    breakdowns = BREAKDOWNS.get(layout, BREAKDOWNS["screenspot"] + BREAKDOWNS["screenspot_pro"])
    rep = summarize(episode_rows(episodes, cfg.big_box_fraction), breakdowns)
    rep["layout"] = layout
    return rep
