"""A record whose image does not decode is skipped by the GUI grounding rule and the report says so."""

import json
import os

import pytest

from vlrl.config import compose, validate
from vlrl.evaluate import evaluate


def _evaluate(task, data_dir, tiny_model_path):
    cfg, mod = validate(compose([f"task={task}", f"task.data_dir={data_dir}", f"model.path={tiny_model_path}",
                                 "rollout.max_new_tokens=4"]))
    return evaluate(cfg, mod, progress=False)[0]


def test_corrupt_image_is_reported_as_skipped(ss_v1, tiny_model_path):
    image = os.path.join(ss_v1, "screenspot_imgs", "pc_1.png")
    open(image, "wb").close()  # empty file: PIL cannot identify it
    with pytest.warns(UserWarning, match=rf"screenspot_desktop\.json#0: cannot read image {image}"):
        rep = _evaluate("screenspot", ss_v1, tiny_model_path)
    assert rep["meta"]["examples"] == 4 and rep["count"] == 3
    assert rep["skipped"] == {"count": 1, "reasons": {"unreadable_image": 1}}
    from tasks.screenspot import markdown

    assert "| skipped records (not in n) | 1 (unreadable_image: 1) |" in markdown(rep, None)


def test_image_size_mismatch_is_reported_with_its_reason(ss_pro, tiny_model_path):
    path = os.path.join(ss_pro, "annotations", "photoshop_windows.json")
    recs = json.load(open(path))
    recs[0]["img_size"] = [801, 450]
    json.dump(recs, open(path, "w"))
    with pytest.warns(UserWarning, match=r"photoshop_windows\.json#0: img_size \[801, 450\] != actual image size"):
        rep = _evaluate("screenspot_pro", ss_pro, tiny_model_path)
    assert rep["count"] == 2 and rep["skipped"] == {"count": 1, "reasons": {"image_size_mismatch": 1}}


def test_clean_dataset_reports_nothing_skipped(ss_v2, tiny_model_path):
    rep = _evaluate("screenspot", ss_v2, tiny_model_path)
    assert rep["count"] == 4 and rep["skipped"] == {"count": 0, "reasons": {}}
