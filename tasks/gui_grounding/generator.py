"""Synthetic GUI screens for grounding: deterministic in a layout seed.

A screen has a platform look (mobile / tablet / desktop / web chrome), a theme (light or dark), and
1..N *targetable* widgets: buttons with text, coloured vector icons, text fields, checkboxes and
menus (menu-bar items or dropdowns), laid out in rows. Bars (a desktop menu bar or toolbar, a mobile
bottom navigation bar) hold some of the widgets. Decoration (status / title / address bars,
skeleton text lines) is never a target and uses no label, glyph or widget kind an instruction names.

The instruction names exactly one widget: by its text ("Submit button", "the Email input field")
or by its appearance ("the blue gear icon", "the green button"). Uniqueness is by construction:
text labels are unique on a screen, (colour, glyph) pairs are unique among icons, and appearance-only
descriptions ("the gear icon", "the green button") are used only when unique. `Screen.query` holds
the attributes the instruction uses; exactly one widget matches it (see `matches`).

Curriculum knobs: ``n_widgets=(lo, hi)`` (targetable widgets, inclusive), ``width_range`` (pixels),
``platforms``, ``kinds`` and ``decor``. Train / held-out split: see `layout_seed` and `split_of`.
This module decides what a screen holds and where; render.py draws it.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from dataclasses import dataclass, field

from PIL import Image

from .glyphs import GLYPHS
from .render import COLORS, font, render_screen

PLATFORMS = ("mobile", "tablet", "desktop", "web")
KINDS = ("button", "icon", "text_field", "checkbox", "menu_item")
ASPECT = {"mobile": (1.6, 2.2), "tablet": (0.7, 1.4), "desktop": (0.5, 0.66), "web": (0.55, 0.8)}  # H / W
BUTTON_LABELS = (
    "Submit", "Cancel", "OK", "Save", "Delete", "Next", "Back", "Login", "Sign up", "Send", "Apply",
    "Continue", "Share", "Edit", "Upload", "Download", "Retry", "Buy now", "Add to cart", "Confirm",
)  # fmt: skip
FIELD_LABELS = ("Email", "Password", "Username", "Search", "Full name", "Phone", "Address", "City", "Message")
CHECK_LABELS = ("Remember me", "I agree", "Subscribe", "Dark mode", "Notifications", "Auto-save", "Wi-Fi")
MENU_LABELS = ("File", "View", "Insert", "Format", "Tools", "Window", "Help", "History", "Sort by", "Language")
TITLES = ("Dashboard", "Inbox", "Profile", "Account", "Overview", "Preferences", "Checkout", "Library")
LABEL_POOLS = {"button": BUTTON_LABELS, "text_field": FIELD_LABELS, "checkbox": CHECK_LABELS, "menu_item": MENU_LABELS}
EVAL_BIT = 1 << 62  # layout seeds with this bit set are the held-out split


def hash64(key: str) -> int:
    """A stable 64-bit hash of `key` (blake2b): seeds and hash splits that do not depend on Python's hash()."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def layout_seed(split: str, index: int) -> int:
    """Layout seed of example `index` of a split: a 62-bit hash of (split, index), plus EVAL_BIT
    for "eval". Train and eval seed sets are disjoint by construction; `split_of` inverts it."""
    if split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {split!r}")
    h = hash64(f"{split}:{int(index)}") & (EVAL_BIT - 1)
    return h | EVAL_BIT if split == "eval" else h


def split_of(seed: int) -> str:
    """The split a layout seed belongs to (any seed < 2**62 is a training seed)."""
    return "eval" if seed & EVAL_BIT else "train"


@dataclass
class Widget:
    kind: str  # one of KINDS
    box: list[int] = field(default_factory=lambda: [0, 0, 0, 0])  # [x1, y1, x2, y2] original pixels
    label: str | None = None
    color: str | None = None
    glyph: str | None = None
    checked: bool = False
    chip: bool = False  # icon drawn on a rounded chip
    in_bar: bool = False

    @property
    def element_type(self) -> str:
        return "icon" if self.kind == "icon" else "text"


@dataclass
class Screen:
    image: Image.Image | None  # None when generated with render=False
    instruction: str
    bbox: list[float]  # target [x1, y1, x2, y2], original pixels
    metadata: dict
    widgets: list[Widget] = field(default_factory=list)
    target: int = 0
    query: dict = field(default_factory=dict)


def matches(query: dict, widget: Widget) -> bool:
    """True when `widget` has every attribute value in `query`."""
    return all(getattr(widget, k) == v for k, v in query.items())


def _theme(rng: random.Random) -> dict:
    if rng.random() < 0.25:
        return dict(dark=True, bg=(32, 33, 36), surface=(50, 51, 56), text=(232, 232, 235), muted=(120, 120, 128),
                    hint=(150, 150, 158), border=(95, 95, 102), chip=(70, 71, 78))  # fmt: skip
    bg = rng.choice([(255, 255, 255), (246, 247, 249), (250, 248, 244)])
    surface = rng.choice([(255, 255, 255), (236, 238, 242), (242, 244, 247)])
    return dict(dark=False, bg=bg, surface=surface, text=(25, 25, 28), muted=(200, 200, 206), hint=(140, 140, 148),
                border=(180, 182, 190), chip=(228, 230, 235))  # fmt: skip


def _chrome(platform, w, h, th, rng, decor):
    """Decoration elements and the remaining content area [x1, y1, x2, y2]."""
    els, top, bottom = [], 0, h
    if decor:
        if platform in ("mobile", "tablet"):
            sb = max(4, round(h * 0.03))
            els.append(("rect", (0, 0, w, sb), th["surface"]))
            els.append(("text", (sb, sb / 2), f"{rng.randint(1, 12)}:{rng.randint(0, 59):02d}", sb * 0.8, th["text"], "lm"))
            els.append(("rect", (w - sb * 2.5, sb * 0.25, w - sb * 0.6, sb * 0.75), th["text"]))
            top = sb
        else:
            tb = max(5, round(h * 0.045))
            els.append(("rect", (0, 0, w, tb), th["surface"]))
            for i in range(3):
                c = tb * (0.6 + 0.8 * i)
                els.append(("ellipse", (c - tb * 0.25, tb * 0.25, c + tb * 0.25, tb * 0.75), th["border"]))
            top = tb
            if platform == "web":
                ab = max(5, round(h * 0.05))
                els.append(("rect", (0, top, w, top + ab), th["surface"]))
                url = f"www.{rng.choice(['example', 'shop', 'news', 'mail'])}.com/{rng.randint(1, 999)}"
                els.append(("field", (w * 0.12, top + ab * 0.15, w * 0.85, top + ab * 0.85), th["bg"]))
                els.append(("text", (w * 0.14, top + ab / 2), url, ab * 0.45, th["muted"], "lm"))
                top += ab
        if rng.random() < 0.7:  # page / app title
            hb = max(6, round(min(w, h) * rng.uniform(0.06, 0.1)))
            els.append(("text", (w * rng.uniform(0.03, 0.08), top + hb / 2), rng.choice(TITLES), hb * 0.55, th["text"], "lm"))
            top += hb
    return els, [round(w * 0.03), top + 2, w - round(w * 0.03), bottom - 2]


def _sizes(widgets, unit, factors, area_w, hmin=8.0):
    """(w, h) of each widget for a size unit (pixels)."""
    out = []
    for wd, f in zip(widgets, factors):
        h = max(hmin, unit * f[0])
        if wd.kind == "icon":
            w = h
        elif wd.kind == "button":
            w = font(h * 0.5).getlength(wd.label) + h * f[1]
        elif wd.kind == "text_field":
            w = max(area_w * f[2], font(h * 0.5).getlength(wd.label) + h)
        elif wd.kind == "checkbox":
            w = h * 0.9 + font(h * 0.5).getlength(wd.label)
        else:  # menu_item (free: a dropdown with a caret)
            w = font(h * 0.5).getlength(wd.label) + h * (0.8 if wd.in_bar else 1.6)
        out.append((min(w, area_w), h))
    return out


def _flow(sizes, area, rng, gap):
    """Pack boxes into rows with random slack; None when they do not fit in `area`."""
    ax1, ay1, ax2, ay2 = area
    aw, ah = ax2 - ax1, ay2 - ay1
    sizes = [(min(w, aw - 2 * gap), h) for w, h in sizes]  # over-long labels overflow their widget
    rows, cur, cur_w = [], [], 0.0
    for i, (w, _) in enumerate(sizes):
        if cur and cur_w + gap + w > aw - 2 * gap:
            rows.append(cur)
            cur, cur_w = [], 0.0
        cur_w += (gap if cur else 0) + w
        cur.append(i)
    if cur:
        rows.append(cur)
    heights = [max(sizes[i][1] for i in r) for r in rows]
    free_y = ah - sum(heights) - gap * (len(rows) + 1)
    if free_y < 0 or any(sum(sizes[i][0] for i in r) + gap * (len(r) + 1) > aw for r in rows):
        return None
    boxes = [None] * len(sizes)
    wy = [rng.random() for _ in range(len(rows) + 1)]
    y = ay1 + gap + free_y * wy[0] / sum(wy)
    for r, rh, wgt in zip(rows, heights, wy[1:]):
        free_x = aw - sum(sizes[i][0] for i in r) - gap * (len(r) + 1)
        wx = [rng.random() for _ in range(len(r) + 1)]
        x = ax1 + gap + free_x * wx[0] / sum(wx)
        for i, gx in zip(r, wx[1:]):
            w, h = sizes[i]
            top = y + (rh - h) / 2
            boxes[i] = [round(x), round(top), round(x + w), round(top + h)]
            x += w + gap + free_x * gx / sum(wx)
        y += rh + gap + free_y * wgt / sum(wy)
    return boxes


def _place(platform, w, h, th, rng, decor, bar, free, factors, unit, hmin):
    """(decoration, content area, boxes of bar + free widgets), shrinking sizes until they fit."""
    els, area = _chrome(platform, w, h, th, rng, decor)
    bh = max(hmin * 1.25, round(unit * 1.3))
    if bar:
        at_bottom = platform == "mobile"
        bar_area = [0, area[3] - bh, w, area[3]] if at_bottom else [0, area[1], w, area[1] + bh]
        area = [area[0], area[1], area[2], area[3] - bh] if at_bottom else [area[0], area[1] + bh, area[2], area[3]]
        els.append(("rect", tuple(bar_area), th["surface"]))
    bi = bh * 0.8  # bar item height
    for _ in range(16):
        bar_boxes = []
        if bar:
            bar_sizes = _sizes(bar, bi, [(1.0, 0.8, 0.3)] * len(bar), w, hmin)
            bar_boxes = _flow(bar_sizes, [0, bar_area[1] - 2, w, bar_area[3] + 2], rng, max(2, bh * 0.1))
        boxes = _flow(_sizes(free, unit, factors, area[2] - area[0], hmin), area, rng, max(2.0, unit * 0.3))
        if boxes is not None and bar_boxes is not None:
            return els, area, bar_boxes + boxes
        unit, bi = unit * 0.85, max(hmin, bi * 0.9)
    return None


def _make_widgets(kinds, n, th, rng):
    colors = [c for c in COLORS if not (th["dark"] and c == "black")]
    pairs = rng.sample(list(itertools.product(GLYPHS, colors)), n)
    pools = {k: list(v) for k, v in LABEL_POOLS.items()}
    for p in pools.values():
        rng.shuffle(p)
    out = []
    for i in range(n):
        k = rng.choice([k for k in kinds if k == "icon" or pools[k]])
        wd = Widget(kind=k)
        if k == "icon":
            wd.glyph, wd.color = pairs[i]
            wd.chip = rng.random() < 0.4
        else:
            wd.label = pools[k].pop()
            if k in ("button", "checkbox"):
                wd.color = rng.choice(colors)
            wd.checked = rng.random() < 0.5
        out.append(wd)
    return out


def _describe(target: Widget, widgets, rng, appearance_prob):
    """(instruction, query, style) naming `target` uniquely among `widgets`."""
    k, lab = target.kind, target.label

    def unique(q):
        return sum(matches(q, w) for w in widgets) == 1

    if k == "icon":
        q = {"kind": "icon", "glyph": target.glyph}
        if unique(q) and rng.random() < 0.25:
            return rng.choice(["the {g} icon", "{g} icon"]).format(g=target.glyph), q, "appearance"
        q = {"kind": "icon", "glyph": target.glyph, "color": target.color}
        t = rng.choice(["the {c} {g} icon", "{c} {g} icon", "click the {c} {g} icon"])
        return t.format(c=target.color, g=target.glyph), q, "appearance"
    if k == "button" and rng.random() < appearance_prob:
        q = {"kind": "button", "color": target.color}
        if unique(q):
            return rng.choice(["the {c} button", "{c} button"]).format(c=target.color), q, "appearance"
    templates = {
        "button": ["{l} button", "the '{l}' button", "click the {l} button"],
        "text_field": ["the {l} input field", "{l} text field", "the text box for {l}"],
        "checkbox": ["the '{l}' checkbox", "{l} check box", "toggle {l}"],
        "menu_item": ["the {l} menu", "{l} menu item", "open the {l} menu"],
    }
    return rng.choice(templates[k]).format(l=lab), {"kind": k, "label": lab}, "text"


def widget_name(wd: Widget) -> str:
    """A canonical name of a widget that spells out everything an instruction may use (colour,
    label, glyph, kind): the answer of the warm start's "read the widget" examples (env.py)."""
    if wd.kind == "icon":
        return f"{wd.color} {wd.glyph} icon"
    if wd.kind == "button":
        return f"{wd.color} {wd.label} button"
    return {"text_field": "{l} input field", "checkbox": "{l} checkbox", "menu_item": "{l} menu"}[wd.kind].format(l=wd.label)


def generate(
    seed: int,
    n_widgets: tuple[int, int] = (1, 8),
    width_range: tuple[int, int] = (320, 1280),
    platforms=PLATFORMS,
    kinds=KINDS,
    decor: bool = True,
    appearance_prob: float = 0.5,
    render: bool = True,
    widget_scale: float = 1.0,
    target_offset: int = 0,
) -> Screen:
    """One screen, a pure function of its arguments. `render=False` skips drawing (layout only).
    `target_offset` k names the widget k places after the seed's own target (cyclically), so
    offsets 0..n-1 of one seed give the same screen with each of its n widgets as the target."""
    lo, hi = n_widgets
    if not 1 <= lo <= hi:
        raise ValueError(f"n_widgets must satisfy 1 <= lo <= hi, got {n_widgets!r}")
    if not 56 <= width_range[0] <= width_range[1]:
        raise ValueError(f"width_range must satisfy 56 <= lo <= hi, got {width_range!r}")
    bad = set(kinds) - set(KINDS) or set(platforms) - set(PLATFORMS)
    if bad or not kinds or not platforms:
        raise ValueError(f"unknown or empty kinds / platforms: {sorted(bad)}")
    capacity = 100 if "icon" in kinds else sum(len(LABEL_POOLS[k]) for k in set(kinds))
    if hi > capacity:
        raise ValueError(f"n_widgets: at most {capacity} widgets fit the label pools of kinds {list(kinds)}")
    rng = random.Random(seed)
    for _attempt in range(8):  # a screen whose widgets cannot fit is re-drawn from the same stream
        platform = rng.choice(list(platforms))
        w = rng.randint(*width_range)
        h = max(16, round(w * rng.uniform(*ASPECT[platform])))
        th = _theme(rng)
        n = rng.randint(lo, hi)
        widgets = _make_widgets(kinds, n, th, rng)
        # a bar (menu bar / toolbar / bottom navigation) holding some widgets of one kind
        bar_kind = "icon" if platform == "mobile" else rng.choice(["icon", "menu_item"])
        in_bar = [wd for wd in widgets if wd.kind == bar_kind]
        if len(in_bar) >= 2 and rng.random() < 0.6:
            for wd in in_bar[:5]:
                wd.in_bar = True
        bar = [wd for wd in widgets if wd.in_bar]
        free = [wd for wd in widgets if not wd.in_bar]
        factors = [(rng.uniform(1.0, 1.4), rng.uniform(0.8, 1.4), rng.uniform(0.3, 0.7)) for _ in free]
        u0 = min(w, h) * rng.uniform(0.035, 0.08) * widget_scale
        hmin = max(4.0, min(8.0, min(w, h) * 0.06)) * widget_scale  # smallest widget height
        for use_decor in (True, False) if decor else (False,):  # then drop the chrome
            placed = _place(platform, w, h, th, rng, use_decor, bar, free, factors, u0, hmin)
            if placed is not None:
                break
        if placed is not None:
            break
    else:
        raise ValueError(f"layout seed {seed}: {hi} widgets do not fit {width_range[0]}..{width_range[1]} px "
                         "wide screens; use a larger width_range or fewer n_widgets")  # fmt: skip
    els, area, boxes = placed
    for wd, b in zip(bar + free, boxes):
        wd.box = b
    widgets = bar + free
    for _ in range(rng.randint(0, 3) if decor else 0):  # skeleton text lines where no widget is
        x1, y1 = rng.uniform(area[0], area[2] * 0.7), rng.uniform(area[1], area[3] - 2)
        sk = (x1, y1, min(area[2], x1 + rng.uniform(0.1, 0.45) * w), y1 + max(2, h * 0.008))
        if all(sk[2] < b[0] - 2 or sk[0] > b[2] + 2 or sk[3] < b[1] - 2 or sk[1] > b[3] + 2 for b in (wd.box for wd in widgets)):
            els.append(("bar", sk, th["muted"]))
    ti = (rng.randrange(len(widgets)) + target_offset) % len(widgets)
    target = widgets[ti]
    instruction, query, style = _describe(target, widgets, rng, appearance_prob)
    x1, y1, x2, y2 = target.box
    meta = {
        "platform": platform, "element_type": target.element_type, "target_kind": target.kind,
        "instruction_style": style, "n_widgets": len(widgets), "target_rel_area": (x2 - x1) * (y2 - y1) / (w * h),
        "width": w, "height": h, "dark": th["dark"], "seed": int(seed), "split": split_of(seed),
        "target_name": widget_name(target),
    }  # fmt: skip
    image = render_screen(w, h, th, els, widgets) if render else None
    return Screen(image, instruction, [float(v) for v in target.box], meta, widgets, ti, query)
