"""The LIBERO task: config validation, seed -> (task, trial) mapping, and the evaluate.py CLI run for real
on the tiny model (1 task x 2 trials of libero_spatial, 5 policy steps): official init states in order,
no-op wait steps, per-task / per-suite report, invalid responses hold still."""

import json

import numpy as np
import pytest

pytest.importorskip("libero")

from tasks import libero as task  # noqa: E402

pytestmark = [pytest.mark.libero]


def test_config_composes_with_protocol_defaults():
    from robots.libero_eval import LiberoEvalConfig
    from vlrl.config import load

    cfg, mod = load(["task=libero"])
    assert mod.__name__ == "tasks.libero" and isinstance(cfg.task, task.Config)
    protocol = LiberoEvalConfig()
    assert cfg.task == task.Config()  # the YAML and the dataclass agree
    assert (cfg.task.trials_per_task, cfg.task.num_wait_steps, cfg.task.env_seed) == (
        protocol.num_trials, protocol.num_warmup_steps, protocol.seed)
    assert task.required_max_turns(cfg.task) == 220  # libero_spatial's official limit
    assert task.num_examples(cfg.task, "eval") == 10 * 50
    assert task.num_examples(task.Config(suite="libero_90", trials_per_task=3), "eval") == 90 * 3
    assert task.required_max_turns(task.Config(suite="libero_10", max_steps=7)) == 7


@pytest.mark.parametrize("field, value", [
    ("suite", "libero_100"), ("task_ids", [-1]), ("task_ids", [2, 2]), ("trials_per_task", 0), ("camera", "top"),
    ("image_size", 16), ("flip", "sideways"), ("n_bins", 1), ("num_wait_steps", -1), ("max_steps", 0),
    ("env_cache_size", -1),
])
def test_config_validation(field, value):
    with pytest.raises(ValueError, match=f"invalid config value for 'task.{field}'"):
        task.Config(**{field: value})


def test_config_validation_through_compose():
    from vlrl.config import load

    with pytest.raises(ValueError, match="task.suite"):
        load(["task=libero", "task.suite=libero_11"])
    cfg, _ = load(["task=libero", "task.task_ids=[10]"])  # libero_spatial has tasks 0..9
    with pytest.raises(ValueError, match="task.task_ids"):
        task.num_examples(cfg.task, "eval")
    with pytest.raises(ValueError, match="task.trials_per_task"):  # LIBERO ships 50 init states per task
        task.num_examples(task.Config(task_ids=[0], trials_per_task=51), "eval")


def test_seed_to_task_and_trial_in_order():
    cfg = task.Config(task_ids=[3, 5], trials_per_task=2)
    assert [task.locate(cfg, s) for s in range(5)] == [(3, 0), (3, 1), (5, 0), (5, 1), (3, 0)]
    assert task.locate(task.Config(), 123) == (2, 23)  # 50 trials per task


def test_max_turns_below_step_limit_is_refused():
    from vlrl.config import load
    from vlrl.evaluate import check_max_turns

    cfg, mod = load(["task=libero"])
    with pytest.raises(ValueError, match=r"'rollout.max_turns'.*rollout.max_turns=220"):
        check_max_turns(cfg, mod)
    cfg, mod = load(["task=libero", "task.max_steps=5", "rollout.max_turns=5"])
    check_max_turns(cfg, mod)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_evaluate_cli_official_protocol(tmp_path, tiny_model_path, monkeypatch, capsys):
    """evaluate.py's main() on the tiny model; spies on the simulator record what the protocol did."""
    from robots.libero_env import LiberoEnv, init_states
    from robots.libero_eval import NOOP_ACTION
    from vlrl.episode import Episode, Turn
    from vlrl.evaluate import main

    resets, actions = [], []
    orig_reset, orig_step = LiberoEnv.reset, LiberoEnv.step

    def reset(self, seed=None, init_state=None):
        obs = orig_reset(self, seed=seed, init_state=init_state)
        resets.append((seed, init_state, self.get_state()))
        actions.append([])
        return obs

    def step(self, action):
        actions[-1].append(np.asarray(action, dtype=float).copy())
        return orig_step(self, action)

    monkeypatch.setattr(LiberoEnv, "reset", reset)
    monkeypatch.setattr(LiberoEnv, "step", step)
    out = tmp_path / "report.json"
    builds = task.POOL.builds
    main(["task=libero", "task.suite=libero_spatial", "task.task_ids=[0]", "task.trials_per_task=2",
          "task.max_steps=5", "task.render_size=32", "task.image_size=32", "rollout.max_turns=5",
          f"model.path={tiny_model_path}", f"eval.output={out}", "eval.batch_size=1"])
    printed = capsys.readouterr().out

    # Report: per-task (with the instruction), per-suite, overall; Markdown written and printed.
    rep = json.loads(out.read_text())
    suite = rep["suites"]["libero_spatial"]
    (t0,) = suite["tasks"]
    name, language = task.env.task_info(task.Config(), 0)
    assert t0["task_id"] == 0 and t0["instruction"] == language and t0["name"] == name
    assert t0["trials"] == 2 and t0["init_states"] == [0, 1] and t0["mean_steps"] == 5.0
    assert rep["count"] == suite["trials"] == 2 and rep["overall"] == suite["success_rate"] == t0["success_rate"]
    assert rep["protocol"]["num_wait_steps"] == 10 and rep["protocol"]["max_steps"] == 5
    assert rep["meta"]["examples"] == 2
    assert "| libero_spatial | 0 | " + language in printed and "**libero_spatial**" in printed
    assert out.with_suffix(".md").read_text() in printed

    # Official init states in order (trial k = state k), OpenVLA's reset seed, one simulator reused.
    official = init_states("libero_spatial", 0)
    assert [(s, i) for s, i, _ in resets] == [(7, 0), (7, 1)]
    for k, (_, _, state) in enumerate(resets):
        np.testing.assert_allclose(state, official[k])
    assert task.POOL.builds == builds + 1
    # 10 no-op wait steps (zero deltas, gripper open), then the policy's 5 steps.
    for acts in actions:
        assert len(acts) == 10 + 5
        assert all(np.array_equal(a, NOOP_ACTION) for a in acts[:10])

    # Invalid responses hold still (zero deltas, gripper command unchanged), counted as invalid_action.
    cfg = task.Config(task_ids=[0], trials_per_task=2, max_steps=5, render_size=32, image_size=32)
    env = task.make_env(cfg, "eval")
    obs = env.reset(1)
    assert obs.info["trial"] == 1 and obs.info["sim_step"] == 10 and obs.info["step"] == 0
    assert obs.images[0].size == (32, 32)
    assert obs.messages[0]["content"][1]["text"] == f"In: What action should the robot take to {language}?\nOut:"
    tok = task.env.action_tokenizer(cfg)
    assert len(obs.allowed_ids) == 8 and obs.allowed_ids[0] == range(tok.offset, tok.offset + 256)
    eef0 = env._sim.raw_obs["robot0_eef_pos"].copy()
    res = env.step("not an action")
    assert res.info["reason"] == "invalid_action" and res.info["action"] == [0.0] * 7
    assert res.rewards == {"success": 0.0} and not res.done and not res.truncated
    assert np.abs(env._sim.raw_obs["robot0_eef_pos"] - eef0).max() < 0.005
    assert task.POOL.builds == builds + 1  # the pooled simulator again
    env.close()
    ep = Episode(turns=[Turn(obs, [], [], "not an action", res.rewards, info=res.info)], seed=1)
    assert task.report([ep], cfg)["invalid_action_rate"] == 1.0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_exit_frees_render_contexts_quietly(tmp_path, tiny_model_path):
    """A process that rendered LIBERO frames exits without EGLError tracebacks ("Exception ignored in ..."):
    the pooled simulators are freed before robosuite's exit hook terminates the EGL display."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run(
        [sys.executable, "vlrl/evaluate.py", "task=libero", "task.suite=libero_spatial", f"model.path={tiny_model_path}",
         "task.task_ids=[0]", "task.trials_per_task=1", "task.max_steps=2", "rollout.max_turns=220",
         f"eval.output={tmp_path / 'r.json'}"],
        cwd=root, capture_output=True, text=True, timeout=280, env=dict(os.environ, OMP_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Exception ignored" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_train_split_is_open_ended_and_reported_by_placement():
    from vlrl.episode import Episode, Observation, Turn

    cfg = task.Config(suite="libero_object", task_ids=[1, 2])
    assert task.num_examples(cfg, "train") is None and task.num_examples(cfg, "eval") == 100

    def episode(seed, tid, success):
        obs = Observation(messages=[], info={"task_id": tid, "trial": None, "init_state": "random"})
        return Episode(turns=[Turn(obs, [1], [0.0], rewards={"success": float(success)})], seed=seed)

    rep = task.report([episode(7, 2, True), episode(8, 1, False), episode(9, 2, False)], cfg)
    tasks = {t["task_id"]: t for t in rep["suites"]["libero_object"]["tasks"]}
    assert tasks[2]["init_states"] == ["random:7", "random:9"] and tasks[2]["success_rate"] == 0.5
    assert tasks[1]["init_states"] == ["random:8"] and rep["count"] == 3
