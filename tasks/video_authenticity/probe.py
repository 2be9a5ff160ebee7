"""Is the real-vs-generated signal in the clips at all, at a given decode budget? A check of the data, not of
the model: a logistic regression on ten hand-made temporal statistics per clip (frame-to-frame change, brightness
jumps, non-smooth motion), fitted on the training manifest and scored on the held-out one. If this probe is at chance
for an artifact kind, the tiny VLM failing on that kind says nothing about the training stack.

    python -m tasks.video_authenticity.probe --data DIR --out docs/results/video_authenticity/probe.json [--fps 4 ...]

`DIR` holds `train.jsonl` and `held_out.jsonl` (what `tasks.video_authenticity.generate` writes). The report has the
evaluation schema (`overall`, `count`, `skipped`, `breakdown` by label, generator and level) plus the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from tasks.video_authenticity.config import Config
from tasks.video_authenticity.decode import ClipLoader, DecodeSpec
from tasks.video_authenticity.manifest import load_clips, read_manifest
from vlrl.stats import accuracy_cell

FEATURES = ("mean_change", "std_change", "max_change", "mean_brightness_jump", "max_brightness_jump",
            "pixel_temporal_std", "mean_accel", "max_accel", "accel_peak_ratio", "change_peak_ratio")


def temporal_features(frames: np.ndarray) -> np.ndarray:
    """frames: [T, H, W, C] uint8 (T >= 3; the task's min_frames is 4) -> [len(FEATURES)] float64 statistics of how the clip changes in time."""
    f = frames.astype(np.float64) / 255.0
    change = np.abs(np.diff(f, axis=0)).mean(axis=(1, 2, 3))  # [T-1]
    jumps = np.abs(np.diff(f.mean(axis=(1, 2, 3))))  # [T-1] whole-frame brightness steps (flicker)
    accel = np.abs(np.diff(f, n=2, axis=0)).mean(axis=(1, 2, 3))  # [T-2] non-smooth motion
    eps = 1e-6
    return np.array([change.mean(), change.std(), change.max(), jumps.mean(), jumps.max(), f.std(axis=0).mean(),
                     accel.mean(), accel.max(), accel.max() / (accel.mean() + eps), change.max() / (change.mean() + eps)])


def load_split(path: str, loader: ClipLoader) -> tuple[list, dict]:
    """Decode every clip of a manifest -> ([(features, record)], skipped {"count", "reasons"}): unusable clips are
    counted with the loader's reasons, as in training and evaluation."""
    usable, _, skipped = load_clips(read_manifest(path), loader)
    return [(temporal_features(clip.frames), rec) for rec, clip in usable], skipped


def run(data: str, spec: DecodeSpec, seed: int = 0) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    t0 = time.perf_counter()
    with ClipLoader(spec) as loader:
        train, skipped_train = load_split(os.path.join(data, "train.jsonl"), loader)
        held, skipped = load_split(os.path.join(data, "held_out.jsonl"), loader)
    if not train or not held:
        raise SystemExit(f"{data}: no usable clips in train.jsonl or held_out.jsonl")
    x_train = np.stack([f for f, _ in train])
    y_train = np.array([r.label == "fake" for _, r in train])
    scaler = StandardScaler().fit(x_train)
    clf = LogisticRegression(max_iter=5000, random_state=seed).fit(scaler.transform(x_train), y_train)
    pred = clf.predict(scaler.transform(np.stack([f for f, _ in held])))
    hits = [bool(p == (r.label == "fake")) for p, (_, r) in zip(pred, held)]
    groups: dict[str, list] = {}
    for ok, (_, r) in zip(hits, held):
        groups.setdefault(f"label:{r.label}", []).append(ok)
        if r.label == "fake":
            groups.setdefault(f"generator:{r.generator}", []).append(ok)
            groups.setdefault(f"level:{r.level}", []).append(ok)
    overall = accuracy_cell(hits)
    return {"overall": overall["accuracy"], "count": len(hits), "skipped": skipped,
            "breakdown": {k: accuracy_cell(v) for k, v in sorted(groups.items())}, "stderr": overall["stderr"],
            "probe": "logistic regression on temporal_features (standardised)", "features": list(FEATURES),
            "train_clips": len(train), "train_skipped": skipped_train,
            "budget": {"fps": spec.fps, "max_frames": spec.max_frames, "max_pixels": spec.max_pixels,
                       "min_pixels": spec.min_pixels},
            "seed": seed, "wall_s": round(time.perf_counter() - t0, 1), "data": data}


def main(argv: list[str] | None = None) -> int:
    task = Config()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder with train.jsonl and held_out.jsonl")
    ap.add_argument("--out", required=True, help="report JSON to write")
    ap.add_argument("--fps", type=float, default=task.fps, help=f"frames sampled per second (task default {task.fps})")
    ap.add_argument("--max-frames", type=int, default=task.max_frames, help=f"task default {task.max_frames}")
    ap.add_argument("--max-pixels", type=int, default=task.max_pixels, help=f"task default {task.max_pixels}")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    spec = DecodeSpec(fps=args.fps, min_frames=task.min_frames, max_frames=args.max_frames,
                      max_pixels=args.max_pixels, min_pixels=task.min_pixels)
    report = run(args.data, spec, args.seed)
    report["command"] = ["python", "-m", "tasks.video_authenticity.probe", *(argv if argv is not None else sys.argv[1:])]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    cells = ", ".join(f"{k} {v['accuracy']:.0%}" for k, v in report["breakdown"].items())
    print(f"held-out accuracy {report['overall']:.1%} +- {report['stderr']:.1%} on {report['count']} clips "
          f"({report['skipped']['count']} skipped); {cells} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
