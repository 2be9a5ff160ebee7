"""JSONL data: every unreadable image is skipped by one rule (named by file and line, counted by
reason), boxes are checked against the image, and a dataset with nothing readable fails the run."""

import json
import os
import subprocess
import sys

import pytest

import tasks.gui_grounding as gg
from tasks.gui_grounding.data import JsonlSource, write_jsonl
from vlrl.rollout import run_episodes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TINY = dict(n_widgets=(1, 2), width_range=(112, 224))


def _dataset(tmp_path, n=6):
    """n records (all split "train", so index i is line i + 1) and their image paths."""
    path = tmp_path / "data.jsonl"
    write_jsonl(str(path), range(n), split="train", **TINY)
    images = [tmp_path / json.loads(ln)["image"] for ln in path.read_text().splitlines()]
    return path, images


def _break(image, how):
    data = image.read_bytes()
    image.write_bytes({"empty": b"", "garbage": b"\x89PNG not really" * 20, "truncated": data[: len(data) // 2]}[how])


def _cfg(path, **kw):
    return gg.Config(**{"data": str(path), "eval_examples": 4, "difficulty_samples": 64, **kw})


def test_unreadable_images_are_skipped_and_counted_by_one_rule(tmp_path):
    path, images = _dataset(tmp_path)
    for i, how in [(1, "empty"), (2, "garbage"), (3, "truncated")]:
        _break(images[i], how)
    env = gg.make_env(_cfg(path), "train")  # the area weighting reads image headers: must not stop here
    assert env.reset(0).images and env.reset(4).images
    stats = {}
    with pytest.warns(UserWarning) as caught:
        assert run_episodes(None, lambda: gg.make_env(_cfg(path), "train"), [1, 2, 3], 2, stats=stats) == []
    assert stats == {"skipped_samples": 3, "skipped_reasons": {"unreadable_image": 3}}
    messages = [str(w.message) for w in caught]
    for i in (1, 2, 3):
        assert any(f"data.jsonl:{i + 1}: cannot read image {images[i]}" in m for m in messages), messages


def test_area_weighting_with_no_readable_image_names_the_line(tmp_path):
    path, images = _dataset(tmp_path, n=2)
    for image in images:
        _break(image, "empty")
    with pytest.raises(ValueError, match=r"no usable record .*data\.jsonl:1: cannot read image .*task\.difficulty=off"):
        gg.make_env(_cfg(path), "train")


def _with_box(path, line, box):
    lines = path.read_text().splitlines()
    rec = json.loads(lines[line - 1])
    rec["bbox"] = box
    lines[line - 1] = json.dumps(rec)
    path.write_text("\n".join(lines) + "\n")


def test_box_outside_the_image_is_skipped_clipped_or_an_error(tmp_path):
    path, _ = _dataset(tmp_path, n=3)
    w = json.loads(path.read_text().splitlines()[1])["metadata"]["width"]
    _with_box(path, 2, [-5, 3, 20, 30])  # starts left of the image
    _with_box(path, 3, [w + 1, 3, w + 9, 30])  # entirely right of it
    skip = JsonlSource(str(path), None)
    with pytest.raises(ValueError, match=rf"data\.jsonl:2: bbox \[-5.0, 3.0, 20.0, 30.0\] is not inside the {w}x"):
        skip.get(1)
    try:
        skip.get(1)
    except ValueError as e:
        assert e.reason == "bbox_outside_image"
    clip = JsonlSource(str(path), None, bbox_outside="clip")
    with pytest.warns(UserWarning, match=r"data\.jsonl:2: .* clipped to \[0.0, 3.0, 20.0, 30.0\]"):
        assert clip.get(1).bbox == [0.0, 3.0, 20.0, 30.0]
    with pytest.raises(ValueError, match=r"data\.jsonl:3"):
        clip.get(2)  # nothing left inside the image: skipped, not clipped to an empty box
    with pytest.raises(RuntimeError, match=r"data\.jsonl:2: .*bbox_outside=error"):
        JsonlSource(str(path), None, bbox_outside="error").get(1)
    assert JsonlSource(str(path), None).get(0).bbox  # the record inside its image is untouched


def test_box_outside_policy_is_a_validated_config_field(tmp_path):
    with pytest.raises(ValueError, match="bbox_outside"):
        gg.Config(bbox_outside="ignore")
    path, _ = _dataset(tmp_path, n=3)
    _with_box(path, 1, [0, 0, 10_000, 10])
    with pytest.raises(RuntimeError, match=r"data\.jsonl:1"):  # at start-up: the area weighting reads it first
        gg.make_env(_cfg(path, bbox_outside="error"), "train")


@pytest.mark.timeout(300)
def test_a_dataset_of_unreadable_images_fails_the_training_run(tmp_path):
    """The reported case: every image unreadable; the run "succeeded" (exit 0, NaN reward and loss,
    checkpoints saved). Truncated files pass the start-up header reads, so the run gets to its steps."""
    path, images = _dataset(tmp_path, n=4)
    for image in images:
        _break(image, "truncated")
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "vlrl/train.py", "task=gui_grounding", f"task.data={path}", "model=tiny", "trainer.steps=2",
         "trainer.prompts_per_step=2", "algo.group_size=2", "rollout.max_new_tokens=4", "trainer.progress=false",
         f"trainer.output_dir={out}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert proc.returncode != 0
    assert "no usable sample in this step: all 2 prompts were skipped (unreadable_image: 2)" in proc.stderr, proc.stderr[-3000:]
    assert "data.jsonl:" in proc.stderr  # the warnings name each file and line
    assert not (out / "checkpoints").exists()
