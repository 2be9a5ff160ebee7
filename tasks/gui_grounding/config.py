"""Typed config of the GUI grounding task (merged by the core with configs/task/gui_grounding.yaml)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rewards.gui import DEFAULT_WEIGHTS, TERMS
from vlrl.config import opt

from .generator import KINDS, LABEL_POOLS, PLATFORMS
from .prompts import PROMPTS


@dataclass
class ScoringConfig:
    """Fields shared by every grounding task (synthetic screens, ScreenSpot, ScreenSpot-Pro)."""

    name: str = opt("gui_grounding", "task name (used in logs and run names)")
    module: str = opt("tasks.gui_grounding", "python module implementing the task")
    prompt: str = opt("fast", "prompt template: 'fast' (answer only) or 'think' (<think>...</think> then answer)")
    image_first: bool = opt(True, "image before the instruction in the user turn (GUI-G1's order); false puts the text first, so that a causal model's image tokens can attend to it")
    reward_terms: list[str] = opt(list(TERMS), "reward terms returned by step(): subset of hit, iou, box")
    reward_weights: dict[str, float] = opt(dict(DEFAULT_WEIGHTS), "weight of each raw reward term")
    min_pixels: int = opt(56 * 56, "smart_resize lower bound on the model-frame area (pixels)")
    max_pixels: int = opt(160 * 160, "smart_resize upper bound on the model-frame area (pixels)")
    big_box_fraction: float = opt(0.25, "a predicted box covering more than this fraction of the screen counts as 'big'")

    def __post_init__(self):
        if self.prompt not in PROMPTS:
            raise ValueError(f"prompt: must be one of {sorted(PROMPTS)}, got {self.prompt!r}")
        terms = list(self.reward_terms)
        if not terms or any(t not in TERMS for t in terms) or len(set(terms)) != len(terms):
            raise ValueError(f"reward_terms: must be a non-empty subset of {list(TERMS)}, got {terms!r}")
        weights = dict(self.reward_weights)
        bad = [k for k, v in weights.items() if k not in TERMS or not math.isfinite(float(v))]
        if bad:
            raise ValueError(f"reward_weights: unknown term or non-finite weight for {bad}; terms are {list(TERMS)}")
        if not 28 * 28 <= self.min_pixels <= self.max_pixels:
            raise ValueError(f"min_pixels/max_pixels: need 784 <= min_pixels <= max_pixels, got {self.min_pixels}, {self.max_pixels}")
        if not 0.0 < self.big_box_fraction <= 1.0:
            raise ValueError(f"big_box_fraction: must be in (0, 1], got {self.big_box_fraction}")


@dataclass
class Config(ScoringConfig):
    """GUI grounding on synthetic screens (or a user JSONL), GUI-G1 rewards."""

    data: str = opt("synthetic", "'synthetic' (the generator), 'blocks' (one plain block: warm-up for models trained from scratch) or a path to a JSONL file of records")
    eval_data: str | None = opt(None, "eval source: None = held-out part of `data`; or 'synthetic' / a JSONL path")
    eval_examples: int = opt(256, "number of held-out synthetic screens in the eval split")
    jsonl_eval_fraction: float = opt(0.1, "share of JSONL records (without a 'split' field) held out for eval")
    bbox_outside: str = opt("skip", "JSONL record whose bbox is not inside its image (checked when the image is read): 'skip' (counted as bbox_outside_image), 'clip' (to the image, with a warning) or 'error' (stop, naming the line)")
    n_widgets: list[int] = opt([1, 3], "curriculum: [min, max] targetable widgets per screen")
    width_range: list[int] = opt([224, 448], "[min, max] original screen width in pixels")
    platforms: list[str] = opt(list(PLATFORMS), "platform looks to sample from")
    kinds: list[str] = opt(list(KINDS), "widget kinds to sample from")
    decor: bool = opt(True, "draw non-target decoration (status/title/address bars, skeleton lines)")
    appearance_prob: float = opt(0.5, "probability a button is named by colour when that is unique")
    widget_scale: float = opt(1.0, "multiplies widget sizes; > 1 gives targets a tiny model can resolve at small frames")
    difficulty: str = opt("area", "loss weighting: 'off' or 'area' (smaller target = larger weight)")
    difficulty_gamma: float = opt(0.5, "exponent of the area weight (a / a_ref) ** -gamma")
    difficulty_ref_area: float | None = opt(None, "reference relative area a_ref; None = median of the training data")
    difficulty_min: float = opt(0.5, "lower clip of the unnormalised area weight")
    difficulty_max: float = opt(2.0, "upper clip of the unnormalised area weight")
    difficulty_samples: int = opt(512, "training examples used to estimate a_ref and the normaliser")
    success_beta: float = opt(0.0, "blend of group success rate into sample_weights: 1 + beta * (1 - 2p); 0 = off")
    describe_prob: float = opt(0.0, "share of synthetic training examples that ask for the target's name given its box (SFT warm start only; 0 = none)")
    describe_n_widgets: list[int] | None = opt(None, "[min, max] widgets on the screens of those reading examples; None = n_widgets")
    train_format: str = opt("strict", "training rewards: 'strict' scores only the prompted format ([{\"bbox_2d\": [x1, y1, x2, y2]}], optionally fenced; after </think> with prompt=think), other answers 0 with reason 'format'; 'lenient' reads any box or point as evaluation always does")
    targets_per_screen: int = opt(1, "synthetic training data: K consecutive examples share one screen, each naming a different widget where it has K (same-screen contrast for binding); 1 = a screen per example; held-out screens are unaffected")

    def __post_init__(self):
        super().__post_init__()
        for fname in ("n_widgets", "width_range", "describe_n_widgets"):
            if getattr(self, fname) is None:
                continue
            v = list(getattr(self, fname))
            if len(v) != 2 or not 1 <= v[0] <= v[1]:
                raise ValueError(f"{fname}: must be [min, max] with 1 <= min <= max, got {v!r}")
        if self.width_range[0] < 56:
            raise ValueError(f"width_range: minimum width is 56 pixels, got {list(self.width_range)!r}")
        if not self.platforms or any(p not in PLATFORMS for p in self.platforms):
            raise ValueError(f"platforms: must be a non-empty subset of {list(PLATFORMS)}, got {list(self.platforms)!r}")
        if not self.kinds or any(k not in KINDS for k in self.kinds):
            raise ValueError(f"kinds: must be a non-empty subset of {list(KINDS)}, got {list(self.kinds)!r}")
        if "icon" not in self.kinds and self.n_widgets[1] > sum(len(LABEL_POOLS[k]) for k in set(self.kinds)):
            raise ValueError(f"n_widgets: {self.n_widgets[1]} widgets exceed the text labels available for kinds {list(self.kinds)}")
        if not self.data:
            raise ValueError("data: must be 'synthetic', 'blocks' or a path to a .jsonl file")
        if self.eval_examples < 1:
            raise ValueError(f"eval_examples: must be >= 1, got {self.eval_examples}")
        if not 0.0 < self.jsonl_eval_fraction < 1.0:
            raise ValueError(f"jsonl_eval_fraction: must be in (0, 1), got {self.jsonl_eval_fraction}")
        if self.bbox_outside not in ("skip", "clip", "error"):
            raise ValueError(f"bbox_outside: must be 'skip', 'clip' or 'error', got {self.bbox_outside!r}")
        if not 0.5 <= self.widget_scale <= 4.0:
            raise ValueError(f"widget_scale: must be in [0.5, 4], got {self.widget_scale}")
        if not 0.0 <= self.appearance_prob <= 1.0:
            raise ValueError(f"appearance_prob: must be in [0, 1], got {self.appearance_prob}")
        if self.difficulty not in ("off", "area"):
            raise ValueError(f"difficulty: must be 'off' or 'area', got {self.difficulty!r}")
        if self.difficulty_gamma < 0:
            raise ValueError(f"difficulty_gamma: must be >= 0, got {self.difficulty_gamma}")
        if self.difficulty_ref_area is not None and not 0 < self.difficulty_ref_area <= 1:
            raise ValueError(f"difficulty_ref_area: must be in (0, 1] or null, got {self.difficulty_ref_area}")
        if not 0 < self.difficulty_min <= self.difficulty_max:
            raise ValueError(f"difficulty_min/difficulty_max: need 0 < min <= max, got {self.difficulty_min}, {self.difficulty_max}")
        if self.difficulty_samples < 1:
            raise ValueError(f"difficulty_samples: must be >= 1, got {self.difficulty_samples}")
        if not 0.0 <= self.success_beta <= 1.0:
            raise ValueError(f"success_beta: must be in [0, 1], got {self.success_beta}")
        if self.train_format not in ("strict", "lenient"):
            raise ValueError(f"train_format: must be 'strict' or 'lenient', got {self.train_format!r}")
        if self.targets_per_screen < 1:
            raise ValueError(f"targets_per_screen: must be >= 1, got {self.targets_per_screen}")
        if self.targets_per_screen > 1 and self.data != "synthetic":
            raise ValueError(f"targets_per_screen: needs data=synthetic (several targets per screen), got data={self.data!r}")
        if not 0.0 <= self.describe_prob <= 1.0:
            raise ValueError(f"describe_prob: must be in [0, 1], got {self.describe_prob}")
        if self.describe_prob > 0 and self.data != "synthetic":
            raise ValueError(f"describe_prob: reading examples need data=synthetic (widget names), got data={self.data!r}")


def generator_kwargs(cfg) -> dict:
    """Keyword arguments of `generator.generate` from a Config (dataclass or OmegaConf node)."""
    return dict(
        n_widgets=tuple(cfg.n_widgets), width_range=tuple(cfg.width_range), platforms=tuple(cfg.platforms),
        kinds=tuple(cfg.kinds), decor=bool(cfg.decor), appearance_prob=float(cfg.appearance_prob),
        widget_scale=float(getattr(cfg, "widget_scale", 1.0)),
    )  # fmt: skip
