"""Dataset readers: the CoOp few-shot layout, ImageFolder, a local HF `datasets` folder, scikit-learn's digits.

Each returns a `Dataset`: class names (index = label), records per split ("train", "val", "test"), and a
loader that turns a record into a PIL image, raising OSError (missing / unreadable file) or ValueError
(bad content) so that vlrl's episode runner skips and counts the sample instead of stopping the run.
Class names have underscores read as spaces (as CoOp does when it builds its prompts).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from PIL import Image

from .prompts import DEFAULT_QUESTION

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm"}
SPLITS = ("train", "val", "test")
DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


@dataclass(frozen=True)
class Record:
    """One labelled image: `ref` is a file path, or an index / key the dataset's loader understands."""

    label: int
    classname: str
    ref: str | int


@dataclass(eq=False)
class Dataset:
    """Read-only after construction; shared (not copied) by the envs of a group."""

    name: str
    classnames: list[str]
    splits: dict[str, list[Record]]
    loader: Callable[[Record], Image.Image]
    question: str = DEFAULT_QUESTION
    notes: dict = field(default_factory=dict)

    def load(self, record: Record) -> Image.Image:
        return self.loader(record)

    def __deepcopy__(self, memo):  # run_episodes copies envs per group: the data is immutable, share it
        return self


def display_name(name: str) -> str:
    return name.replace("_", " ").strip()


def open_image(path: str | Path) -> Image.Image:
    """An RGB image from disk; missing -> FileNotFoundError, unreadable / truncated -> OSError (both counted)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"missing image: {path}")
    try:
        with Image.open(path) as im:
            im.load()
            return im.convert("RGB")
    except (OSError, ValueError, SyntaxError) as e:  # PIL raises all three on damaged files
        raise OSError(f"corrupt image: {path} ({type(e).__name__}: {e})") from None


# ---- CoOp few-shot layout ----

def find_split_file(data_dir: str | Path, split_file: str | None, field_name: str = "task.split_file") -> Path:
    """The split JSON: `split_file` in data_dir, else the only split_*.json there."""
    data_dir = Path(data_dir)
    if split_file:
        path = data_dir / split_file
        if not path.is_file():
            raise ValueError(f"invalid config value for '{field_name}': no {path}")
        return path
    found = sorted(data_dir.glob("split_*.json"))
    if len(found) != 1:
        raise ValueError(f"invalid config value for '{field_name}': {len(found)} split_*.json files in {data_dir} "
                         f"({[p.name for p in found]}); name one")
    return found[0]


def parse_coop_split(obj, where: str) -> dict[str, list[tuple[str, int, str]]]:
    """Validate the split JSON {train|val|test: [[relative path, label int, classname], ...]}."""
    if not isinstance(obj, dict) or not {"train", "test"} <= set(obj):
        raise ValueError(f"{where}: expected an object with keys train, val, test")
    out = {}
    for split in SPLITS:
        rows = obj.get(split, [])
        if not isinstance(rows, list):
            raise ValueError(f"{where}: '{split}' must be a list")
        for i, row in enumerate(rows):
            ok = (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str) and isinstance(row[2], str)
                  and isinstance(row[1], int) and not isinstance(row[1], bool) and row[1] >= 0)
            if not ok:
                raise ValueError(f"{where}: {split}[{i}] = {row!r} is not [relative path, label int >= 0, classname]")
        out[split] = [tuple(r) for r in rows]
    return out


def class_table(rows: list[tuple[str, int, str]], where: str) -> list[str]:
    """Class names by label from (path, label, name) rows; one name per label and one label per name."""
    by_label: dict[int, str] = {}
    for _, label, name in rows:
        if by_label.setdefault(label, name) != name:
            raise ValueError(f"{where}: label {label} is named both {by_label[label]!r} and {name!r}")
    names = [display_name(by_label[k]) for k in sorted(by_label)]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: two labels share a class name")
    return names


def resolve_image_root(data_dir: Path, image_dir: str | None, rel_paths: list[str]) -> Path:
    """image_dir when set; else whichever of data_dir, data_dir/images holds more of the first images."""
    if image_dir:
        return Path(image_dir)
    probe = rel_paths[:20]
    roots = [data_dir, data_dir / "images"]
    hits = [sum((root / p).is_file() for p in probe) for root in roots]
    return roots[1] if hits[1] > hits[0] else roots[0]


def read_coop(data_dir: str, image_dir: str | None = None, split_file: str | None = None,
              prefix: str = "") -> Dataset:
    path = find_split_file(data_dir, split_file, f"task.{prefix}split_file")
    try:
        obj = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not readable JSON ({e})") from None
    splits = parse_coop_split(obj, str(path))
    rows = [r for split in SPLITS for r in splits[split]]
    names = class_table(rows, str(path))
    labels = sorted({r[1] for r in rows})
    index = {lab: i for i, lab in enumerate(labels)}  # labels need not be 0..n-1
    root = resolve_image_root(Path(data_dir), image_dir, [r[0] for r in rows])
    records = {split: [Record(index[lab], names[index[lab]], str(root / rel)) for rel, lab, _ in splits[split]]
               for split in SPLITS}
    return Dataset(path.stem.removeprefix("split_"), names, records, lambda r: open_image(r.ref),
                   notes={"split_file": str(path), "image_root": str(root)})


# ---- ImageFolder ----

def read_imagefolder(data_dir: str) -> Dataset:
    """data_dir/{train,val,test}/<class>/<image>; class names: the union of folder names, sorted."""
    root = Path(data_dir)
    present = [s for s in SPLITS if (root / s).is_dir()]
    if "train" not in present or "test" not in present:
        raise ValueError(f"invalid config value for 'task.data_dir': {root} needs train/ and test/ class folders")
    folders = sorted({d.name for s in present for d in (root / s).iterdir() if d.is_dir() and not d.name.startswith(".")})
    names = [display_name(f) for f in folders]
    if len(set(names)) != len(names):
        raise ValueError(f"{root}: two class folders have the same name once '_' is read as a space")
    records: dict[str, list[Record]] = {s: [] for s in SPLITS}
    for split in present:
        for label, folder in enumerate(folders):
            d = root / split / folder
            files = sorted(p for p in d.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES) if d.is_dir() else []
            records[split] += [Record(label, names[label], str(p)) for p in files if not p.name.startswith(".")]
    return Dataset(root.name, names, records, lambda r: open_image(r.ref))


# ---- HF datasets (save_to_disk) ----

def read_hf(data_dir: str) -> Dataset:
    """A DatasetDict saved with save_to_disk: splits train/test (val or validation optional), one Image
    column and one ClassLabel column (their names are found from the features)."""
    try:
        import datasets
    except ImportError:
        raise ValueError("invalid config value for 'task.source': 'hf' needs the `datasets` package "
                         "(pip install datasets)") from None
    dd = datasets.load_from_disk(str(data_dir))
    if not isinstance(dd, datasets.DatasetDict):
        raise ValueError(f"{data_dir}: a single Dataset; save a DatasetDict with train and test splits")
    alias = {"train": "train", "test": "test", "val": "val", "validation": "val"}
    parts = {alias[k]: v for k, v in dd.items() if k in alias}
    if "train" not in parts or "test" not in parts:
        raise ValueError(f"{data_dir}: needs train and test splits, has {list(dd)}")
    feats = parts["train"].features
    image_col = next((k for k, f in feats.items() if isinstance(f, datasets.Image)), None)
    label_col = next((k for k, f in feats.items() if isinstance(f, datasets.ClassLabel)), None)
    if image_col is None or label_col is None:
        raise ValueError(f"{data_dir}: needs an Image column and a ClassLabel column, has {dict(feats)}")
    names = [display_name(n) for n in feats[label_col].names]
    records = {s: [] for s in SPLITS}
    for split, ds in parts.items():
        records[split] = [Record(int(y), names[int(y)], f"{split}:{i}") for i, y in enumerate(ds[label_col])]

    def load(r: Record) -> Image.Image:
        split, i = str(r.ref).split(":")
        try:
            im = parts[split][int(i)][image_col]
            return im.convert("RGB")
        except Exception as e:  # decoding errors surface as many types inside `datasets`: one counted reason
            raise OSError(f"corrupt image: {data_dir} {r.ref} ({type(e).__name__}: {e})") from None

    return Dataset(Path(data_dir).name, names, records, load)


# ---- scikit-learn's handwritten digits ----

def read_digits(train_per_class: int, test_per_class: int, seed: int) -> Dataset:
    """The 1,797 8x8 digits bundled with scikit-learn (no download). Per class a seeded shuffle puts
    `train_per_class` images in train and the next `test_per_class` (at most the rest) in test."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ValueError("invalid config value for 'task.source': 'digits' needs scikit-learn "
                         "(pip install 'vlrl[classification]')") from None
    digits = load_digits()
    images, targets = digits.images, [int(t) for t in digits.target]
    records: dict[str, list[Record]] = {s: [] for s in SPLITS}
    for label, name in enumerate(DIGIT_NAMES):
        idx = [i for i, t in enumerate(targets) if t == label]
        random.Random(f"digits:{seed}:{label}").shuffle(idx)
        records["train"] += [Record(label, name, i) for i in idx[:train_per_class]]
        records["test"] += [Record(label, name, i) for i in idx[train_per_class:train_per_class + test_per_class]]

    def load(r: Record) -> Image.Image:
        pixels = (255 - images[int(r.ref)] * (255.0 / 16.0)).clip(0, 255).astype("uint8")  # dark ink on white
        return Image.fromarray(pixels).convert("RGB")  # 2-D uint8: greyscale

    return Dataset("digits", list(DIGIT_NAMES), records, load, question="Which handwritten digit is in the photo?")
