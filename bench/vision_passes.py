"""Vision and language-model work per GRPO step (G = 8, one prompt per step): vlrl with the shared prefix
on and off vs TRL's GRPOTrainer.

    .venv/bin/python bench/vision_passes.py          # ~4 min on 2 CPU cores

A forward hook on the vision tower (`model.model.visual`) counts its calls and the images / patches
each call encodes, and times them, per phase: rollout (generation), training forward, and backward
(activation recomputation with gradient checkpointing, seen on the blocks' attention / MLP
submodules). A wrapper
on the image / video processor's `preprocess` counts how often each image is preprocessed. A hook on the
language model's first decoder layer counts the tokens it processes per phase (rollout: prefill and decoding;
training forward): with the shared prefix (trainer.shared_prefix, one rollout prefill per prompt) each
prompt token goes through once per phase, without it once per sample.

Inputs: 112x112 and 448x448 images, photo-sized ones (1920x1080, 2 MP; 2048x1536, 3 MP) that the processor
scales down to its max_pixels (448*448 for the tiny checkpoint), and a short video (8 frames of 640x480 as PIL images,
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
        model.model.language_model.layers[0].register_forward_pre_hook(self._lm_tokens)

    def _lm_tokens(self, mod, args):
        if self._in_backward():  # a checkpointed recompute (not a new token)
            return
        b = self.stats.setdefault(f"lm_{self.phase}", {"tokens": 0})
        b["tokens"] += int(args[0].shape[0] * args[0].shape[1])

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

    stacks = {"vlrl": C.vlrl_stack("dapo"), "vlrl_off": C.vlrl_stack("dapo", shared_prefix=False)}
    counters = {side: VisionCounter(s.model, s.processor) for side, s in stacks.items()}
    rec = {"trl": [], "vlrl": [], "vlrl_off": []}
    state = {}

    class Interleave(TrainerCallback):
        def on_step_end(self, args, st, control, **kw):
            rec["trl"].append({**trl_count.take(), "step": {"seconds": time.perf_counter() - state["mark"]}})
            sides = ["vlrl", "vlrl_off"] if len(rec["trl"]) % 2 else ["vlrl_off", "vlrl"]  # alternate who goes first
            for side in sides:
                rec[side].append(_vlrl_step(stacks[side], counters[side], lambda: C.SquareEnv(size), instr.seed))
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
    return {side: per_step(r, warmup) for side, r in rec.items()}


def _vlrl_step(stack, counter: "VisionCounter", make_env, seed: int) -> dict:
    timer = PhasedSplits(counter)
    t0 = time.perf_counter()
    C.vlrl_step(stack, make_env, [seed], timer)
    return {**counter.take(), "step": {"seconds": time.perf_counter() - t0},
            "split": {k: timer.t.get(k, 0.0) for k in ("rollout", "train")}}


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
    stacks = {"vlrl": C.vlrl_stack("dapo"), "vlrl_off": C.vlrl_stack("dapo", shared_prefix=False)}
    counters = {side: VisionCounter(s.model, s.processor) for side, s in stacks.items()}
    rec = {"vlrl": [], "vlrl_off": []}
    for i in range(steps + warmup):
        for side in (["vlrl", "vlrl_off"] if i % 2 else ["vlrl_off", "vlrl"]):
            rec[side].append(_vlrl_step(stacks[side], counters[side],
                                        lambda: C.SquareEnv(frame_size, video_frames=frames), 3000 + i))
    return {side: per_step(r, warmup) for side, r in rec.items()}


SIDES = {"vlrl": "vlrl on", "vlrl_off": "vlrl off", "trl": "TRL"}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--frames", type=int, default=8)
    ap.add_argument("--sizes", type=C.parse_size, nargs="+", default=[112, 448, (1920, 1080), (2048, 1536)],
                    help="square side (448) or WxH (1920x1080)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    cases = {}
    for size in args.sizes:
        cases[f"image {C.label(size)}"] = run_images(size if isinstance(size, tuple) else (size, size), args.steps,
                                                     args.warmup)
        print(f"  done image {C.label(size)} ({time.perf_counter() - t_start:.0f}s)", flush=True)
    cases[f"video {args.frames}x640x480"] = run_video(args.frames, (640, 480), args.steps, args.warmup)

    rows = []
    for case, sides in cases.items():
        for side, name in SIDES.items():
            if side not in sides:
                rows.append([case, name, "n/a: GRPOTrainer 1.16 has no video input"] + [""] * 10)
                continue
            s = sides[side]
            get = lambda p, k: s.get(p, {}).get(k, 0)
            rows.append([
                case, name,
                f"{get('rollout', 'calls'):.0f} / {get('rollout', 'images'):.0f}",
                f"{get('train_forward', 'calls'):.0f} / {get('train_forward', 'images'):.0f}",
                f"{get('backward_recompute', 'calls'):.0f} / {get('backward_recompute', 'images'):.0f}",
                f"{sum(get(p, 'patches') for p in PHASES):.0f}",
                round(get("rollout", "seconds") + get("train_forward", "seconds") + get("backward_recompute", "seconds"), 3),
                f"{get('preprocess', 'images'):.0f} ({get('preprocess', 'seconds'):.3f}s)",
                f"{get('lm_rollout', 'tokens'):.0f}", f"{get('lm_train_forward', 'tokens'):.0f}",
                round(get("split", "rollout"), 3) if side != "trl" else "", round(get("split", "train"), 3) if side != "trl" else "",
                round(get("step", "seconds"), 3),
            ])
    print()
    print("Vision tower and language-model work per GRPO step (G=8, one prompt), median of measured steps; "
          "vlrl on/off: trainer.shared_prefix and one rollout prefill per prompt")
    print(C.table(["input", "stack", "rollout vision calls / images", "train fwd calls / images",
                   "bwd recompute calls / images", "patches encoded", "vision fwd+recompute s",
                   "preprocessed images|frames (s)", "LM tokens rollout", "LM tokens train fwd", "rollout s",
                   "train fwd+bwd s", "step s"], rows))
    ratios = {}
    for case, sides in cases.items():
        v, o = sides["vlrl"], sides["vlrl_off"]
        r = {"step_off_over_on": o["step"]["seconds"] / v["step"]["seconds"],
             "train_fwd_bwd_off_over_on": o["split"]["train"] / v["split"]["train"],
             "rollout_off_over_on": o["split"]["rollout"] / v["split"]["rollout"],
             "lm_train_tokens_off_over_on": o["lm_train_forward"]["tokens"] / v["lm_train_forward"]["tokens"]}
        if "trl" in sides:
            t = sides["trl"]
            vs = sum(v.get(p, {}).get("seconds", 0) for p in PHASES)
            ts = sum(t.get(p, {}).get("seconds", 0) for p in PHASES)
            r.update(vision_seconds_trl_over_vlrl=ts / vs if vs else None,
                     step_trl_over_vlrl=t["step"]["seconds"] / v["step"]["seconds"],
                     step_trl_over_vlrl_off=t["step"]["seconds"] / o["step"]["seconds"])
        ratios[case] = r
        print(f"{case}: " + ", ".join(f"{k} {x:.2f}x" for k, x in r.items() if x is not None))
    target = all(
        sides["vlrl"].get("rollout", {}).get("images", 0) <= 1
        and sides["vlrl"].get("train_forward", {}).get("images", 0) <= 1
        for sides in cases.values()
    )
    print(f"target (vlrl: 1 vision pass per prompt in rollout and 1 in training): {'met' if target else 'MISSED'}")
    path = C.write_result("vision_passes", {"args": {**vars(args), "sizes": [C.label(x) for x in args.sizes]},
                                            "cases": cases, "ratios": ratios, "target_met": target,
                                            "wall_s": time.perf_counter() - t_start})
    print(f"wrote {path} ({time.perf_counter() - t_start:.0f}s)")
    return cases


if __name__ == "__main__":
    main()
