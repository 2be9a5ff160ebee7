"""A procedural fine-grained set: 36 compositional classes "<pattern> <colour> <shape>" (e.g. "striped teal
hexagon") drawn with nuisance variation: size, position, rotation, background, clutter, colour jitter.

Each image is a pure function of (seed, split, class, index): the same key draws the same pixels, and
train and test keys differ in their split, so no test image is a training image. Nothing is downloaded.

Class order (= labels) puts the 18 classes whose attribute indices sum to an even number first: the
base-to-new protocol trains on that first half, and every new class is an unseen combination of a
pattern, a colour and a shape that all occur among the base classes (tests/tasks/classification).
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
from PIL import Image, ImageDraw

from .readers import SPLITS, Dataset, Record

PATTERNS = ("solid", "striped", "dotted")
COLOURS = {"red": (200, 45, 45), "teal": (20, 135, 135), "amber": (225, 150, 20)}
SHAPES = ("circle", "square", "triangle", "hexagon")
QUESTION = "What type of shape is in the photo?"
SUPERSAMPLE = 2  # draw at 2x and downscale: anti-aliased edges without a drawing library


def class_attributes() -> list[tuple[str, str, str]]:
    """(pattern, colour, shape) of every class in label order: even index sum first (base), then odd."""
    combos = list(itertools.product(range(len(PATTERNS)), range(len(COLOURS)), range(len(SHAPES))))
    ordered = sorted(combos, key=lambda c: (sum(c) % 2, c))
    colours = list(COLOURS)
    return [(PATTERNS[p], colours[c], SHAPES[s]) for p, c, s in ordered]


def classnames() -> list[str]:
    return [" ".join(a) for a in class_attributes()]


def read_shapes(train_per_class: int, test_per_class: int, seed: int, size: int) -> Dataset:
    """The dataset: `train_per_class` / `test_per_class` images per class, drawn at size x size."""
    names = classnames()
    records = {s: [] for s in SPLITS}
    for split, per_class in (("train", train_per_class), ("test", test_per_class)):
        records[split] = [Record(label, name, f"{seed}:{split}:{i}")
                          for label, name in enumerate(names) for i in range(per_class)]
    return Dataset("shapes", names, records, lambda r: render(r.classname, f"shapes:{r.classname}:{r.ref}", size),
                   question=QUESTION)


def render(classname: str, key: str, size: int) -> Image.Image:
    """One image of `classname` ("pattern colour shape"), fully determined by `key`. -> RGB size x size."""
    pattern, colour, shape = classname.split()
    rng = random.Random(key)
    n = size * SUPERSAMPLE
    canvas = _background(rng, n)
    _clutter(rng, canvas, n)
    r = rng.uniform(0.20, 0.33) * n  # size
    cx, cy = rng.uniform(r + 2, n - r - 2), rng.uniform(r + 2, n - r - 2)  # position, fully inside
    theta = rng.uniform(0, 2 * math.pi)  # rotation
    base = tuple(min(255, max(0, v + rng.randint(-18, 18))) for v in COLOURS[colour])  # colour jitter
    mask = Image.new("L", (n, n), 0)
    outline = tuple(int(v * 0.55) for v in base)
    points = _outline(shape, cx, cy, r, theta)
    draw = ImageDraw.Draw(mask)
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=255)
    else:
        draw.polygon(points, fill=255)
    fill = Image.fromarray(_pattern(pattern, base, n, r, theta, rng))
    canvas.paste(fill, (0, 0), mask)
    edge = ImageDraw.Draw(canvas)
    width = max(1, round(n / 70))
    if shape == "circle":
        edge.ellipse((cx - r, cy - r, cx + r, cy + r), outline=outline, width=width)
    else:
        edge.line(points + points[:1], fill=outline, width=width, joint="curve")
    return canvas.resize((size, size), Image.Resampling.BOX)


def _outline(shape: str, cx: float, cy: float, r: float, theta: float) -> list[tuple[float, float]]:
    """Polygon vertices of a rotated shape of circumradius ~r (triangles a little larger: similar area)."""
    sides, radius, phase = {"square": (4, r * 1.05, math.pi / 4), "triangle": (3, r * 1.2, -math.pi / 2),
                            "hexagon": (6, r, 0.0), "circle": (24, r, 0.0)}[shape]
    return [(cx + radius * math.cos(theta + phase + 2 * math.pi * k / sides),
             cy + radius * math.sin(theta + phase + 2 * math.pi * k / sides)) for k in range(sides)]


def _pattern(pattern: str, colour: tuple, n: int, r: float, theta: float, rng: random.Random) -> np.ndarray:
    """The fill of the shape: solid colour, stripes or dots in the colour on its pale tint; the pattern
    turns with the shape. -> uint8 (n, n, 3)."""
    c = np.array(colour, dtype=np.float32)
    tint = c * 0.35 + 255 * 0.65
    if pattern == "solid":
        return np.broadcast_to(c, (n, n, 3)).astype(np.uint8)
    y, x = np.mgrid[0:n, 0:n].astype(np.float32)
    u = x * math.cos(theta) + y * math.sin(theta)
    v = -x * math.sin(theta) + y * math.cos(theta)
    if pattern == "striped":
        period = r * rng.uniform(0.5, 0.7)
        on = (np.floor(u / (period / 2)) % 2) == 0
    else:
        period = r * rng.uniform(0.45, 0.6)
        du, dv = (u % period) - period / 2, (v % period) - period / 2
        on = du * du + dv * dv < (period * 0.3) ** 2
    return np.where(on[..., None], c, tint).astype(np.uint8)


def _background(rng: random.Random, n: int) -> Image.Image:
    """A light, low-saturation gradient with pixel noise (background nuisance)."""
    def pale():
        return np.array([rng.uniform(170, 250) for _ in range(3)], dtype=np.float32)

    a, b = pale(), pale()
    t = np.linspace(0, 1, n, dtype=np.float32)
    ramp = t[None, :] if rng.random() < 0.5 else t[:, None]
    grad = a + (b - a) * np.broadcast_to(ramp, (n, n))[..., None]
    noise = np.random.default_rng(rng.getrandbits(32)).normal(0, 6, (n, n, 3))
    return Image.fromarray(np.clip(grad + noise, 0, 255).astype(np.uint8))


def _clutter(rng: random.Random, canvas: Image.Image, n: int) -> None:
    """2-6 small grey-ish lines, dots and boxes under the target (distractors without the class colours)."""
    draw = ImageDraw.Draw(canvas)
    for _ in range(rng.randint(2, 6)):
        g = rng.randint(70, 190)
        col = tuple(min(255, max(0, g + rng.randint(-20, 20))) for _ in range(3))
        x, y, s = rng.uniform(0, n), rng.uniform(0, n), rng.uniform(0.03, 0.09) * n
        kind = rng.randrange(3)
        if kind == 0:
            a = rng.uniform(0, math.pi)
            draw.line((x, y, x + 2 * s * math.cos(a), y + 2 * s * math.sin(a)), fill=col, width=max(1, n // 90))
        elif kind == 1:
            draw.ellipse((x - s / 2, y - s / 2, x + s / 2, y + s / 2), fill=col)
        else:
            draw.rectangle((x - s / 2, y - s / 2, x + s / 2, y + s / 2), outline=col, width=max(1, n // 120))
