"""Difficulty weights for the GRPO loss (GUI-G1 weights hard examples; its formula is unreleased).

Ours, computed from data:

* Area weight (per example, in ``Observation.info["sample_weight"]``). With ``a`` the target box
  area divided by the screen area (same in original and model frame),

      w_raw(a) = clip((a / a_ref) ** -gamma, w_min, w_max)
      w(a)     = w_raw(a) / mean_{a' ~ train} w_raw(a')

  so smaller targets weigh more and the mean weight over the training distribution is 1.
  ``a_ref`` defaults to the median relative area of the training data; the mean is estimated on
  ``difficulty_samples`` training examples (layouts only for synthetic data: cheap).
* Group success factor (optional, ``success_beta`` > 0, applied in ``sample_weights``): with ``p``
  the fraction of the group's G answers that hit the target,

      f(p) = 1 + beta * (1 - 2p)        (in [1 - beta, 1 + beta]; 1 at p = 0.5)

  so rarely-solved prompts weigh more. ``sample_weights`` returns ``w(a) * f(p)``: the full weight.

``difficulty: off`` makes every weight 1.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence


def raw_area_weight(rel_area: float, gamma: float, ref_area: float, w_min: float, w_max: float) -> float:
    """clip((rel_area / ref_area) ** -gamma, w_min, w_max); tiny areas are floored at 1e-12."""
    return min(max((max(rel_area, 1e-12) / ref_area) ** -gamma, w_min), w_max)


class AreaWeighting:
    """Area weight normalised to mean 1 over a sample of training relative areas."""

    def __init__(self, rel_areas: Sequence[float], gamma: float = 0.5, ref_area: float | None = None,
                 w_min: float = 0.5, w_max: float = 2.0):  # fmt: skip
        if not rel_areas:
            raise ValueError("AreaWeighting needs at least one training relative area")
        self.gamma, self.w_min, self.w_max = gamma, w_min, w_max
        self.ref_area = float(ref_area) if ref_area is not None else float(statistics.median(rel_areas))
        self.norm = statistics.fmean(self.raw(a) for a in rel_areas)

    def raw(self, rel_area: float) -> float:
        return raw_area_weight(rel_area, self.gamma, self.ref_area, self.w_min, self.w_max)

    def __call__(self, rel_area: float) -> float:
        return self.raw(rel_area) / self.norm


def success_factor(success_rate: float, beta: float) -> float:
    """1 + beta * (1 - 2 p): > 1 for groups solved less than half of the time."""
    return 1.0 + beta * (1.0 - 2.0 * success_rate)


def _cfg_key(cfg) -> tuple:
    return (
        cfg.data, tuple(cfg.n_widgets), tuple(cfg.width_range), tuple(cfg.platforms), tuple(cfg.kinds),
        bool(cfg.decor), float(cfg.appearance_prob), float(cfg.jsonl_eval_fraction), float(cfg.difficulty_gamma),
        cfg.difficulty_ref_area, float(cfg.difficulty_min), float(cfg.difficulty_max), int(cfg.difficulty_samples),
    )  # fmt: skip


class _Frozen:
    """Hashable view of the config fields that define the training distribution (cache key)."""

    def __init__(self, cfg):
        self.cfg, self.key = cfg, _cfg_key(cfg)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _Frozen) and other.key == self.key


@functools.lru_cache(maxsize=16)
def _weighting(frozen: _Frozen) -> AreaWeighting:
    from .data import make_source

    cfg = frozen.cfg
    areas = make_source(cfg, "train").relative_areas(cfg.difficulty_samples)
    return AreaWeighting(areas, cfg.difficulty_gamma, cfg.difficulty_ref_area, cfg.difficulty_min, cfg.difficulty_max)


def area_weighting(cfg) -> AreaWeighting | None:
    """The task's area weighting (cached per training distribution), or None when off."""
    if cfg.difficulty == "off":
        return None
    return _weighting(_Frozen(cfg))


def group_weights(base: Sequence[float], hits: Sequence[float], beta: float) -> list[float]:
    """Per-episode weights of one group: base weight times the group success factor."""
    if beta == 0.0 or not hits:
        return [float(b) for b in base]
    f = success_factor(sum(hits) / len(hits), beta)
    return [float(b) * f for b in base]
