"""The fixed-click baseline that a warm start must beat to count as localising."""

from tasks.gui_grounding.experiment import fixed_click_baseline


def test_fixed_click_baseline_golden():
    infos = [{"image_size": [100, 100], "gt_box": box} for box in ([0, 0, 50, 50], [50, 50, 100, 100], [0, 0, 100, 100])]
    r = fixed_click_baseline(infos, grid=2)  # lattice points 25 and 75 on each axis
    assert r["screens"] == 3 and abs(r["accuracy"] - 2 / 3) < 1e-12
    assert r["point"] in ([0.25, 0.25], [0.75, 0.75])
    # Relative points scale with each screen: (0.75, 0.75) of a 200x40 screen is (150, 30).
    assert fixed_click_baseline([{"image_size": [200, 40], "gt_box": [140, 20, 160, 40]}], grid=2)["point"] == [0.75, 0.75]
