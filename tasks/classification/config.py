"""Typed config of the classification task (merged by the core with configs/task/classification.yaml)."""

from __future__ import annotations

from dataclasses import dataclass

from rewards.classification import MODES
from vlrl.config import opt

SOURCES = ("auto", "coop", "imagefolder", "hf", "shapes", "digits")
BUILTIN = ("shapes", "digits")
PROTOCOLS = ("all", "base_to_new", "cross_dataset")
EVAL_SPLITS = ("test", "val")


def _check(cond: bool, name: str, msg: str) -> None:
    if not cond:
        raise ValueError(f"invalid config value for 'task.{name}': {msg}")


@dataclass
class Config:
    name: str = opt("classification", "task name in logs and reports")
    module: str = opt("tasks.classification", "where the task lives")
    mode: str = opt("cls_rl", "cls_rl (think in <think>, answer in <answer>: accuracy + format rewards) | "
                              "no_thinking (answer directly; exact-match accuracy only)")
    lenient: bool = opt(False, "no_thinking only: strip the completion and ignore case when comparing it to the label")
    question: str | None = opt(None, "question before the candidate list; null = the dataset's wording "
                                     "('What type of object is in the photo?' unless the dataset has its own)")
    image_size: int = opt(112, "images are scaled so their longer side is this many pixels (aspect kept); 0 = as stored")
    source: str = opt("auto", "auto (data_dir's layout when it is set, else shapes) | coop | imagefolder | hf | "
                              "shapes (built-in procedural set) | digits (scikit-learn's handwritten digits)")
    data_dir: str | None = opt(None, "dataset folder: CoOp (split_*.json), ImageFolder (train/<class>/*, test/<class>/*) "
                                     "or a HF datasets save_to_disk folder")
    image_dir: str | None = opt(None, "coop: root of the split file's relative image paths; null = data_dir, "
                                      "else data_dir/images (whichever holds the images)")
    split_file: str | None = opt(None, "coop: the split JSON's name in data_dir; null = the only split_*.json there")
    eval_split: str = opt("test", "split evaluated by the 'eval' split of the task: test | val")
    shots: int = opt(4, "training images per class (k-shot), sampled from the train split; 0 = all of them")
    shot_seed: int = opt(1, "seed of the k-shot sample (CoOp reports seeds 1, 2, 3)")
    protocol: str = opt("all", "all (every class) | base_to_new (train on the first half of the classes by label, "
                               "evaluate base and new) | cross_dataset (train on this data, evaluate on eval_*)")
    eval_source: str | None = opt(None, "cross_dataset: source of the evaluation dataset (as `source`); null = source")
    eval_data_dir: str | None = opt(None, "cross_dataset: data_dir of the evaluation dataset")
    eval_image_dir: str | None = opt(None, "cross_dataset: image_dir of the evaluation dataset (coop)")
    eval_split_file: str | None = opt(None, "cross_dataset: split_file of the evaluation dataset (coop)")
    builtin_train_per_class: int = opt(16, "shapes / digits: images per class in the train split (k-shot samples from it)")
    builtin_test_per_class: int = opt(30, "shapes / digits: held-out images per class (digits: at most what is left)")
    builtin_seed: int = opt(0, "shapes: nuisance draws; digits: which images go to train and test")

    def __post_init__(self):
        _check(self.mode in MODES, "mode", f"{self.mode!r} is not one of {list(MODES)}")
        _check(not (self.lenient and self.mode == "cls_rl"), "lenient",
               "only no_thinking has a lenient variant (cls_rl already strips and ignores case)")
        _check(self.question is None or bool(self.question.strip()), "question", "must not be empty")
        _check(self.image_size == 0 or self.image_size >= 28, "image_size", "must be 0 or >= 28 (one 28-pixel patch)")
        _check(self.source in SOURCES, "source", f"{self.source!r} is not one of {list(SOURCES)}")
        _check(self.eval_split in EVAL_SPLITS, "eval_split", f"{self.eval_split!r} is not one of {list(EVAL_SPLITS)}")
        _check(self.shots >= 0, "shots", "must be >= 0")
        _check(self.protocol in PROTOCOLS, "protocol", f"{self.protocol!r} is not one of {list(PROTOCOLS)}")
        _check(self.builtin_train_per_class >= 1, "builtin_train_per_class", "must be >= 1")
        _check(self.builtin_test_per_class >= 1, "builtin_test_per_class", "must be >= 1")
        _check_source(self.source, self.data_dir, self.image_dir, self.split_file, "")
        cross = self.protocol == "cross_dataset"
        if cross:
            _check(self.eval_source is not None or self.eval_data_dir is not None, "eval_data_dir",
                   "protocol=cross_dataset needs the evaluation dataset: set eval_data_dir and/or eval_source")
            _check(self.eval_source is None or self.eval_source in SOURCES, "eval_source",
                   f"{self.eval_source!r} is not one of {list(SOURCES)}")
            _check_source(self.eval_source or "auto", self.eval_data_dir,
                          self.eval_image_dir, self.eval_split_file, "eval_")
        else:
            for f in ("eval_source", "eval_data_dir", "eval_image_dir", "eval_split_file"):
                _check(getattr(self, f) is None, f, f"only used with protocol=cross_dataset (protocol is {self.protocol!r})")


def _check_source(source: str, data_dir, image_dir, split_file, prefix: str) -> None:
    """Fields a source uses are required; fields it would ignore are refused."""
    if source in BUILTIN or (source == "auto" and data_dir is None):
        which = source if source != "auto" else f"shapes (no {prefix}data_dir)"
        for f, v in (("data_dir", data_dir), ("image_dir", image_dir), ("split_file", split_file)):
            _check(v is None, prefix + f, f"the built-in {which} set reads no files")
        return
    _check(data_dir is not None, prefix + "data_dir", f"source {source!r} reads a dataset folder: set {prefix}data_dir")
    if source in ("imagefolder", "hf"):
        _check(image_dir is None, prefix + "image_dir", f"only the coop layout has an image_dir (source is {source!r})")
        _check(split_file is None, prefix + "split_file", f"only the coop layout has a split_file (source is {source!r})")
