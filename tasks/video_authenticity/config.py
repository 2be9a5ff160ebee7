"""Typed config of the video authenticity task (merged by the core with configs/task/video_authenticity.yaml)."""

from __future__ import annotations

from dataclasses import dataclass

from tasks.video_authenticity.decode import DecodeSpec
from vlrl.config import opt

REWARDS = ("plain", "ta", "q")
FACTOR = 28  # Qwen2.5-VL: patch 14 x spatial merge 2
TEMPORAL_PATCH = 2


def _check(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"invalid config value for 'task.{name}': {msg}")


@dataclass
class Config:
    name: str = opt("video_authenticity", "task name in logs and reports")
    module: str = opt("tasks.video_authenticity", "where the task lives")
    reward: str = opt("plain", "plain (binary A/B question: accuracy + format) | ta (plain + GRPO-TA: ta_samples extra "
                               "rollouts on a temporally perturbed copy, labelled fake, not trained on; bonus when "
                               "the group is >= 75% right and every perturbed rollout is right) | q (GRPO-Q: A-E "
                               "artifact levels 1-5, F real; graded complexity reward)")
    ta_samples: int = opt(4, "ta: rollouts on the perturbed copy per clip (VidGuard-R1: G/2)")
    length_control: bool = opt(True, "when more than one sample of a group is correct, the correct ones whose "
                                      "response length is within [length_lo, length_hi] tokens get +length_bonus")
    length_lo: int = opt(8, "length control: shortest rewarded response, tokens (VidGuard-R1: 320; scaled to the tiny model)")
    length_hi: int = opt(48, "length control: longest rewarded response, tokens (VidGuard-R1: 512)")
    length_bonus: float = opt(0.2, "length control: the bonus (VidGuard-R1: 0.2)")
    manifest: str | None = opt(None, "evaluation clips: a JSONL manifest ({video, label, generator?, level?} per line, "
                                     "paths relative to it); null = the built-in held-out set in data_dir")
    train_manifest: str | None = opt(None, "training clips: a JSONL manifest; null = the built-in train set in data_dir")
    data_dir: str = opt("outputs/video_authenticity", "built-in clips: rendered here on first use and reused "
                                                       "(relative paths: from the working directory)")
    train_scenes: int = opt(600, "built-in train split: scenes (one real + one fake clip each)")
    held_out_scenes: int = opt(500, "built-in held-out split: scenes (2 clips each: 500 -> 1,000 clips)")
    clip_frames: int = opt(16, "built-in clips: frames per file")
    clip_fps: float = opt(8.0, "built-in clips: frames per second of the file")
    clip_size: int = opt(64, "built-in clips: frame side in pixels")
    fps: float = opt(4.0, "frames sampled per second of video (VidGuard-R1: 2)")
    min_frames: int = opt(4, "clips giving fewer sampled frames are skipped as too_short (VidGuard-R1: 4)")
    max_frames: int = opt(8, "at most this many frames per clip (VidGuard-R1: 16)")
    max_pixels: int = opt(56 * 56, "pixels per frame after resizing, at most (VidGuard-R1: 128*28*28)")
    min_pixels: int = opt(28 * 28, "pixels per frame after resizing, at least")
    max_video_tokens: int = opt(64, "video tokens per clip the budget above may produce, at most: a budget that could "
                                     "exceed it is refused at start")
    decode_timeout_s: float = opt(30.0, "a clip whose decode takes longer is skipped (reason 'timeout'), never a hang")
    cache_mb: int = opt(1024, "decoded frames kept in memory (each clip is decoded once per process)")

    def __post_init__(self):
        _check(self.reward in REWARDS, "reward", f"{self.reward!r} is not one of {list(REWARDS)}")
        _check(self.ta_samples >= 1, "ta_samples", "must be >= 1")
        _check(self.reward == "ta" or self.ta_samples == 4, "ta_samples", "only used with reward=ta")
        _check(0 <= self.length_lo <= self.length_hi, "length_lo", f"need 0 <= length_lo <= length_hi ({self.length_hi})")
        _check(self.length_bonus >= 0, "length_bonus", "must be >= 0")
        for f in ("train_scenes", "held_out_scenes", "clip_frames", "clip_size"):
            _check(getattr(self, f) >= 1, f, "must be >= 1")
        _check(self.clip_fps > 0, "clip_fps", "must be > 0")
        _check(self.fps > 0, "fps", "must be > 0")
        _check(self.min_frames >= TEMPORAL_PATCH, "min_frames", f"must be >= {TEMPORAL_PATCH}")
        _check(self.max_frames >= self.min_frames, "max_frames", f"must be >= min_frames ({self.min_frames})")
        _check(self.min_pixels >= FACTOR**2, "min_pixels", f"must be >= {FACTOR ** 2} (one 28x28 patch)")
        _check(self.max_pixels >= self.min_pixels, "max_pixels", f"must be >= min_pixels ({self.min_pixels})")
        _check(self.decode_timeout_s > 0, "decode_timeout_s", "must be > 0")
        _check(self.cache_mb >= 0, "cache_mb", "must be >= 0")
        worst = video_tokens(self.max_frames, self.max_pixels)
        _check(worst <= self.max_video_tokens, "max_video_tokens",
               f"{self.max_video_tokens} is below what max_frames={self.max_frames} x max_pixels={self.max_pixels} "
               f"can produce ({worst}): lower those or raise this")

    def spec(self) -> DecodeSpec:
        """The decode budget (frames, fps, pixels) of this config."""
        return DecodeSpec(fps=self.fps, min_frames=self.min_frames, max_frames=self.max_frames,
                          max_pixels=self.max_pixels, min_pixels=self.min_pixels, factor=FACTOR)


def video_tokens(frames: int, pixels: int) -> int:
    """Upper bound of a clip's video tokens: frame pairs x (pixels / 28^2) merged patches."""
    return -(-frames // TEMPORAL_PATCH) * (pixels // FACTOR**2)
