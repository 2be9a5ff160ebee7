"""Grid pairs: coloured shapes in the cells of an n x n grid, small enough for the embedded tiny model.

Each occupied cell holds one object (a shape x colour); the modified image changes k objects in place
(a new colour, a new shape, or both). One cell is `cell` pixels (28 = one merged patch of the tiny
Qwen2.5-VL), so a 3 x 3 grid is an 84 x 84 image. Drawing is PIL only: well under a millisecond a pair.

Record (the scene graph of both images):
    {"generator": "grid", "seed", "size": [W, H], "grid": n, "objects": [obj...],
     "modified_objects": [obj...], "changed": [i...],
     "changes": [{"index", "attributes": [names that differ], "box": [x0, y0, x1, y1]}]}
    obj = {"row", "col", "shape", "colour"}  (row 0 is the top, col 0 the left)
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from tasks.vision_zero.pairs import Pair

SHAPES = ("square", "circle", "triangle")
COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 70, 220), "yellow": (235, 200, 30)}
BACKGROUND = (245, 245, 245)


def draw(objects: list[dict], grid: int, cell: int) -> np.ndarray:
    """[H, W, 3] uint8 image of `objects` on a grid x grid board of `cell`-pixel cells."""
    img = Image.new("RGB", (grid * cell, grid * cell), BACKGROUND)
    d = ImageDraw.Draw(img)
    m = max(2, cell // 7)  # margin inside a cell: neighbouring objects never touch
    for o in objects:
        x0, y0 = o["col"] * cell + m, o["row"] * cell + m
        x1, y1 = (o["col"] + 1) * cell - m - 1, (o["row"] + 1) * cell - m - 1
        fill = COLOURS[o["colour"]]
        if o["shape"] == "square":
            d.rectangle([x0, y0, x1, y1], fill=fill)
        elif o["shape"] == "circle":
            d.ellipse([x0, y0, x1, y1], fill=fill)
        else:
            d.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=fill)
    return np.asarray(img, dtype=np.uint8).copy()


def grid_pair(seed: int, grid: int = 3, k: int = 1, num_objects: int | None = None, cell: int = 28) -> Pair:
    """A grid scene and the same scene with k objects changed in place, from `seed` alone.

    Args: grid: cells per side (2-4); k: objects changed (1 <= k <= objects); num_objects: occupied
    cells, random in [2, grid * grid - 1] when None; cell: pixels per cell side.
    """
    if not 2 <= grid <= 4:
        raise ValueError(f"grid must be in [2, 4], got {grid!r}")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, grid * grid)) if num_objects is None else num_objects
    if not 1 <= n <= grid * grid:
        raise ValueError(f"num_objects must be in [1, {grid * grid}], got {n!r}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be in [1, num_objects = {n}], got {k!r}")
    cells = sorted(int(c) for c in rng.choice(grid * grid, size=n, replace=False))
    colours = sorted(COLOURS)
    objects = [{"row": c // grid, "col": c % grid, "shape": SHAPES[int(rng.integers(len(SHAPES)))],
                "colour": colours[int(rng.integers(len(colours)))]} for c in cells]
    changed = sorted(int(i) for i in rng.choice(n, size=k, replace=False))
    modified = [dict(o) for o in objects]
    changes = []
    for i in changed:
        what = ("colour", "shape", "both")[int(rng.integers(3))]
        o = modified[i]
        if what in ("colour", "both"):
            o["colour"] = colours[int(rng.choice([j for j, c in enumerate(colours) if c != o["colour"]]))]
        if what in ("shape", "both"):
            o["shape"] = SHAPES[int(rng.choice([j for j, s in enumerate(SHAPES) if s != o["shape"]]))]
        attrs = [a for a in ("shape", "colour") if o[a] != objects[i][a]]
        box = [o["col"] * cell, o["row"] * cell, (o["col"] + 1) * cell, (o["row"] + 1) * cell]
        changes.append({"index": i, "attributes": attrs, "box": box})
    record = {"generator": "grid", "seed": int(seed), "size": [grid * cell, grid * cell], "grid": grid,
              "objects": objects, "modified_objects": modified, "changed": changed, "changes": changes}
    return Pair(draw(objects, grid, cell), draw(modified, grid, cell), record)
