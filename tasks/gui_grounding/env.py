"""Single-turn grounding env over synthetic screens (or a JSONL), scored with GUI-G1 rewards.

Frames: the observation image is the screen resized *by us* to its exact model frame (smart_resize
with the task's min/max pixels), so the processor does not resize it again (smart_resize is the
identity on such a size when the processor uses the same bounds: `Observation.processor_kwargs`). The
model answers in that frame; `iou` and `box` are computed there. `hit` (click accuracy) is
measured in original pixels: the predicted centre is mapped back and tested against the original
GT box (mathematically the same test, since the mapping is a per-axis scaling).
"""

from __future__ import annotations

from typing import Any

from rewards.gui import box_area, evaluate, point_in_box, weighted_terms
from vlrl.episode import Observation, StepResult

from .coords import box_to_model, images_kwargs, model_frame_size, point_to_original
from .data import make_source
from .difficulty import area_weighting
from .generator import hash64
from .prompts import build_messages, describe_messages


def analyse_answer(text: str, info: dict, big_box_fraction: float = 0.25, strict: bool = False,
                   think: bool = False) -> dict[str, Any]:
    """Raw scores and diagnostics of one answer given an observation's `info`; `strict` (training): only the
    prompted format scores (rewards.gui.evaluate; `think`: the think prompt's block required).

    Returns hit (original-frame click), iou, box, area_ratio (pred / GT area, model frame; 0
    without a usable box), big_box (1 if the box covers > `big_box_fraction` of the screen),
    reason, and pred (the clipped prediction in the model frame, or None).
    """
    size = info["image_size"]
    ev = evaluate(text, info["gt_box"], size, strict=strict, think=think)
    hit = 0.0
    area_ratio = big = 0.0
    if ev.pred is not None:
        cx, cy = point_to_original(ev.pred.center(), size, info["orig_size"])
        hit = float(point_in_box(cx, cy, info["gt_box_orig"]))
        if ev.pred.kind == "box":
            area = box_area(ev.pred.values)
            area_ratio = area / box_area(info["gt_box"])
            big = float(area > big_box_fraction * size[0] * size[1])
    return {"hit": hit, "iou": ev.iou, "box": ev.box, "area_ratio": area_ratio, "big_box": big,
            "reason": ev.reason, "pred": ev.pred}  # fmt: skip


def grounding_step(text: str, info: dict, cfg, strict: bool = False) -> StepResult:
    """Score one answer: weighted `rewards` for the selected terms, numeric `info` + `reason`; `strict`: only the
    prompted format scores (training; `cfg.prompt == "think"` then needs the think block)."""
    a = analyse_answer(text, info, cfg.big_box_fraction, strict=strict, think=cfg.prompt == "think")
    rewards = weighted_terms(a, dict(cfg.reward_weights), cfg.reward_terms)
    diag = {k: a[k] for k in ("hit", "iou", "area_ratio", "big_box", "reason")}
    return StepResult(observation=None, rewards=rewards, done=True, info=diag)


def grounding_observation(image, instruction: str, bbox, cfg, extra: dict) -> Observation:
    """Observation for one example: image resized to its model frame, GT mapped into it."""
    image = image.convert("RGB")
    orig = image.size
    frame = model_frame_size(orig, cfg.min_pixels, cfg.max_pixels)
    if frame != orig:
        # Resize here, to the exact frame the model answers in; the processor then leaves it as is.
        from PIL import Image

        image = image.resize(frame, Image.Resampling.BICUBIC)
    info = {
        "gt_box": box_to_model(bbox, orig, frame), "gt_box_orig": [float(v) for v in bbox],
        "image_size": list(frame), "orig_size": list(orig), "instruction": instruction,
        **extra,
    }  # fmt: skip
    return Observation(messages=build_messages(instruction, cfg.prompt, cfg.image_first), images=[image], info=info,
                       processor_kwargs={"images_kwargs": images_kwargs(cfg.min_pixels, cfg.max_pixels)})


def as_reading_example(obs: Observation, image_first: bool) -> Observation:
    """Turn a synthetic screen's observation into a reading example, in place: the same screen, the
    question inverted (the target's box -> its name, ``info["describe"]``). Only supervised training
    and `experiment read` use them; `GroundingEnv.step` refuses to score one."""
    obs.messages = describe_messages(obs.info["gt_box"], image_first)
    obs.info["describe"] = obs.info["metadata"]["target_name"]
    return obs


def _reads(seed: int, prob: float) -> bool:
    """Whether training example `seed` is a reading example: a hash of the seed below `prob`."""
    if prob <= 0.0:
        return False
    return hash64(f"describe:{int(seed)}") / 2**64 < prob


class GroundingEnv:
    """reset(seed) -> the seed-th example of the split; step(answer) -> GUI-G1 rewards, done."""

    def __init__(self, cfg, split: str):
        self.cfg, self.split = cfg, split
        self.source = make_source(cfg, split)
        self.weighting = area_weighting(cfg)
        self.info: dict | None = None
        self.read_prob = cfg.describe_prob if split == "train" else 0.0
        self.read_source = self.source
        if self.read_prob > 0 and cfg.describe_n_widgets is not None:
            self.read_source = make_source(cfg, split)
            self.read_source.kwargs["n_widgets"] = tuple(cfg.describe_n_widgets)

    def reset(self, seed: int) -> Observation:
        reading = _reads(seed, self.read_prob)
        ex = (self.read_source if reading else self.source).get(int(seed))
        rel = ex.metadata.get("target_rel_area")
        if rel is None:
            x1, y1, x2, y2 = ex.bbox
            rel = (x2 - x1) * (y2 - y1) / (ex.image.size[0] * ex.image.size[1])
        weight = 1.0 if self.weighting is None else self.weighting(rel)
        extra = {"sample_weight": weight, "target_rel_area": rel, "metadata": ex.metadata, "split": self.split}
        obs = grounding_observation(ex.image, ex.instruction, ex.bbox, self.cfg, extra)
        if reading:
            as_reading_example(obs, self.cfg.image_first)
        self.info = obs.info
        return obs

    def step(self, response_text: str) -> StepResult:
        if self.info is None:
            raise RuntimeError("step() called before reset()")
        if "describe" in self.info:
            raise RuntimeError("reading examples (describe_prob > 0) are for the supervised warm start only; set "
                               "task.describe_prob=0 for RL")
        # Training rewards score only the prompted format (task.train_format); evaluation reads any box.
        strict = self.split == "train" and self.cfg.train_format == "strict"
        return grounding_step(response_text, self.info, self.cfg, strict=strict)
