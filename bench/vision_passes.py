"""Vision work per GRPO step (G = 8, one prompt per step), vlrl vs TRL's GRPOTrainer.

    .venv/bin/python bench/vision_passes.py          # ~2-3 min on 2 CPU cores

A forward hook on the vision tower (`model.model.visual`) counts its calls and the images / patches
each call encodes, and times them, per phase: rollout (generation), training forward, and backward
(activation recomputation with gradient checkpointing, seen on the blocks' attention / MLP
submodules). A wrapper
on the image / video processor's `preprocess` counts how often each image is preprocessed.

Inputs: photos-sized images (1920x1080, 2 MP; 2048x1536, 3 MP) that the processor scales down to its
max_pixels (448*448 for the tiny checkpoint), and a short video (8 frames of 640x480 as PIL images,
scaled by the video processor). TRL 1.16's GRPOTrainer takes images only (no video column), so the
video row is vlrl only. Same settings as bench/grpo_vs_trl.py (TRL defaults: gradient checkpointing on).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import torch  # noqa: E402

PHASES = ("rollout", "train_forward", "backward_recompute")


def _n_images(x) -> int:
    if x is None:
        return 0
    if isinstance(x, (list, tuple)):
        return sum(_n_images(v) for v in x)
    return 1


class VisionCounter:
    """Counts vision-tower calls / images / patches / seconds per phase, and processor work."""

    def __init__(self, model, processor):
        self.phase = "rollout"
        self._last_train = (0, 0)
        self.stats: dict[str, dict[str, float]] = {}
        visual = model.model.visual
        visual.register_forward_pre_hook(self._pre)
        visual.register_forward_hook(self._post, with_kwargs=True)
        # Checkpointed blocks re-run their `forward` (not `__call__`) in backward, so the blocks' own
        # hooks stay silent there; their submodules' hooks do fire.
        for i, block in enumerate(visual.blocks):
            for sub in (block.attn, block.mlp):
                sub.register_forward_pre_hook(self._block_pre)
                sub.register_forward_hook(self._make_block_post(count=(i == 0 and sub is block.attn)))
        for name in ("image_processor", "video_processor"):
            proc = getattr(processor, name, None)
            if proc is not None:
                self._wrap_preprocess(proc, name)

    def _in_backward(self) -> bool:
        return torch._C._current_graph_task_id() != -1

    def _bucket(self, phase):
        return self.stats.setdefault(phase, {"calls": 0, "images": 0, "patches": 0, "seconds": 0.0})

    def _pre(self, mod, args):
        self._t0 = time.perf_counter()

    def _post(self, mod, args, kwargs, out):
        grid = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        phase = "backward_recompute" if self._in_backward() else self.phase
        b = self._bucket(phase)
        b["calls"] += 1
        b["images"] += int(grid.shape[0])
        b["patches"] += int(grid.prod(-1).sum())
        b["seconds"] += time.perf_counter() - self._t0
        if phase == "train_forward":
            self._last_train = (int(grid.shape[0]), int(grid.prod(-1).sum()))

    def _block_pre(self, mod, args):
        if self._in_backward():
            self._tb = time.perf_counter()

    def _make_block_post(self, count: bool):
        def post(mod, args, out):
            if self._in_backward():  # activation checkpointing re-runs the blocks inside backward
                b = self._bucket("backward_recompute")
                if count:  # one re-run of the tower (its first block's attention), same batch as its forward
                    b["calls"] += 1
                    b["images"] += self._last_train[0]
                    b["patches"] += self._last_train[1]
                b["seconds"] += time.perf_counter() - self._tb

        return post

    def _wrap_preprocess(self, proc, name):
        inner = proc.preprocess

        def preprocess(images, *a, **k):
            t0 = time.perf_counter()
            try:
                return inner(images, *a, **k)
            finally:
                b = self.stats.setdefault("preprocess", {"calls": 0, "images": 0, "seconds": 0.0})
                b["calls"] += 1
                b["images"] += _n_images(images)
                b["seconds"] += time.perf_counter() - t0

        proc.preprocess = preprocess

    def take(self) -> dict:
        out, self.stats = self.stats, {}
        return out


def per_step(records: list[dict], warmup: int) -> dict:
    """Median over measured steps of each counter."""
    kept = records[warmup:]
    keys = {(p, k) for r in kept for p, d in r.items() for k in d}
    out: dict = {}
    for p, k in sorted(keys):
        out.setdefault(p, {})[k] = C.median(r.get(p, {}).get(k, 0) for r in kept)
    return out


def run_images(size: tuple[int, int], steps: int, warmup: int) -> dict:
    from transformers import TrainerCallback

    import trl_stack as T

    ours = C.vlrl_stack("dapo")
    ours_count = VisionCounter(ours.model, ours.processor)
    rec = {"trl": [], "vlrl": []}
    state = {}

    class Interleave(TrainerCallback):
        def on_step_end(self, args, st, control, **kw):
            rec["trl"].append({**trl_count.take(), "step": {"seconds": time.perf_counter() - state["mark"]}})
            timer = PhasedSplits(ours_count)
            t0 = time.perf_counter()
            C.vlrl_step(ours, lambda: C.SquareEnv(size), [instr.seed], timer)
            rec["vlrl"].append({**ours_count.take(), "step": {"seconds": time.perf_counter() - t0}})
            state["mark"] = time.perf_counter()

        def on_train_begin(self, args, st, control, **kw):
            state["mark"] = time.perf_counter()

    tr = T.trainer(size, list(range(2000, 2000 + steps + warmup)), "dapo", max_steps=steps + warmup,
                   callbacks=[Interleave()])
    instr = T.Instrument(tr)
    trl_count = VisionCounter(tr.model, tr.processing_class)
    orig_gen, orig_cl = tr._generate_and_score_completions, tr.compute_loss

    def gen(*a, **k):
        trl_count.phase = "rollout"
        return orig_gen(*a, **k)

    def cl(*a, **k):
        trl_count.phase = "train_forward"
        return orig_cl(*a, **k)

    tr._generate_and_score_completions, tr.compute_loss = gen, cl
    tr.train()
    return {"trl": per_step(rec["trl"], warmup), "vlrl": per_step(rec["vlrl"], warmup)}


class PhasedSplits(C.Splits):
    """Splits that also tell the counter which phase runs (rollout / training)."""

    def __init__(self, counter: VisionCounter):
        super().__init__()
        self.counter = counter

    @contextmanager
    def __call__(self, name: str):
        self.counter.phase = "rollout" if name == "rollout" else "train_forward"
        with super().__call__(name):
            yield


def run_video(frames: int, frame_size: tuple[int, int], steps: int, warmup: int) -> dict:
    ours = C.vlrl_stack("dapo")
    count = VisionCounter(ours.model, ours.processor)
    rec = []
    for i in range(steps + warmup):
        timer = PhasedSplits(count)
        t0 = time.perf_counter()
        C.vlrl_step(ours, lambda: C.SquareEnv(frame_size, video_frames=frames), [3000 + i], timer)
        rec.append({**count.take(), "step": {"seconds": time.perf_counter() - t0}})
    return {"vlrl": per_step(rec, warmup)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--frames", type=int, default=8)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    cases = {}
    for size in [(1920, 1080), (2048, 1536)]:
        cases[f"image {size[0]}x{size[1]}"] = run_images(size, args.steps, args.warmup)
        print(f"  done image {size} ({time.perf_counter() - t_start:.0f}s)", flush=True)
    cases[f"video {args.frames}x640x480"] = run_video(args.frames, (640, 480), args.steps, args.warmup)

    rows = []
    for case, sides in cases.items():
        for side in ("vlrl", "trl"):
            if side not in sides:
                rows.append([case, "TRL", "n/a: GRPOTrainer 1.16 has no video input", "", "", "", "", "", "", ""])
                continue
            s = sides[side]
            get = lambda p, k: s.get(p, {}).get(k, 0)
            rows.append([
                case, "vlrl" if side == "vlrl" else "TRL",
                f"{get('rollout', 'calls'):.0f} / {get('rollout', 'images'):.0f}",
                f"{get('train_forward', 'calls'):.0f} / {get('train_forward', 'images'):.0f}",
                f"{get('backward_recompute', 'calls'):.0f} / {get('backward_recompute', 'images'):.0f}",
                f"{sum(get(p, 'images') for p in PHASES):.0f}",
                f"{sum(get(p, 'patches') for p in PHASES):.0f}",
                round(get("rollout", "seconds") + get("train_forward", "seconds") + get("backward_recompute", "seconds"), 3),
                f"{get('preprocess', 'images'):.0f} ({get('preprocess', 'seconds'):.3f}s)",
                round(get("step", "seconds"), 3),
            ])
    print()
    print("Vision tower work per GRPO step (G=8, one prompt), median of measured steps")
    print(C.table(["input", "stack", "rollout calls / images", "train fwd calls / images", "bwd recompute calls / images",
                   "images encoded", "patches encoded", "vision fwd+recompute s", "preprocessed images|frames (s)", "step s"], rows))
    ratios = {}
    for case, sides in cases.items():
        if "trl" in sides:
            v, t = sides["vlrl"], sides["trl"]
            vs = sum(v.get(p, {}).get("seconds", 0) for p in PHASES)
            ts = sum(t.get(p, {}).get("seconds", 0) for p in PHASES)
            ratios[case] = {"vision_seconds_trl_over_vlrl": ts / vs if vs else None,
                            "step_trl_over_vlrl": t["step"]["seconds"] / v["step"]["seconds"]}
            print(f"{case}: vision-tower time TRL/vlrl = {ts / vs:.1f}x, step time TRL/vlrl = "
                  f"{ratios[case]['step_trl_over_vlrl']:.2f}x")
    target = all(
        sides["vlrl"].get("rollout", {}).get("images", 0) <= 1
        and sides["vlrl"].get("train_forward", {}).get("images", 0) <= 1
        for sides in cases.values()
    )
    print(f"target (vlrl: 1 vision pass per prompt in rollout and 1 in training): {'met' if target else 'MISSED'}")
    path = C.write_result("vision_passes", {"args": vars(args), "cases": cases, "ratios": ratios, "target_met": target,
                                            "wall_s": time.perf_counter() - t_start})
    print(f"wrote {path} ({time.perf_counter() - t_start:.0f}s)")
    return cases


if __name__ == "__main__":
    main()
