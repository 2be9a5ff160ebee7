"""Block warm-up data: deterministic, split-disjoint, the box is exactly the block; the shipped curriculum uses it."""

import numpy as np
import pytest

from tasks.gui_grounding.blocks import COLOURS, block_example
from tasks.gui_grounding.generator import layout_seed
from vlrl.config import compose, validate
from vlrl.sft import task_config_at


def test_box_is_the_block_and_named_by_its_colour():
    for i in range(20):
        image, instruction, (x1, y1, x2, y2), meta = block_example(layout_seed("train", i))
        a = np.asarray(image)
        name = instruction.removeprefix("the ").removesuffix(" block")
        inside = a[int(y1):int(y2), int(x1):int(x2)].reshape(-1, 3)
        assert (inside == COLOURS[name]).all()
        assert (a != COLOURS[name]).any(axis=2).sum() == a.shape[0] * a.shape[1] - inside.shape[0]
        assert image.size[0] % 28 == 0 and image.size[1] % 28 == 0  # already a model frame: no resize
        assert meta["target_rel_area"] == pytest.approx((x2 - x1) * (y2 - y1) / (a.shape[0] * a.shape[1]))


def test_env_on_blocks_is_deterministic_and_splits_differ():
    cfg, task = validate(compose(["task=gui_grounding", "task.data=blocks"]))
    tr1, tr2, ev = (task.make_env(cfg.task, s).reset(5) for s in ("train", "train", "eval"))
    assert tr1.info["gt_box"] == tr2.info["gt_box"] and tr1.info["image_size"] == tr2.info["image_size"]
    assert (tr1.info["gt_box"], tr1.info["instruction"]) != (ev.info["gt_box"], ev.info["instruction"])
    assert tr1.info["gt_box"] == tr1.info["gt_box_orig"]  # frame == original
    x1, y1, x2, y2 = (int(v) for v in tr1.info["gt_box"])
    assert task.reference_answer(tr1, cfg.task) == f'[{{"bbox_2d": [{x1}, {y1}, {x2}, {y2}]}}]'


def test_shipped_warmstart_curriculum_starts_with_blocks():
    cfg, task = validate(compose(["task=gui_grounding", "model=tiny", "trainer=sft_tiny", "sft=gui_warmstart",
                                         "trainer.output_dir=runs/never_written"]))
    stages = [task_config_at(cfg, s) for s in (0, 1500, 3000, 10_000)]
    assert [s.data for s in stages] == ["blocks", "synthetic", "synthetic", "synthetic"]
    assert [list(s.n_widgets) for s in stages[1:]] == [[1, 1], [1, 2], [1, 3]]
    assert task.make_env(stages[0], "train").reset(0).info["instruction"].endswith(" block")
