"""Shared helpers of the benchmarks: one-thread setup, the tiny checkpoint, a single-image task,
timing, RSS, tables and JSON results.

Import this module before torch (it sets OMP_NUM_THREADS=1 unless already set): the benchmark
machines are shared, and every number is a ratio of two stacks measured interleaved in one process.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import json
import platform
import random
import statistics
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from PIL import Image

from vlrl.episode import Observation, StepResult

warnings.filterwarnings("ignore")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

TINY = os.path.join(ROOT, "assets", "tiny-qwen2.5-vl")
RESULTS = os.path.join(ROOT, "bench", "results")
PROMPT = "What colour is the square? Answer with digits for red, letters for blue."
COLORS = {"red": (220, 30, 30), "blue": (30, 30, 220)}


# ----------------------------------------------------------------------------------------------
# The task: one image per prompt, a verifiable reward (same on both stacks)


def square_image(seed: int, size: int | tuple[int, int]) -> tuple[Image.Image, str]:
    """A grey canvas with one red or blue square; deterministic in `seed`."""
    w, h = (size, size) if isinstance(size, int) else size
    rng = random.Random(seed)
    color = rng.choice(sorted(COLORS))
    img = Image.new("RGB", (w, h), (128, 128, 128))
    side = max(4, min(w, h) // 4)
    x, y = rng.randrange(0, w - side), rng.randrange(0, h - side)
    img.paste(COLORS[color], (x, y, x + side, y + side))
    return img, color


def score(text: str, color: str) -> float:
    """Fraction of non-space characters that are digits (red) or letters (blue)."""
    chars = [c for c in text if not c.isspace()]
    want = str.isdigit if color == "red" else str.isalpha
    return sum(want(c) for c in chars) / len(chars) if chars else 0.0


def messages(with_image: bool = True, video: bool = False) -> list[dict]:
    content = [{"type": "video" if video else "image"}] if with_image else []
    return [{"role": "user", "content": content + [{"type": "text", "text": PROMPT}]}]


class SquareEnv:
    """vlrl env: one turn, the image of `seed`, the reward `score`."""

    def __init__(self, size, video_frames: int = 0):
        self.size, self.video_frames, self.color = size, video_frames, "red"

    def reset(self, seed: int) -> Observation:
        img, self.color = square_image(seed, self.size)
        if self.video_frames:
            frames = [square_image(seed * 1000 + k, self.size)[0] for k in range(self.video_frames)]
            return Observation(messages=messages(video=True), videos=[frames], video_fps=[2.0], info={"color": self.color})
        return Observation(messages=messages(), images=[img], info={"color": self.color})

    def step(self, response_text: str) -> StepResult:
        return StepResult(None, {"score": score(response_text, self.color)}, True)


# ----------------------------------------------------------------------------------------------
# vlrl: model, engine, one GRPO step


@dataclass
class VlrlStack:
    model: object
    processor: object
    engine: object
    optimizer: object
    scheduler: object
    algo: object
    trainer: object
    rollout: object


def vlrl_stack(loss_type: str = "dapo", group_size: int = 8, max_new_tokens: int = 32, lr: float = 1e-6,
               micro_batch_size: int = 64, max_pixels: int | None = None, shared_prefix: bool | None = None,
               **model_kw) -> VlrlStack:
    """`shared_prefix`: trainer.shared_prefix (None: the default, on), and the HF engine's one prefill per
    prompt for its G samples (off when False): False is the plain path, every row's whole sequence."""
    from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import make_engine
    from vlrl.trainer import make_optimizer, make_scheduler

    mcfg = ModelConfig(path=TINY, max_pixels=max_pixels, **model_kw)
    processor = load_processor(mcfg)
    model = load_model(mcfg, "cpu")
    algo = AlgoConfig(group_size=group_size, loss_type=loss_type, beta=0.0)
    trainer = TrainerConfig(lr=lr, micro_batch_size=micro_batch_size, prompts_per_step=1, progress=False,
                            shared_prefix=shared_prefix)
    rollout = RolloutConfig(max_new_tokens=max_new_tokens, temperature=1.0, top_p=1.0, top_k=0)
    optimizer = make_optimizer(model, trainer)
    scheduler = make_scheduler(optimizer, trainer, 10**6)
    engine = make_engine(rollout, model, processor)
    engine.share_prefill = shared_prefix is not False
    return VlrlStack(model, processor, engine, optimizer, scheduler, algo, trainer, rollout)


def vlrl_step(s: VlrlStack, make_env, seeds: list[int], timer: "Splits | None" = None) -> dict:
    """One GRPO step of our loop (vlrl/train.py): rollout -> advantages -> rows -> update."""
    from vlrl.rollout import run_episodes
    from vlrl.trainer import build_rows, episode_advantages, update

    timer = timer or Splits()
    with timer("rollout"):
        episodes = run_episodes(s.engine, make_env, seeds, s.algo.group_size)
    with timer("other"):
        adv = episode_advantages(episodes, s.algo)
        rows = build_rows(episodes, adv)
    with timer("train"):
        stats = update(s.model, s.processor, s.optimizer, s.scheduler, rows, s)  # s: algo, trainer, rollout
    with timer("other"):
        s.engine.sync_weights()
    stats["completion_tokens"] = sum(len(t.response_ids) for ep in episodes for t in ep.turns)
    stats["samples"] = len(episodes)
    return stats


# ----------------------------------------------------------------------------------------------
# Timing, memory, output


class Splits:
    """Accumulates wall time per named phase: `with splits("rollout"): ...`."""

    def __init__(self):
        self.t: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, dt: float) -> None:
        self.t[name] = self.t.get(name, 0.0) + dt

    def total(self) -> float:
        return sum(self.t.values())


def median(xs) -> float:
    xs = list(xs)
    return statistics.median(xs) if xs else float("nan")


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def peak_rss_mb() -> float:
    from vlrl.metrics import peak_rss_mb as _peak

    return _peak()


def machine() -> dict:
    import transformers

    info = {
        "cpu_cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "platform": platform.platform(),
        "cuda": torch.cuda.is_available(),
    }
    try:
        import trl

        info["trl"] = trl.__version__
    except ImportError:
        pass
    try:
        import psutil

        info["ram_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
        info["load_avg"] = [round(x, 2) for x in os.getloadavg()]
    except ImportError:
        pass
    return info


def table(headers: list[str], rows: list[list]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"
    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in cells]
    return "\n".join(out)


def write_result(name: str, payload: dict) -> str:
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    payload = {"benchmark": name, "machine": machine(), "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **payload}
    with open(path, "w") as f:
        json.dump(payload, f, indent=2, default=str)
    return path


# ----------------------------------------------------------------------------------------------
# Shared prefix (issue 32): sizes, and the training forward+backward on vs off


def parse_size(text: str) -> int | tuple[int, int]:
    """"448" -> 448 (square), "1920x1080" -> (1920, 1080)."""
    if "x" in text:
        w, h = text.split("x")
        return int(w), int(h)
    return int(text)


def label(size) -> str:
    return f"{size}x{size}" if isinstance(size, int) else f"{size[0]}x{size[1]}"


def fwd_bwd(size, repeats: int = 5) -> dict:
    """Training forward+backward on one group (G=8 rollouts of one prompt), shared prefix on vs off, and the
    vision tower's forward+backward alone (the same in both), medians of `repeats` alternating runs."""
    from vlrl.encoding import encode
    from vlrl.forward import Row, _vision_features, response_logprobs
    from vlrl.rollout import run_episodes

    s = vlrl_stack("dapo")
    episodes = run_episodes(s.engine, lambda: SquareEnv(size), [7], 8)
    rows = [Row(t.observation, t.response_ids) for ep in episodes for t in ep.turns]
    enc = encode(s.processor, rows[0].observation)
    times: dict[str, list[float]] = {"on": [], "off": [], "vision": []}
    for _ in range(repeats + 1):
        for name in ("off", "on", "vision"):
            t0 = time.perf_counter()
            if name == "vision":
                feats = _vision_features(s.model, [enc], "image")
                sum(f.sum() for f in feats[0]).backward()
            else:
                logp, mask = response_logprobs(s.model, s.processor, rows, 1.0, shared_prefix=name == "on")
                (logp * mask).sum().backward()
            s.model.zero_grad(set_to_none=True)
            times[name].append(time.perf_counter() - t0)
    m = {k: median(v[1:]) for k, v in times.items()}  # first round: warm-up
    return {"size": label(size), "prompt_tokens": len(enc.input_ids),
            "response_tokens_mean": sum(len(r.response_ids) for r in rows) / len(rows),
            "on_s": m["on"], "off_s": m["off"], "vision_fwd_bwd_s": m["vision"], "off_over_on": m["off"] / m["on"],
            "language_model_off_over_on": (m["off"] - m["vision"]) / max(m["on"] - m["vision"], 1e-9)}

