"""GUI grounding rewards (GUI-G1 style): hit + IoU + box-coordinate terms.

The model answers a box ``[x1, y1, x2, y2]`` in absolute pixels of the image it sees (the
smart-resized "model frame"), as JSON: ``[{"bbox_2d": [x1, y1, x2, y2], "label": ...}]``, possibly
inside a ```json fence, after an optional ``<think>...</think>`` block. Also accepted: a bare object
``{"bbox_2d": [...]}``, a bare list of 4 numbers, and a point (``{"point_2d": [x, y]}`` or a bare
list of 2 numbers) for click evaluation. The first box (or point) found is used. That lenient reading is for
evaluation; training rewards can ask for the prompted format only (``strict=True``: the answer, after an optional
think block, is exactly a JSON list whose first object has ``bbox_2d`` with 4 numbers, optionally in a fence), so RL
never learns a format the prompt did not ask for. A box the lenient reader finds in another format then scores 0
with reason ``"format"``.

Raw terms (each in [0, 1]) and their default weights (max total 1.375):

* ``hit`` (weight 1): the predicted box centre lies inside the ground-truth box, bounds inclusive.
* ``iou`` (weight 0.25): intersection over union with continuous coordinates
  (area = (x2 - x1) * (y2 - y1), no "+1").
* ``box`` (weight 0.125): harmonic mean of the four coordinate scores
  ``s_x1 = 1 - |x1_gt - x1_pred| / W`` (``W`` for x, ``H`` for y, the model-frame size);
  defined as 0 when any score is <= 0.

Guards on model outputs (a defined reward plus a `reason`, never an exception):

* unparsable answer: reason ``"parse"``, all terms 0.
* NaN / inf coordinate: reason ``"nan"``, all terms 0.
* inverted box (x2 < x1 or y2 < y1): reason ``"inverted"``, all terms 0. We do not silently swap
  corners: a swapped box is a format error and rewarding it would make the output convention
  ambiguous for the policy.
* coordinates outside the image: the box is clipped to ``[0, W] x [0, H]`` and scored, reason
  ``"out_of_image"`` (this reason wins over ``"degenerate"`` when clipping flattens the box).
* zero-area box (x1 == x2 or y1 == y2): reason ``"degenerate"``; ``hit`` still counts when its
  centre (the point / segment centre) is inside the GT box, ``iou`` is 0, ``box`` is computed.
* a point answer given to `score`: reason ``"point"``; ``hit`` from the point, ``iou`` and ``box`` 0.

A degenerate or non-finite *ground truth* box raises ValueError: that is a data bug.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_WEIGHTS: dict[str, float] = {"hit": 1.0, "iou": 0.25, "box": 0.125}
TERMS = ("hit", "iou", "box")

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_KEYED = re.compile(r'"?(bbox_2d|point_2d)"?\s*:\s*\[([^\[\]]*)\]')
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:NaN|nan|Infinity|inf)"


def weighted_terms(raw: Mapping[str, float], weights: Mapping[str, float] | None = None,
                   terms: Iterable[str] = TERMS) -> dict[str, float]:
    """``{term: weight * raw[term]}`` for each of `terms`, `weights` merged over DEFAULT_WEIGHTS."""
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    return {t: w[t] * raw[t] for t in terms}


@dataclass
class Prediction:
    """A parsed answer: ``kind`` is "box" (4 values) or "point" (2 values)."""

    kind: str
    values: list[float]

    def center(self) -> tuple[float, float]:
        if self.kind == "point":
            return self.values[0], self.values[1]
        x1, y1, x2, y2 = self.values
        return (x1 + x2) / 2.0, (y1 + y2) / 2.0


@dataclass
class Evaluation:
    """Raw (unweighted) result of scoring one answer against one GT box, in the answer's frame."""

    hit: float = 0.0
    iou: float = 0.0
    box: float = 0.0
    reason: str | None = None
    pred: Prediction | None = None  # the parsed prediction after clipping (None if unusable)

    def weighted(self, weights: dict[str, float] | None = None, terms=TERMS) -> dict[str, float]:
        return weighted_terms({t: getattr(self, t) for t in TERMS}, weights, terms)


# ----------------------------------------------------------------------------------- parsing


def _answer_part(text: str) -> str:
    """The text after the last ``</think>`` (the whole text when there is none)."""
    if "</think>" in text:
        return text.rsplit("</think>", 1)[1]
    return text


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _floats(values) -> list[float]:
    """float() of JSON numbers; integers too large for a float become inf (then reason "nan")."""
    out = []
    for v in values:
        try:
            out.append(float(v))
        except OverflowError:
            out.append(math.inf if v > 0 else -math.inf)
    return out


def _from_json(obj: Any) -> Prediction | None:
    """Find the first box / point in a decoded JSON value."""
    if isinstance(obj, dict):
        for key, kind, n in (("bbox_2d", "box", 4), ("point_2d", "point", 2)):
            v = obj.get(key)
            if isinstance(v, list) and len(v) == n and all(_is_number(x) for x in v):
                return Prediction(kind, _floats(v))
        return None
    if isinstance(obj, list):
        if obj and all(_is_number(x) for x in obj):
            if len(obj) == 4:
                return Prediction("box", _floats(obj))
            if len(obj) == 2:
                return Prediction("point", _floats(obj))
            return None
        for item in obj:
            found = _from_json(item)
            if found is not None:
                return found
    return None


def _first_prediction(text: str) -> Prediction | None:
    """The first box / point in a JSON array / object starting somewhere in `text` (None if none)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "[{":
            try:
                value, _ = decoder.raw_decode(text, i)
            except ValueError:
                continue
            found = _from_json(value)
            if found is not None:
                return found
    return None


def parse_prediction(text: str) -> Prediction | None:
    """Parse the first box or point from a model answer; None when there is none."""
    if not isinstance(text, str):
        return None
    answer = _answer_part(text)
    candidates = [m.group(1) for m in _FENCE.finditer(answer)] + [answer]
    for cand in candidates:
        found = _first_prediction(cand)
        if found is not None:
            return found
    # Lenient fallback for truncated / slightly broken JSON: `"bbox_2d": [..]` anywhere.
    m = _KEYED.search(answer)
    if m:
        nums = re.findall(_NUM, m.group(2))
        kind, n = ("box", 4) if m.group(1) == "bbox_2d" else ("point", 2)
        if len(nums) == n:
            return Prediction(kind, [float(x) for x in nums])
    return None


def parse_strict(text: str, think: bool = False) -> Prediction | None:
    """The box of an answer in the prompted format only: ``[{"bbox_2d": [x1, y1, x2, y2], ...}, ...]`` (first
    object's box) as the whole answer, optionally inside one ```json fence; with `think`, after a
    ``<think>...</think>`` block. None for anything else (another key, a bare list, a point, extra text)."""
    if not isinstance(text, str) or (think and "</think>" not in text):
        return None
    answer = _answer_part(text).strip()
    fenced = _FENCE.fullmatch(answer)
    try:
        value = json.loads(fenced.group(1) if fenced else answer)
    except ValueError:
        return None
    first = value[0] if isinstance(value, list) and value else None
    box = first.get("bbox_2d") if isinstance(first, dict) else None
    if isinstance(box, list) and len(box) == 4 and all(_is_number(x) for x in box):
        return Prediction("box", _floats(box))
    return None


def parse_box(text: str) -> list[float] | None:
    """The first ``[x1, y1, x2, y2]`` box in a model answer, or None (points are not boxes)."""
    p = parse_prediction(text)
    return p.values if p is not None and p.kind == "box" else None


def parse_point(text: str) -> list[float] | None:
    """The click point of an answer: a ``point_2d`` / 2-number list, or the centre of a box."""
    p = parse_prediction(text)
    return None if p is None else list(p.center())


# ----------------------------------------------------------------------------------- geometry


def check_gt_box(gt_box, image_size=None) -> list[float]:
    """Validate a ground-truth box; raise ValueError (data bug) when it is unusable."""
    if gt_box is None or len(gt_box) != 4:
        raise ValueError(f"gt_box must be [x1, y1, x2, y2], got {gt_box!r}")
    g = [float(v) for v in gt_box]
    if not all(math.isfinite(v) for v in g):
        raise ValueError(f"gt_box has a non-finite coordinate: {gt_box!r}")
    if g[2] <= g[0] or g[3] <= g[1]:
        raise ValueError(f"gt_box is degenerate or inverted (needs x2 > x1 and y2 > y1): {gt_box!r}")
    if image_size is not None:
        w, h = image_size
        if not (w > 0 and h > 0):
            raise ValueError(f"image_size must be positive (W, H), got {image_size!r}")
    return g


def point_in_box(x: float, y: float, box) -> bool:
    """Inclusive point-in-box test."""
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def box_area(box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def iou(a, b) -> float:
    """IoU with continuous coordinates (no +1); 0 when the union is empty."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(0.0, iw) * max(0.0, ih)
    union = box_area(a) + box_area(b) - inter
    return inter / union if union > 0 else 0.0


def box_score(pred, gt, image_size) -> float:
    """Harmonic mean of the four per-coordinate scores 1 - |d| / W (or H); 0 if any score <= 0."""
    w, h = image_size
    scale = (w, h, w, h)
    scores = [1.0 - abs(g - p) / s for p, g, s in zip(pred, gt, scale)]
    if any(s <= 0 for s in scores):
        return 0.0
    return len(scores) / sum(1.0 / s for s in scores)


# ----------------------------------------------------------------------------------- scoring


def evaluate_prediction(pred: Prediction | None, gt_box, image_size) -> Evaluation:
    """Raw terms of one parsed prediction (see the module docstring for the guards)."""
    gt = check_gt_box(gt_box, image_size)
    w, h = float(image_size[0]), float(image_size[1])
    if pred is None:
        return Evaluation(reason="parse")
    if not all(math.isfinite(v) for v in pred.values):
        return Evaluation(reason="nan")
    reason = None
    if pred.kind == "point":
        x, y = pred.values
        if not (0 <= x <= w and 0 <= y <= h):
            x, y, reason = min(max(x, 0.0), w), min(max(y, 0.0), h), "out_of_image"
        p = Prediction("point", [x, y])
        return Evaluation(hit=float(point_in_box(x, y, gt)), reason=reason or "point", pred=p)
    x1, y1, x2, y2 = pred.values
    if x2 < x1 or y2 < y1:
        return Evaluation(reason="inverted")
    clipped = [min(max(x1, 0.0), w), min(max(y1, 0.0), h), min(max(x2, 0.0), w), min(max(y2, 0.0), h)]
    if clipped != [x1, y1, x2, y2]:
        reason = "out_of_image"
    p = Prediction("box", clipped)
    cx, cy = p.center()
    hit = float(point_in_box(cx, cy, gt))
    degenerate = clipped[2] == clipped[0] or clipped[3] == clipped[1]
    if degenerate:
        reason = reason or "degenerate"
    overlap = 0.0 if degenerate else iou(clipped, gt)
    return Evaluation(hit=hit, iou=overlap, box=box_score(clipped, gt, (w, h)), reason=reason, pred=p)


def evaluate(completion: str, gt_box, image_size, strict: bool = False, think: bool = False) -> Evaluation:
    """Parse `completion` and compute the raw terms against `gt_box` in a (W, H) frame. `strict`: only the
    prompted format counts (`parse_strict`; `think`: a think block is required); a box readable only leniently
    scores 0 with reason "format"."""
    if not strict:
        return evaluate_prediction(parse_prediction(completion), gt_box, image_size)
    pred = parse_strict(completion, think)
    if pred is None and parse_prediction(completion) is not None:
        check_gt_box(gt_box, image_size)
        return Evaluation(reason="format")
    return evaluate_prediction(pred, gt_box, image_size)


def score(
    completion: str,
    gt_box,
    image_size,
    weights: dict[str, float] | None = None,
    terms=TERMS,
    strict: bool = False,
) -> dict[str, Any]:
    """Weighted GUI-G1 rewards for one answer.

    Args:
        completion: the model's text answer.
        gt_box: ground truth ``[x1, y1, x2, y2]`` in the same frame as the answer (model frame).
        image_size: ``(W, H)`` of that frame.
        weights: per-term weights, merged over DEFAULT_WEIGHTS (hit 1, iou 0.25, box 0.125).
        terms: which terms to return (others are omitted).
        strict: score only the prompted format (see `evaluate`).

    Returns:
        ``{"hit": w*hit, "iou": w*iou, "box": w*box, "reason": str | None}``.
    """
    ev = evaluate(completion, gt_box, image_size, strict=strict)
    out: dict[str, Any] = ev.weighted(weights, terms)
    out["reason"] = ev.reason
    return out


def click_hit(completion: str, gt_box) -> float:
    """Click accuracy of one answer: 1.0 when the point (or box centre) is inside `gt_box`."""
    p = parse_prediction(completion)
    if p is None or not all(math.isfinite(v) for v in p.values):
        return 0.0
    if p.kind == "box" and (p.values[2] < p.values[0] or p.values[3] < p.values[1]):
        return 0.0  # inverted: same rule as `score`
    x, y = p.center()
    return float(point_in_box(x, y, gt_box))
