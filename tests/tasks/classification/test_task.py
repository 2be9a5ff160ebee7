"""The task behind the contract: config checks, env, report, `evaluate.py` on a CoOp folder, two training steps."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from vlrl.config import compose, validate
from vlrl.episode import Episode, Turn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAST = ["task=classification", "model=tiny", "trainer.progress=false", "rollout.max_new_tokens=8"]


def load(*overrides):
    return validate(compose([*FAST, *overrides]))


@pytest.mark.parametrize("override, field", [
    ("task.mode=think", "task.mode"),
    ("task.lenient=true", "task.lenient"),  # cls_rl has no lenient variant: refused, not ignored
    ("task.image_size=20", "task.image_size"),
    ("task.source=coop", "task.data_dir"),
    ("task.source=pictures", "task.source"),
    ("task.protocol=cross_dataset", "task.eval_data_dir"),
    ("task.eval_data_dir=/x", "task.eval_data_dir"),  # only meaningful with protocol=cross_dataset
    ("task.split_file=split_a.json", "task.split_file"),  # the built-in set reads no files
    ("task.shots=-1", "task.shots"),
    ("task.eval_split=train", "task.eval_split"),
])
def test_bad_config_names_the_field(override, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        load(override)


def test_env_is_deterministic_and_scores_both_modes():
    cfg, task = load()
    env = task.make_env(cfg.task, "eval")
    obs = env.reset(4)
    again = task.make_env(cfg.task, "eval").reset(4)
    assert again.info == obs.info and np.array_equal(np.asarray(again.images[0]), np.asarray(obs.images[0]))
    assert obs.images[0].size == (112, 112) and len(obs.info["candidates"]) == 14  # 36 classes: floor(0.4 * 36)
    label, cands = obs.info["label"], obs.info["candidates"]
    assert label in cands and "<answer>" in obs.messages[0]["content"][1]["text"]
    res = env.step(f"<think>it is round</think> <answer>{label.upper()}</answer>")
    assert res.done and res.rewards == {"accuracy": 1.0, "format": 1.0} and res.info["reason"] is None
    other = next(c for c in cands if c != label)
    res = env.step(f"<think>hm</think><answer>{label} or {other}</answer>")
    assert res.rewards["accuracy"] == 0.0 and res.info["reason"] == "hedged" and res.info["hedged"] == 1.0

    cfg, task = load("task.mode=no_thinking")
    env = task.make_env(cfg.task, "eval")
    obs = env.reset(4)
    assert obs.messages[0]["content"][1]["text"].endswith("\n Please directly output the answer.")
    assert env.step(obs.info["label"]).rewards == {"accuracy": 1.0}
    assert env.step(obs.info["label"] + " ").rewards == {"accuracy": 0.0}
    assert task.reference_answer(obs, cfg.task) == obs.info["label"]


def _episode(obs, text, tokens=3):
    return Episode(turns=[Turn(observation=obs, response_ids=[1] * tokens, logprobs=[0.0] * tokens, response_text=text)])


def test_report_on_base_to_new():
    cfg, task = load("task.protocol=base_to_new")
    env = task.make_env(cfg.task, "eval")
    episodes = []
    for seed in range(40):
        obs = env.reset(seed)
        label, cands = obs.info["label"], obs.info["candidates"]
        assert set(cands) <= set(env.view.pools[obs.info["group"]])  # base images: base names; new: new names
        if obs.info["group"] == "base":
            text = f"<think></think><answer>{label}</answer>"  # all base right
        elif seed % 4 == 0:
            text = f"<think></think><answer>{label}</answer>"
        elif seed % 4 == 1:
            text = f"{cands[0]} or {cands[1]}"
        elif seed % 4 == 2:
            text = ""
        else:
            text = "<answer>a purple blob</answer>"
        episodes.append(_episode(obs, text, tokens=seed % 5 + 1))
    rep = task.report(episodes, cfg.task)
    groups = [ep.turns[0].observation.info["group"] for ep in episodes]
    n_base, n_new = groups.count("base"), groups.count("new")
    assert n_base and n_new and rep["count"] == 40
    new_right = sum(1 for ep, g in zip(episodes, groups) if g == "new" and ep.seed % 4 == 0 and "<answer>" in ep.turns[0].response_text
                    and ep.turns[0].response_text.endswith(f"{ep.turns[0].observation.info['label']}</answer>"))
    assert rep["base"] == 1.0 and rep["new"] == pytest.approx(new_right / n_new)
    assert rep["harmonic_mean"] == pytest.approx(2 * rep["new"] / (1 + rep["new"]))
    assert rep["overall"] == pytest.approx((n_base + new_right) / 40)
    assert rep["stderr"] == pytest.approx((rep["overall"] * (1 - rep["overall"]) / 40) ** 0.5)
    assert rep["breakdown"]["group"]["base"]["count"] == n_base
    assert sum(c["count"] for c in rep["breakdown"]["class"].values()) == 40
    assert rep["reasons"].get("hedged", 0) == round(rep["hedged_rate"] * 40) > 0
    assert rep["parse_failure_rate"] > 0 and rep["not_a_candidate_rate"] > 0
    assert rep["mean_response_length"] == pytest.approx(sum(s % 5 + 1 for s in range(40)) / 40)
    assert set(rep) >= {"overall", "count", "skipped", "breakdown", "format_rate"}
    assert "top-1 accuracy" in task.markdown(rep, cfg.task)


def test_episode_success_is_accuracy_not_format():
    cfg, task = load()
    env = task.make_env(cfg.task, "eval")
    obs = env.reset(0)
    wrong = next(c for c in obs.info["candidates"] if c != obs.info["label"])
    ep = _episode(obs, f"<think></think><answer>{wrong}</answer>")
    ep.turns[0].rewards = env.step(ep.turns[0].response_text).rewards
    assert ep.turns[0].rewards == {"accuracy": 0.0, "format": 1.0} and task.episode_success(ep, cfg.task) == 0.0


def test_evaluate_cli_on_a_coop_folder(coop_dir, tmp_path):
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "vlrl/evaluate.py", "task=classification", f"task.data_dir={coop_dir}", f"eval.output={out}",
         "model=tiny", "rollout.max_new_tokens=8"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rep = json.loads(out.read_text())
    assert set(rep) >= {"overall", "count", "skipped", "breakdown", "parse_failure_rate", "mean_response_length"}
    assert rep["count"] == 9 and rep["skipped"]["count"] == 2  # the corrupt and the missing test image
    assert 0.0 <= rep["overall"] <= 1.0 and set(rep["breakdown"]["class"]) == {"red square", "green disc", "blue bar"}
    assert out.with_suffix(".md").exists()


def test_train_two_steps_on_the_builtin_set(tmp_path):
    from vlrl.train import main

    main([*FAST, "trainer.steps=2", "trainer.prompts_per_step=2", "algo.group_size=4", f"trainer.output_dir={tmp_path}"])
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["episodes"] == 8.0 for r in rows)
    assert all(0.0 <= r["reward/mean"] <= 2.0 and "reward/accuracy" in r and "reward/format" in r for r in rows)
    # Outcome shares are logged every step (the random model's answers: never right, mostly no candidate).
    assert all(r["task/correct"] + r["task/empty"] + r["task/hedged"] + r["task/not_a_candidate"] <= 1.0 + 1e-9 for r in rows)
    assert (tmp_path / "checkpoints" / "step_0000002").is_dir()


def test_the_task_defaults_to_its_shipped_warm_start_and_a_named_model_wins():
    assert compose(["task=classification"]).model.path == "assets/tiny-classification"
    assert os.path.isfile(os.path.join(ROOT, "assets", "tiny-classification", "model.safetensors"))
    assert compose(["task=classification", "model=tiny"]).model.path == "assets/tiny-qwen2.5-vl"
    assert compose(["model=tiny", "task=classification"]).model.path == "assets/tiny-qwen2.5-vl"
    assert compose(["task=classification", "model.path=CKPT"]).model.path == "CKPT"
    assert compose(["task=gui_grounding"]).model.path == "assets/tiny-gui-grounding"  # other tasks keep theirs
    assert compose([]).model.path == "assets/tiny-gui-grounding"
