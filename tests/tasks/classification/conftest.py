"""Tiny datasets written to tmp dirs: the official CoOp few-shot layout and ImageFolder."""

import json
from pathlib import Path

import pytest
from PIL import Image

# label -> (folder / CoOp class name, colour); the names have underscores, as several CoOp datasets do
CLASSES = {0: ("red_square", (220, 40, 40)), 1: ("green_disc", (40, 180, 60)), 2: ("blue_bar", (40, 60, 220))}


def png(path: Path, colour, size=(40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def write_coop(root: Path, image_root: Path, per_split=None, name="split_zhou_Tiny.json", broken=True) -> dict:
    """A CoOp split file `root/name` ({train, val, test: [[relative path, label, classname], ...]}) and its
    PNGs under `image_root`. With `broken`, the test split also lists a corrupt file and a missing file."""
    per_split = per_split or {"train": 6, "val": 1, "test": 3}
    splits = {}
    for split, n in per_split.items():
        rows = []
        for label, (cname, colour) in CLASSES.items():
            for i in range(n):
                rel = f"{cname}/{split}_{i:03d}.png"
                png(image_root / rel, colour)
                rows.append([rel, label, cname])
        splits[split] = rows
    if broken:
        bad = image_root / "blue_bar" / "corrupt.png"
        bad.write_bytes(b"\x89PNG\r\n\x1a\n this is not an image")
        splits["test"] += [["blue_bar/corrupt.png", 2, "blue_bar"], ["red_square/missing.png", 0, "red_square"]]
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(json.dumps(splits))
    return splits


@pytest.fixture
def coop_dir(tmp_path):
    """The common case: split file and class folders side by side in data_dir."""
    root = tmp_path / "tiny_coop"
    write_coop(root, root)
    return root


@pytest.fixture
def imagefolder_dir(tmp_path):
    root = tmp_path / "tiny_folder"
    for split, n in (("train", 5), ("test", 2)):
        for label, (cname, colour) in CLASSES.items():
            for i in range(n):
                png(root / split / cname / f"{i}.png", colour)
    (root / "train" / "red_square" / "notes.txt").write_text("not an image")
    (root / "test" / "green_disc" / "broken.jpg").write_bytes(b"garbage")
    return root
