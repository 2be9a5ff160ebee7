"""`tasks.robot_manipulation.experiment --task libero`: official trials before and after, RL on train placements."""
import json

import pytest

pytest.importorskip("libero")

from tasks.robot_manipulation.experiment import learn  # noqa: E402

pytestmark = [pytest.mark.libero, pytest.mark.slow, pytest.mark.timeout(900)]


def test_libero_experiment_evaluates_the_official_trials_around_rl(tmp_path, tiny_model_path):
    overrides = ["task.suite=libero_object", "task.task_ids=[1]", "task.trials_per_task=2", "task.max_steps=2",
                 "task.render_size=64", "task.image_size=32", f"model.path={tiny_model_path}",
                 f"task.tokenizer_path={tiny_model_path}", "rollout.max_turns=2", "rollout.max_new_tokens=8",
                 "algo=vla_grpo", "algo.group_size=2", "trainer.prompts_per_step=1", "trainer.steps=1",
                 "trainer.threads=1", "eval.batch_size=2"]
    s = learn(tmp_path / "x", overrides, 2, task_name="libero")
    assert s["task"] == "libero" and s["held_out_init_states"] == 2 and s["final_step"] == 1
    assert len(s["successes_before"]) == len(s["successes_after"]) == 2
    task = s["suites_after"]["libero_object"]["tasks"][0]
    assert task["task_id"] == 1 and task["init_states"] == [0, 1]  # the shipped init states, in order
    assert json.loads((tmp_path / "x" / "summary.json").read_text())["suites_before"]["libero_object"]["trials"] == 2
    turns = [json.loads(ln) for ln in open(tmp_path / "x" / "run" / "metrics.jsonl")]
    assert turns[-1]["episodes"] == 2  # one prompt x G = 2 (on train placements: test_libero_train_split.py)
