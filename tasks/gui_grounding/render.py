"""Drawing synthetic GUI screens (generator.py lays them out): palette, fonts, decoration and widgets."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from PIL import Image, ImageDraw, ImageFont

from .glyphs import draw_glyph

if TYPE_CHECKING:
    from .generator import Widget

COLORS = {
    "red": (214, 48, 49), "orange": (240, 128, 30), "yellow": (230, 190, 20), "green": (40, 160, 70),
    "blue": (40, 100, 230), "purple": (130, 70, 200), "pink": (230, 80, 160), "teal": (10, 150, 150),
    "gray": (125, 125, 130), "black": (25, 25, 28),
}  # fmt: skip


def font(size: float) -> ImageFont.FreeTypeFont:
    """Pillow's bundled scalable font at `size` px (cached per integer size)."""
    return _font(max(5, round(size)))


@functools.lru_cache(maxsize=256)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def render_screen(w, h, th, els, widgets) -> Image.Image:
    """Draw a laid-out screen: theme `th`, decoration elements `els` (generator._chrome), then the widgets."""
    img = Image.new("RGB", (w, h), th["bg"])
    d = ImageDraw.Draw(img)
    for el in els:
        kind, box = el[0], el[1]
        if kind in ("rect", "bar"):
            d.rectangle(box, fill=el[2])
        elif kind == "ellipse":
            d.ellipse(box, fill=el[2])
        elif kind == "field":
            d.rounded_rectangle(box, radius=(box[3] - box[1]) / 2, fill=el[2])
        elif kind == "text":
            d.text(box, el[2], font=font(el[3]), fill=el[4], anchor=el[5])
    for wd in widgets:
        _draw_widget(d, wd, th)
    return img


def _draw_widget(d: ImageDraw.ImageDraw, wd: Widget, th: dict) -> None:
    x1, y1, x2, y2 = wd.box
    bh = y2 - y1
    f = font(bh * 0.5)
    if wd.kind == "button":
        d.rounded_rectangle(wd.box, radius=bh * 0.25, fill=COLORS[wd.color])
        ink = (20, 20, 20) if wd.color == "yellow" else (255, 255, 255)
        d.text(((x1 + x2) / 2, (y1 + y2) / 2), wd.label, font=f, fill=ink, anchor="mm")
    elif wd.kind == "icon":
        bg = th["bg"]
        if wd.chip:
            bg = th["chip"]
            d.rounded_rectangle(wd.box, radius=bh * 0.3, fill=bg)
            pad = bh * 0.15
            draw_glyph(d, wd.glyph, (x1 + pad, y1 + pad, x2 - pad, y2 - pad), COLORS[wd.color], bg)
        else:
            draw_glyph(d, wd.glyph, wd.box, COLORS[wd.color], bg)
    elif wd.kind == "text_field":
        d.rounded_rectangle(wd.box, radius=bh * 0.15, fill=th["surface"], outline=th["border"], width=1)
        d.text((x1 + bh * 0.3, (y1 + y2) / 2), wd.label, font=f, fill=th["hint"], anchor="lm")
    elif wd.kind == "checkbox":
        s = bh * 0.6
        bx = (x1, y1 + bh * 0.2, x1 + s, y1 + bh * 0.2 + s)
        if wd.checked:
            d.rectangle(bx, fill=COLORS[wd.color])
            draw_glyph(d, "check", bx, (255, 255, 255), COLORS[wd.color])
        else:
            d.rectangle(bx, outline=COLORS[wd.color], width=max(1, round(s * 0.12)))
        d.text((x1 + bh * 0.9, (y1 + y2) / 2), wd.label, font=f, fill=th["text"], anchor="lm")
    else:  # menu item: in a bar plain text; free: dropdown with a caret
        if wd.in_bar:
            d.text(((x1 + x2) / 2, (y1 + y2) / 2), wd.label, font=f, fill=th["text"], anchor="mm")
        else:
            d.rounded_rectangle(wd.box, radius=bh * 0.15, fill=th["surface"], outline=th["border"], width=1)
            d.text((x1 + bh * 0.3, (y1 + y2) / 2), wd.label, font=f, fill=th["text"], anchor="lm")
            c = (x2 - bh * 0.5, (y1 + y2) / 2)
            d.polygon([(c[0] - bh * 0.15, c[1] - bh * 0.08), (c[0] + bh * 0.15, c[1] - bh * 0.08), (c[0], c[1] + bh * 0.12)],
                      fill=th["text"])  # fmt: skip
