"""Grid pairs: deterministic, and the pixels differ exactly inside the recorded changed cells."""

import numpy as np
import pytest

from tasks.vision_zero.pairs import box_mask, diff_mask
from tasks.vision_zero.pairs.grid import grid_pair


@pytest.mark.parametrize("seed", range(12))
def test_difference_is_inside_the_recorded_cells(seed):
    pair = grid_pair(seed, grid=3, k=1 + seed % 2)
    rec = pair.record
    assert len(rec["changes"]) == 1 + seed % 2 and pair.original.shape == (84, 84, 3)
    diff = diff_mask(pair.original, pair.modified)
    inside = box_mask(diff.shape, [c["box"] for c in rec["changes"]])
    assert diff.any() and not (diff & ~inside).any()
    for c in rec["changes"]:  # every recorded change moves pixels and names what differs
        x0, y0, x1, y1 = c["box"]
        assert diff[y0:y1, x0:x1].sum() >= 30
        a, b = rec["objects"][c["index"]], rec["modified_objects"][c["index"]]
        assert c["attributes"] == [k for k in ("shape", "colour") if a[k] != b[k]] and c["attributes"]
        assert (a["row"], a["col"]) == (b["row"], b["col"])
    unchanged = [i for i in range(len(rec["objects"])) if i not in rec["changed"]]
    assert all(rec["objects"][i] == rec["modified_objects"][i] for i in unchanged)


def test_same_seed_same_pair_and_bad_arguments():
    a, b = grid_pair(5), grid_pair(5)
    assert np.array_equal(a.modified, b.modified) and a.record == b.record
    assert grid_pair(6).record != a.record
    with pytest.raises(ValueError, match="k must be"):
        grid_pair(1, num_objects=2, k=3)
