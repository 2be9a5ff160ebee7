import json

import numpy as np
import pytest

from tasks.video_authenticity.experiment import budget, compare, to_table

from .conftest import write_flicker_set


def test_every_method_gets_the_same_steps_and_answers():
    assert budget("grpo", 10, 4, 8) == ["task.reward=plain", "trainer.steps=10", "trainer.prompts_per_step=4",
                                        "algo.group_size=8"]
    assert "task.ta_samples=4" in budget("grpo_ta", 10, 4, 8) and "task.reward=q" in budget("grpo_q", 10, 4, 8)
    sft = budget("sft", 10, 4, 8)
    assert "trainer.steps=10" in sft and "trainer.prompts_per_step=32" in sft  # P x G reference answers per step
    assert budget("sft_q", 10, 4, 8) == ["task.reward=q", *sft]  # the same budget on six-option targets


def _row(method, before, after, gain, se, vs=None):
    rep = lambda acc: {"overall": acc, "breakdown": {  # noqa: E731
        "label": {"real": {"accuracy": 1.0}, "fake": {"accuracy": acc}},
        "generator": {"flicker": {"accuracy": acc}}, "level": {"2": {"accuracy": acc}}}}
    row = {"method": method, "before": before, "after": after, "before_report": rep(before),
           "after_report": rep(after), "gain_points": gain, "gain_stderr_points": se,
           "significant_3se": gain > 3 * se, "train_wall_s": 12.3, "decode_share_of_step": 0.05}
    if vs is not None:
        row["vs_sft_points"], row["vs_sft_stderr_points"] = vs
    return row


def test_table_has_a_start_row_per_answer_format_and_one_row_per_method():
    rows = {"grpo": _row("grpo", 0.5, 0.58, 8.0, 1.0, (-1.0, 0.5)),
            "grpo_q": {**_row("grpo_q", 0.4, 0.4, 0.0, 0.0), "answer_format": "six options"},
            "sft": _row("sft", 0.5, 0.6, 10.0, 1.0)}
    lines = to_table(rows).splitlines()
    assert "flicker" in lines[0] and "level 2" in lines[0]
    assert lines[2].startswith("| start (binary) | 50.0 ") and lines[3].startswith("| start (six options) | 40.0 ")
    assert lines[4].startswith("| grpo | 58.0 | +8.0 ± 1.0 | yes | -1.0 ± 0.5 | 100.0 | 58.0 | 58.0 | 58.0 | 12 | 5.0% |")
    assert lines[6].startswith("| sft | 60.0 | +10.0 ± 1.0 | yes | - |") and len(lines) == 7


@pytest.mark.slow
def test_compare_runs_every_method_from_one_start(tmp_path):
    data = tmp_path / "data"
    write_flicker_set(data, {"train": 3, "held_out": 2}, np.random.default_rng(3))
    common = ["model=tiny", f"task.train_manifest={data / 'train.jsonl'}", f"task.manifest={data / 'held_out.jsonl'}",
              "rollout.max_new_tokens=6", "trainer.threads=1", "trainer.save_every=0"]
    out, docs = tmp_path / "runs", tmp_path / "docs"
    result = compare(out, common, ["grpo", "grpo_ta", "grpo_q", "sft", "sft_q"], steps=2, prompts=2, group=2,
                     method_sets={"sft": ["trainer.lr=1e-3"]}, summary_dir=docs, origin={"command": "test"})
    rows = result["rows"]
    assert list(rows) == ["grpo", "grpo_ta", "grpo_q", "sft", "sft_q"]
    for method, row in rows.items():
        assert row["held_out_clips"] == 4 and row["steps"] == 2 and row["method"] == method
        assert {"before", "after", "gain_points", "gain_stderr_points", "train_wall_s", "overrides", "seed"} <= set(row)
        assert json.loads((docs / f"{method}_seed0.json").read_text())["budget"]["answers_trained_on"] == 8
    assert "trainer.lr=1e-3" in rows["sft"]["method_overrides"] and "vs_sft_points" in rows["grpo"]
    assert rows["sft"]["decode_share_of_step"] is None  # the supervised loop logs no decode counters
    assert rows["grpo"]["decode_share_of_step"] is not None
    # The three binary-format methods share one evaluation of the start; GRPO-Q has its own.
    assert rows["grpo"]["before"] == rows["grpo_ta"]["before"] == rows["sft"]["before"]
    assert rows["grpo_q"]["answer_format"] == "six options" and rows["sft"]["answer_format"] == "binary"
    # Each RL method is paired with the supervised control of its own answer format.
    assert rows["sft_q"]["answer_format"] == "six options" and rows["sft_q"]["before"] == rows["grpo_q"]["before"]
    assert [rows[m]["vs_sft_method"] for m in ("grpo", "grpo_ta", "grpo_q")] == ["sft", "sft", "sft_q"]
    assert "vs_sft_points" not in rows["sft"] and "vs_sft_points" not in rows["sft_q"]
    assert (docs / "table.md").read_text() == result["table"] and (out / "compare.json").exists()
