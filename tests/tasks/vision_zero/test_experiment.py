"""The experiment's probe questions come from the scene graph; paired differences and their stderr."""

import pytest

from tasks.vision_zero import Config
from tasks.vision_zero.env import make_pair
from tasks.vision_zero.experiment import paired, probe_items, training_overrides


def test_probe_answers_are_the_queried_cells_objects():
    cfg = Config()
    for seed, (image, question, answer) in enumerate(probe_items(6, cfg)):
        rec = make_pair(cfg, "eval", seed).record
        assert (image == make_pair(cfg, "eval", seed).original).all()  # the civilians' (original) image
        assert answer in {f"{o['colour']} {o['shape']}" for o in rec["objects"]}
        assert question.startswith("What is at the ") and question.endswith("Answer in \\boxed{}.")


def test_train_and_eval_pairs_differ():
    cfg = Config()
    assert make_pair(cfg, "train", 0).record != make_pair(cfg, "eval", 0).record


def test_paired_golden():
    out = paired([0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 1.0])
    assert out["before"] == 0.5 and out["after"] == 0.75
    assert out["gain_points"] == pytest.approx(25.0)
    assert out["gain_stderr_points"] == pytest.approx(25.0)  # diffs [1, 0, 0, 0]: sd 0.5, / sqrt(4)


def test_the_supervised_control_trains_on_clues_unless_told_otherwise(tmp_path):
    from vlrl.config import compose

    default = compose(training_overrides("sft", [], [], "assets/tiny-vision-zero", tmp_path, 0))
    assert default.task.scripted == "clue" and default.sft.eval_examples == 0
    chosen = compose(training_overrides("sft", [], ["task.scripted=decision"], "assets/tiny-vision-zero", tmp_path, 0))
    assert chosen.task.scripted == "decision"  # the user's training override is not silently replaced
    spo = compose(training_overrides("spo", [], [], "assets/tiny-vision-zero", tmp_path, 3))
    assert spo.task.scripted == "off" and spo.trainer.seed == 3


def test_the_look_checks_start_is_shipped_with_provenance_and_checks_clues():
    import json
    import os

    from vlrl.config import compose, validate
    from vlrl.evaluate import evaluate

    shipped = os.path.join(os.path.dirname(__file__), "..", "..", "..", "assets", "tiny-vision-zero-look")
    provenance = json.load(open(os.path.join(shipped, "WARMSTART.json")))
    assert len(provenance["commands"]) == 3 and all("task.observer_checks=look" in c for c in provenance["commands"][1:])
    cfg, task = validate(compose(["task=vision_zero", f"model.path={shipped}", "task.grid=2", "task.players=3",
                                  "task.rounds=1", "task.observer_samples=1", "task.observer_checks=look",
                                  "task.scripted=decision", "rollout.max_new_tokens=64", "eval.num_examples=24",
                                  "task.eval_examples=24", "eval.batch_size=24", "trainer.threads=1"]))
    breakdown = evaluate(cfg, task, progress=False)[0]["breakdown"]
    # it looks at each clue's place and says yes to true clues (the shipped start of the decision, not a guesser)
    assert breakdown["check_accuracy/true_clues"] > 0.8 and breakdown["invalid_rate"] < 0.1
