"""Readers on fixtures in the official layouts, k-shot sampling and the three protocols."""

import importlib.util
import json

import pytest

from tasks.classification.config import Config
from tasks.classification.data import build_view, detect_source, k_shot
from tasks.classification.readers import Record, read_coop, read_digits, read_imagefolder

from .conftest import CLASSES, write_coop

NAMES = ["red square", "green disc", "blue bar"]  # CoOp's underscores read as spaces


def test_coop_images_beside_the_split_file(coop_dir):
    ds = read_coop(str(coop_dir))
    assert ds.name == "zhou_Tiny" and ds.classnames == NAMES
    assert [len(ds.splits[s]) for s in ("train", "val", "test")] == [18, 3, 11]
    rec = ds.splits["train"][0]
    assert (rec.label, rec.classname) == (0, "red square")
    assert ds.load(rec).size == (40, 30) and ds.load(rec).mode == "RGB"


def test_coop_images_under_data_dir_images(tmp_path):
    root = tmp_path / "d"
    write_coop(root, root / "images", broken=False)
    ds = read_coop(str(root))
    assert ds.notes["image_root"] == str(root / "images")
    assert all(ds.load(r).size == (40, 30) for r in ds.splits["test"])


def test_coop_image_dir_wins(tmp_path):
    root, pics = tmp_path / "d", tmp_path / "elsewhere" / "101_ObjectCategories"
    write_coop(root, pics, broken=False)
    (root / "images").mkdir()  # present but empty: image_dir still decides
    ds = read_coop(str(root), image_dir=str(pics))
    assert ds.load(ds.splits["val"][2]).size == (40, 30)


def test_coop_corrupt_and_missing_images_raise_oserror(coop_dir):
    ds = read_coop(str(coop_dir))
    by_name = {str(r.ref).rsplit("/", 1)[-1]: r for r in ds.splits["test"]}
    with pytest.raises(OSError, match="corrupt image"):
        ds.load(by_name["corrupt.png"])
    with pytest.raises(FileNotFoundError, match="missing image"):
        ds.load(by_name["missing.png"])


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.pop("test"), "keys train, val, test"),
    (lambda s: s["train"].append(["x.png", "0", "red_square"]), r"train\[18\]"),
    (lambda s: s["val"].append(["x.png", 1]), r"val\[3\]"),
    (lambda s: s["train"].append(["x.png", 0, "blue_bar"]), "label 0 is named both"),
])
def test_coop_bad_split_files_name_the_entry(tmp_path, edit, message):
    root = tmp_path / "d"
    splits = write_coop(root, root, broken=False)
    edit(splits)
    (root / "split_zhou_Tiny.json").write_text(json.dumps(splits))
    with pytest.raises(ValueError, match=message):
        read_coop(str(root))


def test_coop_several_split_files_need_a_name(tmp_path):
    root = tmp_path / "d"
    write_coop(root, root, broken=False)
    write_coop(root, root, per_split={"train": 1, "val": 0, "test": 1}, name="split_other.json", broken=False)
    with pytest.raises(ValueError, match="task.split_file"):
        read_coop(str(root))
    assert len(read_coop(str(root), split_file="split_other.json").splits["train"]) == 3


def test_imagefolder(imagefolder_dir):
    ds = read_imagefolder(str(imagefolder_dir))
    assert ds.classnames == sorted(NAMES)  # folder names sorted: blue_bar, green_disc, red_square
    assert len(ds.splits["train"]) == 15 and len(ds.splits["test"]) == 7  # notes.txt is not an image
    broken = [r for r in ds.splits["test"] if str(r.ref).endswith("broken.jpg")]
    with pytest.raises(OSError):
        ds.load(broken[0])
    good = ds.splits["test"][0]
    assert ds.load(good).getpixel((0, 0)) == CLASSES[2][1]  # blue_bar is label 0 here


def test_detect_source(coop_dir, imagefolder_dir, tmp_path):
    assert detect_source(str(coop_dir)) == "coop" and detect_source(str(imagefolder_dir)) == "imagefolder"
    with pytest.raises(ValueError, match="task.data_dir"):
        detect_source(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="ImageFolder"):
        detect_source(str(tmp_path / "empty"))


@pytest.mark.skipif(importlib.util.find_spec("datasets") is None,
                    reason="the `datasets` package is not installed (optional: pip install datasets)")
def test_hf_save_to_disk_folder(tmp_path):
    import datasets
    from PIL import Image

    from tasks.classification.readers import read_hf

    feats = datasets.Features({"img": datasets.Image(), "label": datasets.ClassLabel(names=["red_square", "blue_bar"])})

    def part(n):
        return datasets.Dataset.from_dict({"img": [Image.new("RGB", (20, 20), CLASSES[2 * (i % 2)][1]) for i in range(n)],
                                           "label": [i % 2 for i in range(n)]}, features=feats)

    datasets.DatasetDict({"train": part(6), "test": part(4)}).save_to_disk(str(tmp_path / "hf"))
    assert detect_source(str(tmp_path / "hf")) == "hf"
    ds = read_hf(str(tmp_path / "hf"))
    assert ds.classnames == ["red square", "blue bar"] and len(ds.splits["train"]) == 6
    rec = ds.splits["test"][1]
    assert rec.classname == "blue bar" and ds.load(rec).getpixel((0, 0)) == CLASSES[2][1]


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None,
                    reason="scikit-learn is not installed (optional extra: pip install 'vlrl[classification]')")
def test_digits_are_real_and_split_disjointly():
    ds = read_digits(train_per_class=5, test_per_class=100, seed=0)
    assert ds.classnames[:3] == ["zero", "one", "two"]
    train, test = ds.splits["train"], ds.splits["test"]
    assert len(train) == 50 and len(test) == 1000
    assert not {r.ref for r in train} & {r.ref for r in test}
    img = ds.load(test[0])
    assert img.size == (8, 8) and len(set(img.getdata())) > 3  # real strokes, not a blank square
    assert read_digits(5, 100, 1).splits["train"] != train  # the seed picks other images


def test_k_shot_sampling():
    records = [Record(label, f"c{label}", f"{label}/{i}") for label in range(4) for i in range(10 if label else 2)]
    a = k_shot(records, 4, seed=1)
    assert [sum(r.label == c for r in a) for c in range(4)] == [2, 4, 4, 4]  # a class with fewer gives all it has
    assert k_shot(records, 4, seed=1) == a and k_shot(records, 4, seed=2) != a
    assert len(set(a)) == len(a) and k_shot(records, 0, seed=1) == records


def test_base_to_new_on_coop(coop_dir):
    cfg = Config(data_dir=str(coop_dir), protocol="base_to_new", shots=2)
    train = build_view(cfg, "train")
    assert train.pools == {"base": NAMES[:2], "new": NAMES[2:]}  # ceil(3 / 2) = 2 base classes
    assert {it.group for it in train.items} == {"base"} and len(train.items) == 4
    test = build_view(cfg, "eval")
    groups = {it.record.classname: it.group for it in test.items}
    assert groups == {"red square": "base", "green disc": "base", "blue bar": "new"}


def test_cross_dataset_trains_on_a_and_evaluates_on_b(coop_dir, imagefolder_dir):
    cfg = Config(data_dir=str(coop_dir), protocol="cross_dataset", eval_data_dir=str(imagefolder_dir))
    assert build_view(cfg, "train").dataset.name == "zhou_Tiny"
    ev = build_view(cfg, "eval")
    assert ev.dataset.name == "tiny_folder" and len(ev.items) == 7 and ev.pools == {"all": sorted(NAMES)}


def test_training_seeds_walk_shuffled_passes(coop_dir):
    view = build_view(Config(data_dir=str(coop_dir), shots=3), "train")
    n = len(view.items)
    first = [view.item(s) for s in range(n)]
    second = [view.item(s) for s in range(n, 2 * n)]
    assert sorted(map(id, first)) == sorted(map(id, second)) == sorted(map(id, view.items))  # each pass: every item once
    assert first != second and view.item(5) is first[5]  # reshuffled per pass, deterministic per seed
