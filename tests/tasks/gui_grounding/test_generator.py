"""Synthetic screen generator: determinism, split, geometry, unambiguous instructions, curriculum."""

import io
import json

import pytest

from tasks.gui_grounding.data import JsonlSource, read_jsonl, write_jsonl
from tasks.gui_grounding.generator import KINDS, PLATFORMS, generate, layout_seed, matches, split_of

TINY = dict(n_widgets=(1, 6), width_range=(112, 224))


def png(image):
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_deterministic_in_seed():
    a, b = generate(1234), generate(1234)
    assert png(a.image) == png(b.image)
    assert (a.instruction, a.bbox, a.metadata, a.query) == (b.instruction, b.bbox, b.metadata, b.query)
    c = generate(1235)
    assert (c.instruction, c.bbox) != (a.instruction, a.bbox)


def test_layout_only_matches_rendered():
    a, b = generate(77, **TINY), generate(77, render=False, **TINY)
    assert b.image is None and (a.bbox, a.instruction, a.metadata) == (b.bbox, b.instruction, b.metadata)


def test_split_seeds_disjoint():
    train = {layout_seed("train", i) for i in range(3000)}
    evals = {layout_seed("eval", i) for i in range(3000)}
    assert len(train) == len(evals) == 3000 and not train & evals
    assert all(split_of(s) == "train" for s in train) and all(split_of(s) == "eval" for s in evals)
    assert generate(layout_seed("eval", 0), render=False).metadata["split"] == "eval"
    with pytest.raises(ValueError):
        layout_seed("test", 0)


@pytest.mark.parametrize("kwargs", [{}, TINY, dict(n_widgets=(8, 12), width_range=(320, 640))])
def test_geometry_and_unique_instructions(kwargs):
    for seed in range(60):
        s = generate(seed, render=False, **kwargs)
        w, h = s.metadata["width"], s.metadata["height"]
        x1, y1, x2, y2 = s.bbox
        assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h, (seed, s.bbox, w, h)
        for i, a in enumerate(s.widgets):  # widgets do not overlap
            assert 0 <= a.box[0] < a.box[2] <= w and 0 <= a.box[1] < a.box[3] <= h
            for b in s.widgets[i + 1 :]:
                assert a.box[2] <= b.box[0] or b.box[2] <= a.box[0] or a.box[3] <= b.box[1] or b.box[3] <= a.box[1]
        assert [i for i, wd in enumerate(s.widgets) if matches(s.query, wd)] == [s.target]
        for v in s.query.values():  # every attribute the query uses is named in the instruction
            if v != s.widgets[s.target].kind:
                assert str(v) in s.instruction, (s.instruction, s.query)
        assert s.metadata["element_type"] == ("icon" if s.query["kind"] == "icon" else "text")
        assert s.metadata["target_rel_area"] == pytest.approx((x2 - x1) * (y2 - y1) / (w * h))


def test_variety():
    screens = [generate(s, render=False) for s in range(200)]
    assert {s.metadata["platform"] for s in screens} == set(PLATFORMS)
    assert {s.metadata["target_kind"] for s in screens} == set(KINDS)
    assert {s.metadata["instruction_style"] for s in screens} == {"text", "appearance"}
    assert any(s.query.get("kind") == "icon" and "color" in s.query for s in screens)  # "the blue gear icon"


def test_curriculum_knobs():
    for seed in range(40):
        one = generate(seed, n_widgets=(1, 1), width_range=(112, 140), render=False)
        assert one.metadata["n_widgets"] == 1 and 112 <= one.metadata["width"] <= 140
        many = generate(seed, n_widgets=(5, 8), render=False)
        assert 5 <= many.metadata["n_widgets"] <= 8
        icons = generate(seed, kinds=("icon",), platforms=("mobile",), render=False)
        assert all(w.kind == "icon" for w in icons.widgets) and icons.metadata["platform"] == "mobile"


def test_rendered_image_size():
    s = generate(5, **TINY)
    assert s.image.size == (s.metadata["width"], s.metadata["height"]) and s.image.mode == "RGB"


@pytest.mark.parametrize(
    "kwargs",
    [dict(n_widgets=(0, 2)), dict(n_widgets=(3, 2)), dict(width_range=(8, 10)), dict(kinds=("slider",)),
     dict(platforms=()), dict(kinds=("checkbox",), n_widgets=(1, 30))],
)  # fmt: skip
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        generate(0, **kwargs)


def test_jsonl_round_trip(tmp_path):
    path = tmp_path / "data.jsonl"
    assert write_jsonl(str(path), range(4), **TINY) == 4
    recs = read_jsonl(str(path))
    assert [r["bbox"] for r in recs] == [generate(i, render=False, **TINY).bbox for i in range(4)]
    src = JsonlSource(str(path), None)
    ex = src.get(2)
    assert ex.image.size == (recs[2]["metadata"]["width"], recs[2]["metadata"]["height"])
    assert ex.instruction == recs[2]["instruction"]


def test_jsonl_errors_name_file_and_line(tmp_path):
    write_jsonl(str(tmp_path / "ok.jsonl"), range(1), **TINY)
    good = json.loads((tmp_path / "ok.jsonl").read_text())
    cases = [
        ({**good, "bbox": [5, 5, 1, 9]}, "x2 > x1"),
        ({k: v for k, v in good.items() if k != "instruction"}, "missing key 'instruction'"),
        ({**good, "image": "images/missing.png"}, "image not found"),
        ({**good, "bbox": [1, 2, "3", 4]}, "finite numbers"),
    ]
    for rec, msg in cases:
        path = tmp_path / "bad.jsonl"
        path.write_text(json.dumps(good) + "\n\n" + json.dumps(rec) + "\n")
        with pytest.raises((ValueError, FileNotFoundError)) as e:
            read_jsonl(str(path))
        assert f"bad.jsonl:3" in str(e.value) and msg in str(e.value)


def test_widget_name_names_every_attribute_an_instruction_uses():
    from tasks.gui_grounding.generator import Widget, widget_name

    assert widget_name(Widget("icon", color="blue", glyph="gear")) == "blue gear icon"
    assert widget_name(Widget("button", label="Submit", color="green")) == "green Submit button"
    assert widget_name(Widget("text_field", label="Email")) == "Email input field"
    assert widget_name(Widget("checkbox", label="I agree")) == "I agree checkbox"
    assert widget_name(Widget("menu_item", label="File")) == "File menu"
    s = generate(7, n_widgets=(2, 3))
    assert s.metadata["target_name"] == widget_name(s.widgets[s.target])
