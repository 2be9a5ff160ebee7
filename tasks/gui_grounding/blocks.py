"""Warm-up data for models trained from scratch: one solid coloured block on a plain background.

The tiny from-scratch model does not learn to localise GUI widgets directly (1,500 SFT steps on
screens stayed at the fixed-click baseline), but it learns to box a plain block within a few
hundred steps, and that skill transfers: started from a block-trained model, SFT on one-widget
screens takes off (measured in the README). `data: blocks` selects this source; it is the first
stage of the `sft=gui_warmstart` curriculum, not an evaluation set.

Example `i` of a split uses seed `layout_seed(split, i)`, like the screen generator, so train and
eval blocks are disjoint.
"""

from __future__ import annotations

import random

from PIL import Image

from .example import Example
from .generator import layout_seed

SIDES = (112, 140, 168)  # multiples of 28: the image is already its own model frame
BACKGROUNDS = ((250, 250, 250), (240, 240, 235), (32, 33, 36), (24, 24, 28))
COLOURS = {"red": (220, 30, 30), "blue": (40, 90, 220), "green": (30, 160, 80), "purple": (130, 70, 200),
           "black": (20, 20, 20), "yellow": (240, 180, 20), "grey": (200, 200, 200)}


def block_example(seed: int) -> tuple[Image.Image, str, list[float], dict]:
    """(image, instruction, bbox [x1, y1, x2, y2] in pixels, metadata) of one block screen."""
    rng = random.Random(seed)
    w, h = rng.choice(SIDES), rng.choice(SIDES)
    bg = rng.choice(BACKGROUNDS)
    name = rng.choice(sorted(COLOURS))
    side = rng.randint(16, 36)
    x, y = rng.randint(0, w - side), rng.randint(0, h - side)
    image = Image.new("RGB", (w, h), bg)
    image.paste(COLOURS[name], (x, y, x + side, y + side))
    meta = {"platform": "blocks", "element_type": "block", "target_kind": "block", "instruction_style": "appearance",
            "n_widgets": 1, "target_rel_area": side * side / (w * h)}
    return image, f"the {name} block", [float(x), float(y), float(x + side), float(y + side)], meta


class BlocksSource:
    """Block screens; `eval` has `eval_examples` of them, `train` is an infinite stream."""

    def __init__(self, cfg, split: str):
        self.split = split
        self.size = None if split == "train" else int(cfg.eval_examples)

    def __len__(self) -> int:
        return self.size if self.size is not None else 0

    def get(self, index: int):
        seed = layout_seed(self.split, index)
        image, instruction, bbox, meta = block_example(seed)
        return Example(image, instruction, bbox, {**meta, "layout_seed": seed, "index": int(index)})

    def relative_areas(self, n: int) -> list[float]:
        return [block_example(layout_seed(self.split, i))[3]["target_rel_area"] for i in range(n)]
