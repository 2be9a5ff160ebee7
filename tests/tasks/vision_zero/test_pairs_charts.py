"""Chart pairs: the record's changes match the data, and the pixels differ exactly where the record says."""

import json

import numpy as np
import pytest

pytest.importorskip("matplotlib")  # present through the libero extra; not declared by vlrl yet (see README)

from tasks.vision_zero.pairs import box_mask, diff_mask  # noqa: E402
from tasks.vision_zero.pairs.charts import CHART_KINDS, chart_pair, render_chart  # noqa: E402


def _check_locality(pair):
    """Every changed pixel lies in a change's box, and every change's box holds changed pixels."""
    m = diff_mask(pair.original, pair.modified)
    changes = pair.record["changes"]
    assert m.any()
    assert not (m & ~box_mask(m.shape, [c["box"] for c in changes])).any()
    for c in changes:
        assert (m & box_mask(m.shape, [c["box"]])).any(), c


@pytest.mark.parametrize("kind", CHART_KINDS)
@pytest.mark.parametrize("num_changes", [1, 2])
def test_chart_pair_record_and_pixels(kind, num_changes):
    for seed in range(4):
        pair = chart_pair(seed, kind, num_changes)
        rec = pair.record
        json.dumps(rec)  # JSON types only
        assert rec["kind"] == kind and len(rec["changes"]) == num_changes
        assert pair.original.shape == (240, 320, 3)
        # the record's changes are exactly the differences between the two data sets
        value_idx = {c["index"] for c in rec["changes"] if c["field"] == "value"}
        label_idx = {c["index"] for c in rec["changes"] if c["field"] == "label"}
        assert {i for i, (a, b) in enumerate(zip(rec["values"], rec["modified_values"])) if a != b} == value_idx
        assert {i for i, (a, b) in enumerate(zip(rec["labels"], rec["modified_labels"])) if a != b} == label_idx
        for c in rec["changes"]:
            src, dst = ("values", "modified_values") if c["field"] == "value" else ("labels", "modified_labels")
            assert (rec[src][c["index"]], rec[dst][c["index"]]) == (c["old"], c["new"])
            if c["field"] == "value":
                assert 3 <= abs(c["new"] - c["old"]) <= 8 and 1 <= c["new"] <= 24
            else:
                assert c["new"] not in rec["labels"]
        _check_locality(pair)


def test_changing_one_value_changes_the_rendered_chart_only_around_it():
    labels, values = ["apple", "pear", "plum", "fig"], [5, 10, 15, 20]
    a, ext = render_chart("bar", labels, values)
    b, _ = render_chart("bar", labels, [5, 10, 7, 20])
    m = diff_mask(a, b)
    assert m.any()
    cols = np.nonzero(m.any(axis=0))[0]
    # bar 2's own box (with its value text): left of it and right of it nothing moved
    x0 = min(box[0] for box in ext["value"][2]) - 2
    x1 = max(box[2] for box in ext["value"][2]) + 2
    assert cols.min() >= x0 and cols.max() < x1
    same, _ = render_chart("bar", labels, values)
    assert np.array_equal(a, same)  # rendering is deterministic


def test_same_seed_same_pair_and_other_seed_other_pair():
    p, q = chart_pair(11), chart_pair(11)
    assert np.array_equal(p.original, q.original) and np.array_equal(p.modified, q.modified)
    assert p.record == q.record
    r = chart_pair(12)
    assert r.record != p.record


def test_pair_images_are_read_only():
    p = chart_pair(0, "bar", 1)
    with pytest.raises(ValueError):
        p.original[0, 0, 0] = 1


@pytest.mark.parametrize("kwargs", [{"kind": "scatter"}, {"num_changes": 3}, {"num_changes": 0}])
def test_chart_pair_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        chart_pair(0, **kwargs)
