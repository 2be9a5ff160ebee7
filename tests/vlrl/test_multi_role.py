"""Multi-role episodes in the core: roles per turn, multi-sample turns in one generate call, per-role
baselines as the advantage (algo.advantage=role), trained-role schedules, per-role metrics in the loggers."""

import json
import math
import os

import pytest
import torch

from vlrl.algos.roles import RoleBaselines, role_metrics
from vlrl.config import compose, validate
from vlrl.episode import Episode, Observation, Turn
from vlrl.rollout import run_episodes
from vlrl.rollout.sample import Sample

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE_TASK = [f"task.module={ROOT}/tests/role_task", "model=tiny", "algo.advantage=role", "algo.group_size=1",
             "trainer.prompts_per_step=3", "rollout.max_new_tokens=4", "rollout.max_turns=8",
             "trainer.progress=false", "trainer.eval_examples=0", "trainer.lr=1e-3"]


class FakeEngine:
    """Answers every prompt with its call and row index; records each call's prompt texts."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def generate(self, observations, n=1, greedy=False):
        texts = [o.messages[0]["content"][1]["text"] for o in observations]
        self.calls.append(texts)
        c = len(self.calls)
        return [[Sample([1, 2], [-0.5, -0.5], f"{c}.{i}.{j}", True) for j in range(n)] for i in range(len(observations))]


def test_every_live_game_in_one_call_and_num_samples_stepped_in_order():
    from tests.role_task import Config, make_env

    cfg = Config(rounds=1, judge_samples=3)
    engine = FakeEngine()
    eps = run_episodes(engine, lambda: make_env(cfg, "train"), [10, 11], 1, max_turns=8)
    # turns: a, b, judge x 3 -> three generate calls for two games: [a a], [b b], [judge x 3, judge x 3]
    assert [len(c) for c in engine.calls] == [2, 2, 6]
    assert engine.calls[2] == ["seed 10 turn 2 you are judge"] * 3 + ["seed 11 turn 2 you are judge"] * 3
    for g, ep in enumerate(eps):
        assert [t.observation.role for t in ep.turns] == ["a", "b", "judge", "judge", "judge"]
        assert [t.response_text for t in ep.turns[2:]] == [f"3.{3 * g + j}.0" for j in range(3)]
        assert [t.done for t in ep.turns] == [False, False, False, False, True]
        assert not any(t.truncated for t in ep.turns)
        # the three judge turns share one observation object (one encoding)
        assert ep.turns[2].observation is ep.turns[4].observation


def test_turn_limit_counts_a_multi_sample_turn_once():
    from tests.role_task import Config, make_env

    eps = run_episodes(FakeEngine(), lambda: make_env(Config(rounds=1, judge_samples=3), "train"), [1], 1, max_turns=2)
    assert [t.observation.role for t in eps[0].turns] == ["a", "b"] and eps[0].turns[-1].truncated


def _turn(role, reward):
    obs = Observation(messages=[], role=role)
    return Turn(obs, [1], [-1.0], rewards={"r": reward})


def test_role_rows_golden_and_untrained_roles_get_no_rows():
    from vlrl.train import role_rows

    cfg, _ = validate(compose(ROLE_TASK))
    eps = [Episode([_turn("a", 1.0), _turn("b", -2.0), _turn("judge", 3.0)]),
           Episode([_turn("a", 3.0), _turn("b", 0.0), _turn("judge", float("nan"))])]
    baselines = RoleBaselines(["a", "b", "judge"])
    rows, stats = role_rows(eps, baselines, cfg, ["a", "b"])
    # first observation: baselines are the batch means a=2, b=-1, judge=3 (NaN left out)
    assert [r.advantage for r in rows] == [-1.0, -1.0, 1.0, 1.0]
    assert [r.row.observation.role for r in rows] == ["a", "b", "a", "b"]
    assert stats["role/judge/trained"] == 0.0 and stats["role/a/trained"] == 1.0
    assert stats["role/judge/reward"] == 3.0 and stats["role/judge/turns"] == 2.0
    rows, _ = role_rows(eps, baselines, cfg, None)  # second step: EMA 0.9 * 2 + 0.1 * 2 = 2 etc.
    assert len(rows) == 6 and rows[2].advantage == pytest.approx(0.0) and rows[5].advantage == 0.0


def test_role_metrics_golden():
    m = role_metrics([1.0, 3.0, float("nan"), -1.0], ["a", "a", "b", "b"], [0.5, -0.5, 0.0, 2.0],
                     ["a", "b", "c"], {"a": 2.0, "b": -1.0}, trained=["b"])
    assert m["role/a/reward"] == 2.0 and m["role/b/reward"] == -1.0 and math.isnan(m["role/c/reward"])
    assert m["role/a/advantage"] == 0.0 and m["role/b/advantage"] == 1.0
    assert m["role/a/baseline"] == 2.0 and math.isnan(m["role/c/baseline"])
    assert (m["role/a/trained"], m["role/b/trained"], m["role/c/turns"]) == (0.0, 1.0, 0.0)


def test_role_advantage_needs_declared_roles():
    from vlrl.task import TaskError

    _, task = validate(compose(["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]"]))
    with pytest.raises(TaskError, match="declares no roles"):
        task.roles(None)
    with pytest.raises(ValueError, match="algo.role_decay"):
        validate(compose(ROLE_TASK + ["algo.role_decay=1.5"]))


@pytest.mark.slow
def test_trains_with_role_baselines_and_logs_every_role(tmp_path):
    from vlrl.train import run

    out = tmp_path / "run"
    cfg, task = validate(compose(ROLE_TASK + ["trainer.steps=2", f"trainer.output_dir={out}",
                                              "trainer.loggers=[jsonl,tensorboard]"]))
    run(cfg, task)
    records = [json.loads(ln) for ln in open(out / "metrics.jsonl")]
    assert len(records) == 2
    for role in ("a", "b", "judge"):
        assert records[0][f"role/{role}/turns"] == (6.0 if role != "judge" else 9.0)
        assert not math.isnan(records[1][f"role/{role}/baseline"])
    assert records[0]["role/judge/trained"] == 0.0 and records[1]["role/judge/trained"] == 1.0
    assert records[1]["game/episodes_seen"] == 6.0
    assert list((out / "tensorboard").glob("events.*"))
    state = torch.load(next((out / "checkpoints").glob("step_*")) / "trainer_state.pt", weights_only=True)
    assert set(state["role_baselines"]["baselines"]) == {"a", "b", "judge"}
    assert state["role_schedule"] == {"seen": 6}


def test_frozen_roles_are_played_by_the_frozen_engine_in_order():
    from tests.role_task import Config, make_env
    from vlrl.rollout import FrozenRoles

    policy, frozen = FakeEngine(), FakeEngine()
    policy.synced = frozen.synced = 0
    policy.sync_weights = lambda: setattr(policy, "synced", policy.synced + 1)
    engine = FrozenRoles(policy, frozen, ["b"])
    eps = run_episodes(engine, lambda: make_env(Config(rounds=2, judge_samples=2), "train"), [10, 11], 1, max_turns=8)
    # a, b, a, b, judge x 2: each round's prompts of one kind go to one engine in one call
    assert [len(c) for c in policy.calls] == [2, 2, 4] and [len(c) for c in frozen.calls] == [2, 2]
    assert all("you are b" in t for c in frozen.calls for t in c)
    assert not any("you are b" in t for c in policy.calls for t in c)
    for g, ep in enumerate(eps):
        assert [t.observation.role for t in ep.turns] == ["a", "b", "a", "b", "judge", "judge"]
        assert [t.response_text for t in ep.turns[1:4:2]] == [f"1.{g}.0", f"2.{g}.0"]  # the frozen engine's answers
        assert ep.turns[2].response_text == f"2.{g}.0" and ep.turns[4].response_text == f"3.{2 * g}.0"
    mixed = engine.generate([eps[1].turns[1].observation, eps[0].turns[0].observation], n=2)  # b, a
    assert [s.text for s in mixed[0]] == ["3.0.0", "3.0.1"] and [s.text for s in mixed[1]] == ["4.0.0", "4.0.1"]
    engine.sync_weights()
    assert policy.synced == 1 and frozen.synced == 0


@pytest.mark.slow
def test_frozen_roles_get_no_gradient_and_their_turns_still_count(tmp_path, monkeypatch):
    import vlrl.train as train

    trained_roles = []

    def spy_update(model, processor, optimizer, scheduler, rows, *a, **k):
        trained_roles.append(sorted({r.row.observation.role for r in rows}))
        return real_update(model, processor, optimizer, scheduler, rows, *a, **k)

    real_update = train.update
    monkeypatch.setattr(train, "update", spy_update)
    out = tmp_path / "run"
    cfg, task = validate(compose(ROLE_TASK + ["trainer.steps=2", f"trainer.output_dir={out}",
                                              "rollout.frozen_roles=[a]"]))
    train.run(cfg, task)
    # the schedule trains a and b at step 0, the judge at step 1; a is frozen throughout
    assert trained_roles == [["b"], ["judge"]]
    records = [json.loads(ln) for ln in open(out / "metrics.jsonl")]
    assert records[0]["role/a/trained"] == 0.0 and records[0]["role/b/trained"] == 1.0
    assert records[0]["role/a/turns"] == 6.0 and not math.isnan(records[1]["role/a/baseline"])


def test_frozen_roles_must_be_roles_and_are_refused_where_no_role_trains(tmp_path):
    from vlrl.config import UsageError
    from vlrl.evaluate import check_max_turns
    from vlrl.sft import check_supported
    from vlrl.train import run

    cfg, task = validate(compose(ROLE_TASK + ["trainer.steps=1", f"trainer.output_dir={tmp_path}",
                                              "rollout.frozen_roles=[a,spy]"]))
    with pytest.raises(UsageError, match=r"rollout.frozen_roles.*\['spy'\] are not roles"):
        run(cfg, task)
    for check in (lambda: check_max_turns(cfg, task), lambda: check_supported(cfg)):
        with pytest.raises(UsageError, match="rollout.frozen_roles"):
            check()
    with pytest.raises(ValueError, match="rollout.frozen_roles"):
        validate(compose(ROLE_TASK + ["rollout.frozen_roles=[a]", "rollout.engine=vllm"]))
