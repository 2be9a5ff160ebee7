"""Golden tests for rewards.gui (values computed by hand in the comments)."""

import json
import math

import pytest

from rewards.gui import box_score, click_hit, iou, parse_box, parse_point, parse_prediction, score

GT = [10, 10, 30, 30]  # area 400
SQ = (100, 100)


def ans(box):
    return json.dumps([{"bbox_2d": box, "label": "target"}])


def approx(d, hit, iou_, box, reason=None):
    assert d["hit"] == pytest.approx(hit, abs=1e-12)
    assert d["iou"] == pytest.approx(iou_, abs=1e-12)
    assert d["box"] == pytest.approx(box, abs=1e-12)
    assert d["reason"] == reason


def test_perfect_box_scores_1_375():
    d = score(ans(GT), GT, SQ)
    approx(d, 1.0, 0.25, 0.125)
    assert d["hit"] + d["iou"] + d["box"] == pytest.approx(1.375)


def test_shifted_box_centre_on_gt_corner_is_a_hit():
    # pred [20,20,40,40]: centre (30,30) on the GT corner (inclusive) -> hit.
    # inter [20,30]^2 = 100, union 400 + 400 - 100 = 700 -> IoU 1/7; every s = 1 - 10/100 = 0.9.
    approx(score(ans([20, 20, 40, 40]), GT, SQ), 1.0, 0.25 / 7, 0.125 * 0.9)


def test_non_square_frame_uses_w_for_x_and_h_for_y():
    # W=200, H=100, pred [12,14,40,30]: centre (26,22) inside. inter 18*16=288, pred area 28*16=448,
    # union 448+400-288=560 -> IoU 288/560. s = 1-2/200=0.99, 1-4/100=0.96, 1-10/200=0.95, 1-0=1.
    hm = 4 / (1 / 0.99 + 1 / 0.96 + 1 / 0.95 + 1 / 1.0)  # = 0.97456405938...
    d = score(ans([12, 14, 40, 30]), GT, (200, 100))
    approx(d, 1.0, 0.25 * 288 / 560, 0.125 * hm)
    assert d["box"] == pytest.approx(0.12182050742353835)


def test_miss():
    # pred [60,60,80,80]: centre (70,70) outside, no overlap; every s = 1 - 50/100 = 0.5.
    approx(score(ans([60, 60, 80, 80]), GT, SQ), 0.0, 0.0, 0.0625)


def test_iou_continuous_no_plus_one():
    assert iou([0, 0, 10, 10], [5, 0, 15, 10]) == pytest.approx(50 / 150)
    assert iou([0, 0, 10, 10], [10, 0, 20, 10]) == 0.0  # touching edges: zero-area intersection


def test_box_score_zero_when_any_s_not_positive():
    assert box_score([100, 0, 100, 10], [0, 0, 10, 10], SQ) == 0.0  # s_x1 = 1 - 100/100 = 0
    assert box_score([150, 0, 160, 10], [0, 0, 10, 10], SQ) == 0.0  # s < 0 (unclipped input)
    assert box_score([0, 0, 10, 10], [0, 0, 10, 10], SQ) == 1.0


def test_degenerate_box_hit_counts_iou_zero():
    # [20,20,20,20]: centre (20,20) inside GT; IoU 0; every s = 1 - 10/100 = 0.9.
    approx(score(ans([20, 20, 20, 20]), GT, SQ), 1.0, 0.0, 0.125 * 0.9, "degenerate")
    # zero-width line far right: s_x1 = 1 - 90/100 = 0.1, s_y1 = 1, s_x2 = 1 - 70/100 = 0.3, s_y2 = 1
    hm = 4 / (1 / 0.1 + 1 + 1 / 0.3 + 1)
    approx(score(ans([100, 10, 100, 30]), GT, SQ), 0.0, 0.0, 0.125 * hm, "degenerate")


def test_degenerate_with_s_zero_gives_box_zero():
    approx(score(ans([100, 0, 100, 50]), [0, 0, 10, 10], SQ), 0.0, 0.0, 0.0, "degenerate")


def test_inverted_box_scores_zero():
    approx(score(ans([30, 10, 10, 30]), GT, SQ), 0.0, 0.0, 0.0, "inverted")
    approx(score(ans([10, 30, 30, 10]), GT, SQ), 0.0, 0.0, 0.0, "inverted")


@pytest.mark.parametrize("text", ["[NaN, 10, 30, 30]", '{"bbox_2d": [10, 10, Infinity, 30]}', "[10, -Infinity, 30, 30]"])
def test_non_finite_scores_zero(text):
    approx(score(text, GT, SQ), 0.0, 0.0, 0.0, "nan")


def test_out_of_image_is_clipped():
    # GT [80,80,100,100]; pred [90,90,120,110] -> clipped [90,90,100,100]; centre (95,95) inside.
    # inter 100, union 100 + 400 - 100 = 400 -> IoU 0.25; s = 0.9, 0.9, 1, 1 -> hm 18/19.
    d = score(ans([90, 90, 120, 110]), [80, 80, 100, 100], SQ)
    approx(d, 1.0, 0.25 * 0.25, 0.125 * 18 / 19, "out_of_image")


def test_fully_outside_box_clips_to_border():
    # [120,120,150,150] -> [100,100,100,100] (degenerate after clipping; reason stays out_of_image)
    d = score(ans([120, 120, 150, 150]), GT, SQ)
    assert d["reason"] == "out_of_image" and d["hit"] == 0.0 and d["iou"] == 0.0
    # s_x1 = s_y1 = 1 - 90/100 = 0.1, s_x2 = s_y2 = 1 - 70/100 = 0.3 -> hm = 4 / (10 + 10 + 10/3 + 10/3) = 0.15
    assert d["box"] == pytest.approx(0.125 * 0.15)


@pytest.mark.parametrize("text", ["", "I cannot see it", "[1, 2, 3]", '{"bbox": "1, 2, 3, 4"}', '["a", "b", "c", "d"]', "[true, 1, 2, 3]"])
def test_parse_failure(text):
    approx(score(text, GT, SQ), 0.0, 0.0, 0.0, "parse")


def test_point_answer():
    approx(score('{"point_2d": [20, 20]}', GT, SQ), 1.0, 0.0, 0.0, "point")
    approx(score("[50, 50]", GT, SQ), 0.0, 0.0, 0.0, "point")


@pytest.mark.parametrize("gt", [[10, 10, 10, 30], [10, 10, 30, 5], [float("nan"), 0, 1, 1], [1, 2, 3]])
def test_bad_gt_raises(gt):
    with pytest.raises(ValueError):
        score(ans([1, 2, 3, 4]), gt, SQ)


def test_weights_and_terms():
    d = score(ans(GT), GT, SQ, weights={"hit": 2.0, "box": 0.0})
    assert (d["hit"], d["iou"], d["box"]) == (2.0, 0.25, 0.0)
    d = score(ans(GT), GT, SQ, terms=("hit",))
    assert set(d) == {"hit", "reason"}


@pytest.mark.parametrize(
    "text",
    [
        '```json\n[{"bbox_2d": [1, 2, 3, 4], "label": "x"}]\n```',
        '{"bbox_2d": [1, 2, 3, 4]}',
        "[1, 2, 3, 4]",
        "The answer is [1.0, 2, 3, 4.0].",
        '[{"label": "a"}, {"bbox_2d": [1, 2, 3, 4]}, {"bbox_2d": [9, 9, 9, 9]}]',
        '<think>maybe [9, 9, 9, 9]</think>```json\n[{"bbox_2d": [1, 2, 3, 4]}]\n```',
        '[{"bbox_2d": [1, 2, 3, 4], "label": "trunc',
        "[[1, 2, 3, 4], [5, 6, 7, 8]]",
        '{"bbox": [1, 2, 3, 4]}',  # lenient: a bare 4-number list anywhere counts
    ],
)
def test_parse_box_formats(text):
    assert parse_box(text) == [1.0, 2.0, 3.0, 4.0]


def test_parse_point_and_prediction():
    assert parse_point('{"point_2d": [5, 7]}') == [5.0, 7.0]
    assert parse_point('[{"bbox_2d": [0, 0, 10, 20]}]') == [5.0, 10.0]
    assert parse_box('{"point_2d": [5, 7]}') is None
    assert parse_prediction("nothing") is None
    assert parse_box(None) is None
    nan_box = parse_box("[NaN, 1, 2, 3]")
    assert nan_box is not None and math.isnan(nan_box[0])


def test_click_hit():
    assert click_hit('{"point_2d": [10, 30]}', GT) == 1.0  # on the edge: inclusive
    assert click_hit(ans([0, 0, 20, 20]), GT) == 1.0  # centre (10,10)
    assert click_hit(ans([30, 30, 10, 10]), GT) == 0.0  # inverted
    assert click_hit("no", GT) == 0.0


@pytest.mark.parametrize("text,ok", [
    (ans(GT), True),
    ("```json\n" + ans(GT) + "\n```", True),
    ("<think>the blue one</think> " + ans(GT), True),
    (json.dumps([{"box": GT}]), False),  # another key
    (json.dumps(GT), False),  # a bare list
    (json.dumps({"bbox_2d": GT}), False),  # not the list the prompt shows
    (json.dumps([{"point_2d": [20, 20]}]), False),
    ("The box is " + ans(GT), False),  # extra text
])
def test_training_scores_only_the_prompted_format(text, ok):
    lenient, strict = score(text, GT, SQ), score(text, GT, SQ, strict=True)
    assert lenient["hit"] == 1.0  # evaluation reads all of them
    assert strict["hit"] == float(ok) and strict["reason"] == (None if ok else "format")
    assert score("no box at all", GT, SQ, strict=True)["reason"] == "parse"


def test_strict_think_prompt_needs_its_think_block():
    from rewards.gui import parse_strict

    assert parse_strict(ans(GT), think=True) is None
    assert parse_strict("<think>left</think>" + ans(GT), think=True).values == [10.0, 10.0, 30.0, 30.0]
