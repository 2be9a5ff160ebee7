"""The core's asynchronous actor/learner loop on a plain in-process env (the toy task): episodes collected from
published weights while the learner updates, weight hand-over, stop, errors, saving."""

import json
import os
import sys
import threading
import time

import pytest
import torch

from vlrl.actor_learner import ActorLearner, ActorLearnerConfig, baseline_advantages
from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from toy_task import Config, make_env  # noqa: E402

pytestmark = pytest.mark.timeout(300)
TURNS = 3


class SlowToyEnv:
    """The toy env, each step taking `step_s` (so the actor is still acting while an update runs); optionally
    taking token ids (`step_ids`), or raising at a given step."""

    def __init__(self, step_s=0.0, ids=False, fail_at=None):
        self.env, self.step_s, self.fail_at, self.steps = make_env(Config(turns=TURNS), "train"), step_s, fail_at, 0
        if ids:
            self.step_ids = lambda response_ids: self.step(f"ids {len(response_ids)}")

    def reset(self, seed):
        return self.env.reset(seed)

    def step(self, text):
        self.steps += 1
        if self.steps == self.fail_at:
            raise RuntimeError("env failed")
        time.sleep(self.step_s)
        return self.env.step(text)


def _cfg(tiny_model_path, **kw):
    return ActorLearnerConfig(model=ModelConfig(path=tiny_model_path), algo=AlgoConfig(),
                              rollout=RolloutConfig(max_new_tokens=4, max_turns=TURNS),
                              trainer=TrainerConfig(lr=1e-2, micro_batch_size=16), **kw)


def test_baseline_advantages_use_the_window():
    adv = baseline_advantages([1.0, 0.0], history=[5.0] * 50, window=4, scale="group")
    ref = baseline_advantages([1.0, 0.0], history=[5.0, 5.0], window=4, scale="group")
    assert adv == ref and adv[0] < 0 and adv[1] < adv[0]  # only the last 4 returns: both below the 5.0s
    assert baseline_advantages([3.0], history=[], window=4, scale="group") == [0.0]  # alone: no baseline


def test_actor_keeps_acting_while_the_learner_updates_and_weights_are_published(tiny_model_path, tmp_path):
    loop = ActorLearner(_cfg(tiny_model_path, episodes=5, episodes_per_update=1, out_dir=str(tmp_path)),
                        make_env=lambda: SlowToyEnv(step_s=0.1), device="cpu")
    before = {k: v.detach().clone() for k, v in loop.model.state_dict().items()}
    t0 = time.monotonic()
    summary = loop.run()
    print(f"wall {time.monotonic() - t0:.1f}s: {summary}")

    assert summary["episodes"] == 5 and summary["updates"] == 5 == loop.version and summary["turns"] == 5 * TURNS
    for i, ep in enumerate(loop.episodes):
        assert ep.info["index"] == i and ep.seed == i and ep.info["end"] == "done" and len(ep.turns) == TURNS
        assert ep.turns[-1].done and not any(t.done for t in ep.turns[:-1])
        assert all(0 <= t.rewards["score"] <= 1 and len(t.logprobs) == len(t.response_ids) for t in ep.turns)
    # The learner trained on every turn, changed the weights and handed them to the actor.
    assert [u["rows"] for u in loop.updates] == [TURNS] * 5 and [u["version"] for u in loop.updates] == [1, 2, 3, 4, 5]
    after = loop.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    actor = loop.actor_model.state_dict()
    assert all(torch.equal(after[k], actor[k]) for k in after)
    # Asynchronous: a turn was acted during an update, and later episodes used newer weights.
    turn_times = [t.info["t"] for ep in loop.episodes for t in ep.turns]
    assert any(u["t_start"] < tt < u["t_end"] for u in loop.updates for tt in turn_times)
    versions = [max(t.info["policy_version"] for t in ep.turns) for ep in loop.episodes]
    assert versions == sorted(versions) and versions[0] == 0 and versions[-1] >= 1
    # trained on: the images and their cached encodings are freed
    assert all(t.observation.images == [] and not t.observation.cache for ep in loop.episodes for t in ep.turns)
    # Saved: the policy, one line per episode and update, the summary with the config.
    assert os.path.exists(tmp_path / "policy" / "config.json")
    assert len(open(tmp_path / "episodes.jsonl").readlines()) == 5
    assert len(open(tmp_path / "updates.jsonl").readlines()) == 5
    saved = json.load(open(tmp_path / "summary.json"))
    assert saved["summary"]["episodes"] == 5 and saved["config"]["episodes_per_update"] == 1


def test_stop_and_errors(tiny_model_path):
    # stop() from another thread ends the run early: the current episode ends "stopped", the learner after the
    # update in progress (episodes not trained yet stay untrained).
    loop = ActorLearner(_cfg(tiny_model_path, episodes=50, episodes_per_update=2),
                        make_env=lambda: SlowToyEnv(step_s=0.05, ids=True), device="cpu")
    threading.Timer(1.5, loop.stop).start()
    summary = loop.run()
    assert 1 <= summary["episodes"] < 50 and loop.episodes[0].turns[0].response_text
    assert all(ep.info["end"] in ("done", "stopped") for ep in loop.episodes)
    trained = [i for u in loop.updates for i in u["episodes"]]
    assert trained == list(range(len(trained))) and len(trained) <= len(loop.episodes)
    # Trained-on episodes gave their images back (memory); the rest still hold theirs.
    for ep in loop.episodes:
        assert all(bool(t.observation.images) == bool(t.observation.cache) == (ep.info["index"] not in trained)
                   for t in ep.turns)
    assert loop.version == len(loop.updates)
    # An env that fails stops both threads, and run() re-raises its error.
    loop = ActorLearner(_cfg(tiny_model_path, episodes=5), make_env=lambda: SlowToyEnv(fail_at=5), device="cpu")
    with pytest.raises(RuntimeError, match="env failed"):
        loop.run()
    assert len(loop.episodes) == 1  # the second episode failed at its second step
    with pytest.raises(ValueError, match="episodes_per_update"):
        ActorLearnerConfig(episodes_per_update=0)


def test_frozen_roles_are_refused_by_the_role_less_loop(tiny_model_path):
    from vlrl.config import UsageError

    cfg = _cfg(tiny_model_path, episodes=1)
    cfg.rollout = RolloutConfig(max_new_tokens=4, max_turns=TURNS, frozen_roles=["spy"])
    with pytest.raises(UsageError, match="rollout.frozen_roles"):
        ActorLearner(cfg, make_env=lambda: SlowToyEnv(), device="cpu")
