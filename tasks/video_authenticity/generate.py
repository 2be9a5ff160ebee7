"""The built-in clip set: real MuJoCo clips and their artifact-laden twins, as mp4 + JSONL manifests.

    python -m tasks.video_authenticity.generate --out data/video_auth --train 400 --held-out 500

Each scene seed gives one real clip and one fake clip of the same scene (artifact kind and level drawn
from the seed, kinds and levels balanced by cycling), so a split of n scenes holds 2n clips, half
real. Train scenes use seeds 0..n-1, held-out scenes HELD_OUT_BASE + 0..n-1: no scene is shared.
Files: OUT/clips/<split>/<seed>_{real,fake}.mp4 (MPEG-4, decord-readable) and OUT/<split>.jsonl in
the manifest format of manifest.py. Existing clips are kept (the cache): rerunning with more scenes
only renders the new ones, and OUT/meta.json refuses a folder made with other clip settings.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tasks.video_authenticity.artifacts import KINDS, LEVELS, fake_clip
from tasks.video_authenticity.scenes import sample_scene, simulate

HELD_OUT_BASE = 1_000_000
SPLITS = ("train", "held_out")


@dataclass(frozen=True)
class ClipSettings:
    frames: int = 16  # frames per clip
    fps: float = 8.0  # frames per second of the written file
    size: int = 64  # frame side in pixels (decord 0.6 misreads MPEG-4 16 or 48 pixels wide)
    version: int = 1  # bump when the scenes or artifacts change: cached clips are then refused


def scene_seed(split: str, index: int) -> int:
    """Seed of scene `index` of `split`: train 0.., held-out HELD_OUT_BASE.. (disjoint)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return index if split == "train" else HELD_OUT_BASE + index


def artifact_of(seed: int) -> tuple[str, int]:
    """(kind, level) of the fake clip of scene `seed`: every kind x level pair once per 30 seeds."""
    k = seed % (len(KINDS) * len(LEVELS))
    return KINDS[k % len(KINDS)], LEVELS[k // len(KINDS)]


def write_mp4(path: Path, frames: np.ndarray, fps: float) -> None:
    """frames [T, H, W, 3] uint8 -> an MPEG-4 file (high bit rate: small frames, artifacts kept visible)."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.mp4")
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream("mpeg4", rate=int(round(fps)))
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.bit_rate = 4_000_000
        for f in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    os.replace(tmp, path)  # a killed run never leaves a half-written clip under the final name


def scene_records(seed: int, split: str, settings: ClipSettings, out: Path) -> list[dict]:
    """Render (unless cached) the real and fake clips of scene `seed`; their manifest records."""
    kind, level = artifact_of(seed)
    rel_real, rel_fake = f"clips/{split}/{seed}_real.mp4", f"clips/{split}/{seed}_fake.mp4"
    if not (out / rel_real).exists() or not (out / rel_fake).exists():
        scene = sample_scene(seed)
        real = simulate(scene, settings.frames, settings.fps, settings.size, with_masks=kind == "boiling")
        fake, _ = fake_clip(scene, kind, level, np.random.default_rng([seed, 11]), real=real,
                            frames=settings.frames, fps=settings.fps, size=settings.size)
        write_mp4(out / rel_real, real.frames, settings.fps)
        write_mp4(out / rel_fake, fake, settings.fps)
    return [{"video": rel_real, "label": "real"},
            {"video": rel_fake, "label": "fake", "generator": kind, "level": level}]


def build(out: str | os.PathLike, split: str, scenes: int, settings: ClipSettings = ClipSettings(),
          log_every: int = 0) -> Path:
    """Make sure OUT/<split>.jsonl lists `scenes` scenes' clips (rendering the missing ones); its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "meta.json"
    meta = asdict(settings)
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        if old != meta:
            raise ValueError(f"{meta_path}: clips were made with {old}, not {meta}: use another folder")
    else:
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    manifest = out / f"{split}.jsonl"
    t0, records = time.perf_counter(), []
    for i in range(scenes):
        records.extend(scene_records(scene_seed(split, i), split, settings, out))
        if log_every and (i + 1) % log_every == 0:
            dt = time.perf_counter() - t0
            print(f"[generate] {split}: {i + 1}/{scenes} scenes, {2 * (i + 1) / dt:.2f} clips/s", flush=True)
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in records))
    os.replace(tmp, manifest)
    return manifest


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for clips/, train.jsonl, held_out.jsonl, meta.json")
    ap.add_argument("--train", type=int, default=400, help="training scenes (2 clips each)")
    ap.add_argument("--held-out", type=int, default=500, help="held-out scenes (2 clips each)")
    ap.add_argument("--frames", type=int, default=ClipSettings.frames, help="frames per clip")
    ap.add_argument("--fps", type=float, default=ClipSettings.fps, help="frames per second of the files")
    ap.add_argument("--size", type=int, default=ClipSettings.size, help="frame side in pixels")
    args = ap.parse_args(argv)
    settings = ClipSettings(args.frames, args.fps, args.size)
    for split, n in (("train", args.train), ("held_out", args.held_out)):
        t0 = time.perf_counter()
        path = build(args.out, split, n, settings, log_every=50)
        dt = time.perf_counter() - t0
        print(f"[generate] {path}: {2 * n} clips in {dt:.1f}s", flush=True)


if __name__ == "__main__":
    main()
