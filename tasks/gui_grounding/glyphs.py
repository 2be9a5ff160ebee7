"""Simple vector icon glyphs drawn with PIL primitives (gear, star, heart, bell, ...).

Every glyph is drawn inside a square box ``(x0, y0, x1, y1)`` in one colour; ``bg`` is used to
cut holes (the gear's hub, the house door). Shapes are recognisable down to ~10 px.
"""

from __future__ import annotations

import math

from PIL import ImageDraw

GLYPHS = (
    "gear", "star", "heart", "bell", "trash", "folder", "lock", "play",
    "plus", "arrow", "home", "search", "close", "check", "menu",
)  # fmt: skip


def _star(cx, cy, r_out, r_in, points=5, rot=-math.pi / 2):
    pts = []
    for i in range(points * 2):
        r = r_out if i % 2 == 0 else r_in
        a = rot + i * math.pi / points
        pts.append((cx + r * math.cos(a), cy + r * math.sin(a)))
    return pts


def draw_glyph(draw: ImageDraw.ImageDraw, name: str, box, color, bg) -> None:
    """Draw glyph `name` in `color` inside the square `box`."""
    x0, y0, x1, y1 = box
    s = x1 - x0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    m = s * 0.12  # inner margin
    lw = max(1, round(s * 0.12))  # stroke width
    X0, Y0, X1, Y1 = x0 + m, y0 + m, x1 - m, y1 - m
    r = (s - 2 * m) / 2
    if name == "gear":
        teeth = _star(cx, cy, r, r * 0.72, points=8, rot=0)
        draw.polygon(teeth, fill=color)
        draw.ellipse((cx - r * 0.78, cy - r * 0.78, cx + r * 0.78, cy + r * 0.78), fill=color)
        draw.ellipse((cx - r * 0.32, cy - r * 0.32, cx + r * 0.32, cy + r * 0.32), fill=bg)
    elif name == "star":
        draw.polygon(_star(cx, cy + r * 0.08, r, r * 0.42), fill=color)
    elif name == "heart":
        q = r * 0.52
        draw.ellipse((cx - 2 * q, cy - r * 0.75, cx, cy - r * 0.75 + 2 * q), fill=color)
        draw.ellipse((cx, cy - r * 0.75, cx + 2 * q, cy - r * 0.75 + 2 * q), fill=color)
        draw.polygon([(cx - 2 * q + 0.5, cy - r * 0.75 + q * 1.15), (cx + 2 * q - 0.5, cy - r * 0.75 + q * 1.15),
                      (cx, Y1)], fill=color)  # fmt: skip
    elif name == "bell":
        draw.chord((X0 + r * 0.25, Y0, X1 - r * 0.25, Y1 - r * 0.2), 180, 360, fill=color)
        draw.rectangle((X0 + r * 0.25, cy - r * 0.1, X1 - r * 0.25, Y1 - r * 0.45), fill=color)
        draw.rectangle((X0, Y1 - r * 0.5, X1, Y1 - r * 0.3), fill=color)
        draw.ellipse((cx - r * 0.2, Y1 - r * 0.3, cx + r * 0.2, Y1 + r * 0.1), fill=color)
    elif name == "trash":
        draw.rectangle((X0 + r * 0.25, Y0 + r * 0.45, X1 - r * 0.25, Y1), fill=color)
        draw.rectangle((X0, Y0 + r * 0.2, X1, Y0 + r * 0.35), fill=color)
        draw.rectangle((cx - r * 0.3, Y0, cx + r * 0.3, Y0 + r * 0.25), fill=color)
        for fx in (-0.3, 0.0, 0.3):
            draw.line((cx + fx * r, Y0 + r * 0.7, cx + fx * r, Y1 - r * 0.2), fill=bg, width=max(1, lw // 2))
    elif name == "folder":
        draw.polygon([(X0, Y0 + r * 0.3), (X0 + r * 0.7, Y0 + r * 0.3), (X0 + r * 0.9, Y0 + r * 0.5),
                      (X1, Y0 + r * 0.5), (X1, Y1 - r * 0.2), (X0, Y1 - r * 0.2)], fill=color)  # fmt: skip
    elif name == "lock":
        draw.arc((cx - r * 0.55, Y0, cx + r * 0.55, cy + r * 0.3), 180, 360, fill=color, width=lw)
        draw.line((cx - r * 0.55 + lw / 2, Y0 + r * 0.55, cx - r * 0.55 + lw / 2, cy), fill=color, width=lw)
        draw.line((cx + r * 0.55 - lw / 2, Y0 + r * 0.55, cx + r * 0.55 - lw / 2, cy), fill=color, width=lw)
        draw.rectangle((X0 + r * 0.1, cy - r * 0.05, X1 - r * 0.1, Y1), fill=color)
        draw.ellipse((cx - r * 0.15, cy + r * 0.3, cx + r * 0.15, cy + r * 0.6), fill=bg)
    elif name == "play":
        draw.polygon([(X0 + r * 0.25, Y0), (X1, cy), (X0 + r * 0.25, Y1)], fill=color)
    elif name == "plus":
        t = r * 0.22
        draw.rectangle((cx - t, Y0, cx + t, Y1), fill=color)
        draw.rectangle((X0, cy - t, X1, cy + t), fill=color)
    elif name == "arrow":
        t = r * 0.2
        draw.rectangle((X0, cy - t, cx + r * 0.1, cy + t), fill=color)
        draw.polygon([(cx - r * 0.1, Y0 + r * 0.1), (X1, cy), (cx - r * 0.1, Y1 - r * 0.1)], fill=color)
    elif name == "home":
        draw.polygon([(X0, cy), (cx, Y0), (X1, cy)], fill=color)
        draw.rectangle((X0 + r * 0.3, cy - 0.5, X1 - r * 0.3, Y1), fill=color)
        draw.rectangle((cx - r * 0.18, cy + r * 0.35, cx + r * 0.18, Y1), fill=bg)
    elif name == "search":
        q = r * 0.62
        draw.ellipse((X0, Y0, X0 + 2 * q, Y0 + 2 * q), outline=color, width=lw)
        draw.line((X0 + 1.7 * q, Y0 + 1.7 * q, X1, Y1), fill=color, width=lw + 1)
    elif name == "close":
        draw.line((X0, Y0, X1, Y1), fill=color, width=lw + 1)
        draw.line((X0, Y1, X1, Y0), fill=color, width=lw + 1)
    elif name == "check":
        draw.line([(X0, cy), (cx - r * 0.25, Y1 - r * 0.2), (X1, Y0 + r * 0.2)], fill=color, width=lw + 1)
    elif name == "menu":
        t = max(1.0, r * 0.14)
        for fy in (-0.6, 0.0, 0.6):
            draw.rectangle((X0, cy + fy * r - t, X1, cy + fy * r + t), fill=color)
    else:
        raise ValueError(f"unknown glyph {name!r}; known: {', '.join(GLYPHS)}")
