"""What each split of the task serves: the dataset behind it, k-shot sampling and the three protocols.

- all: train on `shots` images per class of every class; evaluate every class (candidates from all classes).
- base_to_new: classes sorted by label; the first ceil(n/2) are "base". Train on base classes only (candidates
  from base names); evaluate base images against base names and new images against new names (CoOp's rule).
- cross_dataset: train on (source, data_dir); evaluate on (eval_source, eval_data_dir) with its own classes.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .config import BUILTIN, Config
from .readers import Dataset, Record, read_coop, read_digits, read_hf, read_imagefolder
from .shapes import read_shapes


@dataclass(frozen=True)
class Item:
    record: Record
    group: str  # "all", "base" or "new": which candidate pool the sample draws from


@dataclass(eq=False)
class View:
    """The samples of one split, in a fixed order, with their candidate pools. Shared, never copied."""

    dataset: Dataset
    items: list[Item]
    pools: dict[str, list[str]]
    question: str
    shuffle_seed: int | None  # train: each pass over the items is a fresh seeded permutation

    def item(self, seed: int) -> Item:
        """The sample that episode seed `seed` shows: eval seeds index the items; training seeds walk
        through seeded permutations, one per pass (epoch)."""
        if not self.items:
            raise ValueError("the split has no images")
        epoch, pos = divmod(seed, len(self.items))
        if self.shuffle_seed is None:
            return self.items[pos]
        return self.items[self._order(epoch)[pos]]

    @lru_cache(maxsize=2)
    def _order(self, epoch: int) -> list[int]:
        order = list(range(len(self.items)))
        random.Random(f"epoch:{self.shuffle_seed}:{epoch}").shuffle(order)
        return order

    def __deepcopy__(self, memo):
        return self


def detect_source(data_dir: str, field: str = "task.data_dir") -> str:
    """The layout of a dataset folder: coop (split_*.json), hf (dataset_dict.json), imagefolder (train/)."""
    root = Path(data_dir)
    if not root.is_dir():
        raise ValueError(f"invalid config value for '{field}': {root} is not a folder")
    if any(root.glob("split_*.json")):
        return "coop"
    if (root / "dataset_dict.json").is_file():
        return "hf"
    if (root / "train").is_dir():
        return "imagefolder"
    raise ValueError(f"invalid config value for '{field}': {root} has no split_*.json (CoOp), dataset_dict.json "
                     "(HF datasets) or train/ folder (ImageFolder)")


def open_dataset(cfg: Config, source: str, data_dir: str | None, image_dir: str | None, split_file: str | None,
                 prefix: str = "") -> Dataset:
    """The dataset named by one (source, data_dir, ...) set of fields (`prefix`: "" or "eval_")."""
    if source == "auto":
        source = detect_source(data_dir, f"task.{prefix}data_dir") if data_dir else "shapes"
    if source in BUILTIN:
        if source == "shapes":
            return read_shapes(cfg.builtin_train_per_class, cfg.builtin_test_per_class, cfg.builtin_seed,
                               cfg.image_size or 112)
        return read_digits(cfg.builtin_train_per_class, cfg.builtin_test_per_class, cfg.builtin_seed)
    from vlrl.config import resolve_path

    data_dir = resolve_path(data_dir)
    if source == "coop":
        return read_coop(data_dir, image_dir and resolve_path(image_dir), split_file, prefix)
    if source == "imagefolder":
        return read_imagefolder(data_dir)
    return read_hf(data_dir)


def k_shot(records: list[Record], shots: int, seed: int) -> list[Record]:
    """`shots` records per class sampled without replacement (all of a class that has fewer; shots 0 = all),
    from one RNG seeded by `seed`; order: by label, then as sampled."""
    if shots == 0:
        return list(records)
    by_label: dict[int, list[Record]] = {}
    for r in records:
        by_label.setdefault(r.label, []).append(r)
    rng = random.Random(f"shots:{seed}")
    out = []
    for label in sorted(by_label):
        group = by_label[label]
        out += rng.sample(group, min(shots, len(group)))
    return out


def base_classes(classnames: list[str]) -> int:
    """How many of the classes (by label) are base classes: the first half, rounded up."""
    return math.ceil(len(classnames) / 2)


def build_view(cfg: Config, split: str) -> View:
    """The View behind `make_env(cfg, split)`: split "train" is the k-shot training sample; "eval" is
    `cfg.eval_split` (test unless set to val); "test" / "val" name a split directly."""
    if split not in ("train", "eval", "test", "val"):
        raise ValueError(f"unknown split {split!r}: train | eval | test | val")
    which = cfg.eval_split if split == "eval" else split
    cross = cfg.protocol == "cross_dataset" and which != "train"
    if cross:
        ds = open_dataset(cfg, cfg.eval_source or "auto", cfg.eval_data_dir, cfg.eval_image_dir,
                          cfg.eval_split_file, "eval_")
    else:
        ds = open_dataset(cfg, cfg.source, cfg.data_dir, cfg.image_dir, cfg.split_file)
    question = cfg.question or ds.question
    records = ds.splits.get(which, [])
    if which == "train":
        records = k_shot(records, cfg.shots, cfg.shot_seed)
    if cfg.protocol == "base_to_new" and not cross:
        m = base_classes(ds.classnames)
        pools = {"base": ds.classnames[:m], "new": ds.classnames[m:]}
        items = [Item(r, "base" if r.label < m else "new") for r in records]
        if which == "train":
            items = [it for it in items if it.group == "base"]
    else:
        pools = {"all": list(ds.classnames)}
        items = [Item(r, "all") for r in records]
    if not items:
        field = "data_dir" if which == "train" else "eval_split"
        raise ValueError(f"invalid config value for 'task.{field}': the {which} split of {ds.name!r} has no images")
    if which != "train":
        # A fixed shuffle, so that a prefix (eval.num_examples) is a uniform sample of the split.
        random.Random(f"eval-order:{which}").shuffle(items)
    return View(ds, items, pools, question, cfg.shot_seed if which == "train" else None)


_VIEWS: dict[tuple[str, str], View] = {}


def get_view(cfg: Config, split: str) -> View:
    """build_view, cached per (config, split): the core builds one env per sample, the data is read once."""
    key = (json.dumps(dataclasses.asdict(cfg), sort_keys=True, default=str), split)
    if key not in _VIEWS:
        if len(_VIEWS) >= 8:
            _VIEWS.pop(next(iter(_VIEWS)))
        _VIEWS[key] = build_view(cfg, split)
    return _VIEWS[key]
