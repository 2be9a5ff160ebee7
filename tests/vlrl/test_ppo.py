"""PPO over multi-turn episodes (VLA-RL's formulation): GAE from a critic, value loss, critic warm-up,
group filtering and the seed curriculum, on the toy task with the tiny model."""

import json
import math
import os

import pytest
import torch
from safetensors.torch import load_file

from vlrl.config import compose, validate
from vlrl.critic import Critic, episode_values
from vlrl.curriculum import SeedCurriculum
from vlrl.episode import Episode, Observation, Turn
from vlrl.train import informative, run
from vlrl.trainer import build_turn_rows, gae_advantages

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOY = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]"]
FAST = ["trainer.prompts_per_step=2", "rollout.max_new_tokens=4", "trainer.progress=false", "trainer.lr=1e-3"]
PPO = ["algo=vla_ppo", "task.turns=3", "rollout.max_turns=2", "algo.group_size=2"]


def _cfg(*overrides):
    return validate(compose(TOY + FAST + list(overrides)))


def _metrics(out):
    return [json.loads(ln) for ln in open(os.path.join(out, "metrics.jsonl"))]


def _turn(reward, done=False, truncated=False):
    return Turn(observation=Observation(messages=[]), response_ids=[1], logprobs=[0.0], rewards={"r": reward},
                done=done, truncated=truncated)


def test_gae_advantages_done_truncated_unscorable_and_whitening():
    cfg, _ = _cfg(*PPO, "algo.scale=none", "algo.gamma=0.9", "algo.lam=0.5")
    done = Episode(turns=[_turn(0.0), _turn(1.0, done=True)])
    cut = Episode(turns=[_turn(0.5), _turn(0.0, truncated=True)])
    bad = Episode(turns=[_turn(None)])
    values = [[0.2, 0.4], [0.1, 0.3], [0.7]]
    advs, rets = gae_advantages([done, cut, bad], cfg.algo, values, [None, 2.0, None])
    # Hand-computed: terminal -> no bootstrap; truncated -> bootstrap 2.0 after the last turn.
    d1 = 1.0 - 0.4
    d0 = 0.0 + 0.9 * 0.4 - 0.2
    assert advs[0] == pytest.approx([d0 + 0.9 * 0.5 * d1, d1])
    c1 = 0.0 + 0.9 * 2.0 - 0.3
    c0 = 0.5 + 0.9 * 0.3 - 0.1
    assert advs[1] == pytest.approx([c0 + 0.45 * c1, c1])
    assert rets[1] == pytest.approx([advs[1][0] + 0.1, c1 + 0.3])
    assert advs[2] == [0.0] and rets[2] == [0.7]  # unscorable: no signal
    cfg_b, _ = _cfg(*PPO, "algo.gamma=0.9", "algo.lam=0.5")  # scale=batch: whitened over all turns
    wb, _ = gae_advantages([done, cut, bad], cfg_b.algo, values, [None, 2.0, None])
    flat = torch.tensor([x for a in wb for x in a])
    raw = torch.tensor([x for a in advs for x in a])
    torch.testing.assert_close(flat, (raw - raw.mean()) / (raw.std() + 1e-4))
    rows = build_turn_rows([done], advs[:1], values[:1], rets[:1])
    assert [(r.advantage, r.old_value, r.value_target) for r in rows] == list(zip(advs[0], values[0], rets[0]))


def test_gae_config_validation():
    with pytest.raises(ValueError, match="algo.scale"):
        _cfg("algo.advantage=gae", "algo.scale=group")
    with pytest.raises(ValueError, match="algo.critic"):
        _cfg(*PPO, "algo.critic=twin")
    with pytest.raises(ValueError, match="algo.importance_level"):
        _cfg("algo.importance_level=episode")


def test_critic_shared_and_separate(tiny_model_path):
    from vlrl.config import ModelConfig
    from vlrl.models import load_model, load_processor

    mcfg = ModelConfig(path=tiny_model_path)
    policy, processor = load_model(mcfg), load_processor(mcfg)
    shared = Critic(policy, separate=False)
    assert set(shared.state_dict()) == {"head.weight", "head.bias"}  # the policy's weights are not the critic's
    separate = Critic(load_model(mcfg), separate=True)
    assert len(separate.state_dict()) > 2
    from PIL import Image

    obs = [Observation(messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": t}]}],
                       images=[Image.new("RGB", (56, 56), c)]) for t, c in (("a", "red"), ("a longer prompt", "blue"))]
    assert shared(processor, obs).tolist() == [0.0, 0.0]  # zero-initialised head
    torch.nn.init.normal_(shared.head.weight)
    v = shared(processor, obs)
    v.sum().backward()
    assert v.shape == (2,) and v[0] != v[1]
    assert any(p.grad is not None for p in policy.parameters())  # shared: the value loss reaches the backbone
    policy.zero_grad()
    shared.head.weight.grad = None
    shared(processor, obs, train_backbone=False).sum().backward()
    assert all(p.grad is None for p in policy.parameters()) and shared.head.weight.grad is not None
    # A truncated episode's bootstrap observation is valued too.
    ep = Episode(turns=[Turn(obs[0], [1], [0.0])], info={"bootstrap_observation": obs[1]})
    vals, boot = episode_values(shared, processor, [ep, Episode(turns=[Turn(obs[1], [1], [0.0])])])
    assert len(vals[0]) == 1 and boot[0] == pytest.approx(float(v[1].detach())) and boot[1] is None


@pytest.mark.slow
def test_ppo_end_to_end_warmup_and_resume(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    common = PPO + ["algo.critic_warmup=1", "algo.critic_lr=1e-2"]
    run(*_cfg(*common, "trainer.steps=3", f"trainer.output_dir={a}", "trainer.save_every=1", "trainer.keep_checkpoints=5"))
    m = _metrics(a)
    assert all("value_loss" in r and math.isfinite(r["value_loss"]) for r in m)
    # Step 1 is critic warm-up: the policy is untouched, the critic head moved.
    w0 = load_file(os.path.join(ROOT, "assets", "tiny-qwen2.5-vl", "model.safetensors"))
    w1 = load_file(os.path.join(a, "checkpoints", "step_0000001", "model.safetensors"))
    w2 = load_file(os.path.join(a, "checkpoints", "step_0000002", "model.safetensors"))
    assert all(torch.equal(w0[k], w1[k]) for k in w0)
    assert any(not torch.equal(w1[k], w2[k]) for k in w1)
    s1 = torch.load(os.path.join(a, "checkpoints", "step_0000001", "trainer_state.pt"), weights_only=True)
    assert s1["critic"]["head.weight"].abs().sum() > 0
    # Resume (critic, its optimizer and the policy) equals the uninterrupted run.
    run(*_cfg(*common, "trainer.steps=2", f"trainer.output_dir={b}"))
    run(*_cfg(*common, "trainer.steps=3", f"trainer.output_dir={b}", "trainer.resume=auto"))
    mb = _metrics(b)
    for ra, rb in zip(m, mb):
        for key in ("reward/mean", "loss", "value_loss", "grad_norm"):
            assert ra[key] == pytest.approx(rb[key], rel=1e-6, abs=1e-9), (ra["step"], key)
    s3a = torch.load(os.path.join(a, "checkpoints", "step_0000003", "trainer_state.pt"), weights_only=True)
    s3b = torch.load(os.path.join(b, "checkpoints", "step_0000003", "trainer_state.pt"), weights_only=True)
    assert torch.equal(s3a["critic"]["head.weight"], s3b["critic"]["head.weight"])


def test_filter_groups_drops_uniform_groups():
    cfg, _ = _cfg("algo.group_size=2")
    eps = [Episode(turns=[_turn(r)], group_id=g) for g, r in enumerate([1.0, 1.0, 0.0, 1.0, 0.0, 0.0])]
    assert informative(eps, cfg) == [False, False, True, True, False, False]
    eps[4] = Episode(turns=[_turn(None)])
    assert informative(eps, cfg)[4:] == [False, False]  # unscorable groups are dropped too


def test_curriculum_prefers_unsolved_and_round_trips():
    cur = SeedCurriculum(pool=4, window=3, temperature=0.5)
    for _ in range(3):
        cur.record(0, 1.0)  # solved
        cur.record(1, 0.0)  # failing
    cur.record(2, 1.0)
    cur.record(2, 0.0)
    assert cur.success_rates().tolist() == [1.0, 0.0, 0.5, 0.0]
    draws = [s for i in range(200) for s in cur.sample(1, torch.Generator().manual_seed(i))]
    assert draws.count(0) == 0 and draws.count(1) > draws.count(2) and draws.count(3) > draws.count(2)
    cur.record(1, 1.0)
    cur.record(1, 1.0)
    cur.record(1, 1.0)  # window 3: the failures are forgotten
    assert cur.success_rates()[1] == 1.0
    again = SeedCurriculum(4, 3, 0.5)
    again.load_state_dict(json.loads(json.dumps(cur.state_dict())))
    assert torch.equal(again.success_rates(), cur.success_rates())
    assert sorted(cur.sample(4, torch.Generator().manual_seed(0))) == [0, 1, 2, 3]  # distinct seeds


def test_curriculum_pool_can_start_past_the_warm_start_seeds():
    cur = SeedCurriculum(pool=3, window=2, temperature=1.0, first=200)
    assert sorted(cur.sample(3, torch.Generator().manual_seed(0))) == [200, 201, 202]
    cur.record(201, 1.0)
    cur.record(7, 0.0)  # outside the pool: kept in history, ignored by the weights
    assert cur.success_rates().tolist() == [0.0, 1.0, 0.0]
    draws = [s for i in range(100) for s in cur.sample(1, torch.Generator().manual_seed(i))]
    assert set(draws) <= {200, 202}


def test_learnability_curriculum_prefers_mixed_outcomes():
    cur = SeedCurriculum(pool=4, window=4, temperature=1.0, weighting="learnability")
    for hit in (1.0, 1.0, 1.0, 1.0):
        cur.record(0, hit)  # solved
        cur.record(1, 0.0)  # hopeless
    for hit in (1.0, 0.0, 0.0, 1.0):
        cur.record(2, hit)  # mixed: the group-relative advantage has signal here
    # seed 3 untried: counts as mixed, so it is visited
    draws = [s for i in range(400) for s in cur.sample(1, torch.Generator().manual_seed(i))]
    assert draws.count(2) > 10 * max(draws.count(0), draws.count(1), 1) and draws.count(3) > 10 * max(draws.count(0), 1)
    with pytest.raises(ValueError, match="weighting"):
        SeedCurriculum(4, 4, 1.0, weighting="easiest")
    with pytest.raises(ValueError, match="trainer.curriculum_weighting"):
        _cfg("trainer.curriculum_weighting=easiest")


@pytest.mark.slow
def test_grpo_with_curriculum_and_filtering_runs(tmp_path):
    out = str(tmp_path / "g")
    run(*_cfg("algo=vla_grpo", "algo.group_size=2", "trainer.curriculum_pool=3", "trainer.steps=2",
              f"trainer.output_dir={out}"))
    m = _metrics(out)
    # The groups kept are exactly those whose rewards differ, and this run has a flat group to drop (step 2).
    assert [r["groups/kept_frac"] for r in m] == [pytest.approx(1 - r["groups/frac_zero_std"]) for r in m]
    assert min(r["groups/kept_frac"] for r in m) < 1.0
    state = torch.load(os.path.join(out, "checkpoints", "step_0000002", "trainer_state.pt"), weights_only=True)
    assert sum(len(v) for v in state["curriculum"].values()) == 2 * 2 * 2  # steps x prompts x G outcomes


def test_time_budget_stops_and_saves(tmp_path):
    out = str(tmp_path / "t")
    run(*_cfg("trainer.steps=50", "trainer.max_minutes=0.0001", f"trainer.output_dir={out}", "algo.group_size=2"))
    m = _metrics(out)
    assert [r["step"] for r in m] == [1]  # the first step already crosses a 6 ms budget
    assert os.path.isdir(os.path.join(out, "checkpoints", "step_0000001"))
    state = torch.load(os.path.join(out, "checkpoints", "step_0000001", "trainer_state.pt"), weights_only=True)
    assert state["train_seconds"] > 0.0001 * 60
    # Resumed, the run finds its budget used: it trains no further instead of starting a fresh budget.
    run(*_cfg("trainer.steps=50", "trainer.max_minutes=0.0001", f"trainer.output_dir={out}", "algo.group_size=2",
              "trainer.resume=auto"))
    assert [r["step"] for r in _metrics(out)] == [1]
    assert [p for p in os.listdir(os.path.join(out, "checkpoints")) if p.startswith("step_")] == ["step_0000001"]
    with pytest.raises(ValueError, match="trainer.max_minutes"):
        _cfg("trainer.max_minutes=-1")
