"""One-turn classification episodes: an image, a question with a candidate list, one answer scored by
rewards.classification (CLS-RL or No-Thinking-RL)."""

from __future__ import annotations

from PIL import Image

from rewards.classification import REASONS, score
from vlrl.episode import Observation, StepResult

from .config import Config
from .data import get_view
from .prompts import candidates, prompt_text


def fit_image(image: Image.Image, size: int) -> Image.Image:
    """Scale so the longer side is `size` pixels, aspect kept (0: unchanged). -> RGB image."""
    image = image.convert("RGB")
    if size <= 0 or max(image.size) == size:
        return image
    w, h = image.size
    scale = size / max(w, h)
    return image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.Resampling.BICUBIC)


class ClassificationEnv:
    """reset(seed) shows sample `seed` of the split (the same image and candidate list for the same seed);
    step(text) scores the answer and ends the episode. A missing or corrupt image raises OSError from
    reset, which vlrl's episode runner counts as a skipped sample."""

    def __init__(self, cfg: Config, split: str):
        self.cfg = cfg
        self.view = get_view(cfg, split)
        self.info: dict = {}

    def reset(self, seed: int) -> Observation:
        item = self.view.item(seed)
        rec = item.record
        image = fit_image(self.view.dataset.load(rec), self.cfg.image_size)
        cands = candidates(self.view.pools[item.group], rec.classname, seed)
        text = prompt_text(self.view.question, cands, self.cfg.mode)
        messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]
        self.info = {"label": rec.classname, "label_id": rec.label, "candidates": cands, "group": item.group,
                     "mode": self.cfg.mode, "lenient": self.cfg.lenient, "ref": str(rec.ref)}
        return Observation(messages=messages, images=[image], info=dict(self.info))

    def step(self, response_text: str) -> StepResult:
        return StepResult(None, *scored(response_text, self.info))


def scored(response_text: str, info: dict) -> tuple[dict, bool, bool, dict]:
    """(rewards, done, truncated, info) of one answer to the observation with `info`. Turn info carries the
    outcome flags, which the trainer logs as task/<name> means and reason/<reason> counts."""
    s = score(response_text, info["label"], info["mode"], info["candidates"], info["lenient"])
    rewards = {"accuracy": s["accuracy"]}
    if "format" in s:
        rewards["format"] = s["format"]
    flags = {r: float(s["reason"] == r) for r in REASONS}
    return rewards, True, False, {"reason": s["reason"], "correct": s["accuracy"], **flags}
