"""trainer.shared_prefix: each group's prompt through the language model once, same log-probs and gradients.

The shared-prefix forward (vlrl/shared_prefix.py) must equal the plain forward (every row as its full
sequence) within 1e-5 in float32: log-probs, every parameter's gradient, for every loss type, with
images (mixed sizes, several per prompt), video, text-only prompts, left-padded mixed batches, multi-turn
observations, constrained decoding, gradient checkpointing, micro-batching with accumulation; and a
seeded training run logs the same rewards and grad norms with the switch on and off.
"""

import dataclasses
import json
import os
import random

import pytest
import torch
from PIL import Image

from vlrl.algos.losses import LOSS_TYPES
from vlrl.config import AlgoConfig, Config, ModelConfig, RolloutConfig, TrainerConfig, UsageError
from vlrl.episode import Observation
from vlrl.forward import Row, response_logprobs
from vlrl.models import load_model, load_processor
from vlrl.shared_prefix import resolve, suffix_positions
from vlrl.trainer import TrainRow, _policy_loss, make_scheduler, update

TOL = 1e-5


def _image_obs(size, color, text, n_images=1):
    content = [{"type": "image"}] * n_images + [{"type": "text", "text": text}]
    return Observation(messages=[{"role": "user", "content": content}], images=[Image.new("RGB", size, color)] * n_images)


def _text_obs(text):
    return Observation(messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])


def _second_turn_obs(size, color):
    """A later turn of a multi-turn episode: earlier prompt, the policy's answer, a new image."""
    return Observation(
        messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "first look"}]},
                  {"role": "assistant", "content": [{"type": "text", "text": "move left"}]},
                  {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and now?"}]}],
        images=[Image.new("RGB", size, color), Image.new("RGB", (size[1], size[0]), color)],
    )


def _video_obs(frames: int, size, text: str = "what happens in the video?"):
    clip = [Image.new("RGB", size, (20 * k, 100, 200 - 20 * k)) for k in range(frames)]
    return Observation(messages=[{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": text}]}],
                       videos=[clip], video_fps=[2.0])


CASES = {
    "images_mixed_sizes": lambda: [_image_obs((200, 120), (255, 0, 0), "click the red button"),
                                   _image_obs((84, 300), (0, 0, 255), "a longer instruction so that prompts differ")],
    "several_images_per_prompt": lambda: [_image_obs((140, 140), (0, 255, 0), "two images", n_images=2),
                                          _image_obs((56, 112), (9, 9, 9), "three", n_images=3)],
    "text_only": lambda: [_text_obs("a text prompt"), _text_obs("another, longer text-only prompt here")],
    "mixed_batch": lambda: [_image_obs((200, 120), (255, 0, 0), "image"), _text_obs("text only, left-padded"),
                            _image_obs((56, 56), (1, 2, 3), "two", n_images=2)],
    "video": lambda: [_video_obs(4, (84, 56)), _image_obs((56, 84), (3, 90, 3), "an image beside the video")],
    "multi_turn": lambda: [_image_obs((112, 84), (200, 10, 10), "first look"), _second_turn_obs((84, 112), (5, 5, 200))],
}


def _rows(observations, group: int = 3, seed: int = 0) -> list[Row]:
    """`group` ragged responses per observation, shuffled so a group's rows are not contiguous."""
    g = torch.Generator().manual_seed(seed)
    rows = [Row(o, torch.randint(10, 2000, (3 + 2 * j,), generator=g).tolist()) for o in observations for j in range(group)]
    random.Random(seed).shuffle(rows)
    return rows


@pytest.fixture(scope="module")
def policy(tiny_model_path):
    cfg = ModelConfig(path=tiny_model_path)
    return load_model(cfg), load_processor(cfg)


def _logp_and_grads(model, processor, rows, shared: bool, temperature: float = 1.0):
    model.zero_grad(set_to_none=True)
    logp, mask = response_logprobs(model, processor, rows, temperature, shared_prefix=shared)
    weights = torch.linspace(0.5, 1.5, logp.numel()).view_as(logp)  # every token's gradient counts differently
    (logp * mask * weights).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logp.detach(), mask, grads


def _assert_same(a, b):
    (lp_a, mask, g_a), (lp_b, _, g_b) = a, b
    assert ((lp_a - lp_b).abs() * mask).max().item() <= TOL
    assert set(g_a) == set(g_b) and len(g_a) > 0
    for name in g_a:
        assert torch.allclose(g_a[name], g_b[name], atol=TOL, rtol=0), (name, (g_a[name] - g_b[name]).abs().max().item())


@pytest.mark.parametrize("case", sorted(CASES))
def test_logprobs_and_every_gradient_equal_the_plain_forward(policy, case):
    model, processor = policy
    rows = _rows(CASES[case]())
    plain = _logp_and_grads(model, processor, rows, shared=False, temperature=1.3)
    shared = _logp_and_grads(model, processor, rows, shared=True, temperature=1.3)
    _assert_same(plain, shared)
    # The vision tower and the language model both received gradient (the comparison is not vacuous).
    assert any("visual" in n and g.abs().sum() > 0 for n, g in plain[2].items()) or case == "text_only"
    assert plain[2]["model.language_model.layers.0.self_attn.q_proj.weight"].abs().sum() > 0


def test_a_wrong_position_would_be_caught(policy):
    """The comparison is sensitive: shifting the responses' positions by one changes the log-probs."""
    model, processor = policy
    rows = _rows(CASES["images_mixed_sizes"]())
    import vlrl.shared_prefix as sp

    with torch.no_grad():
        good, mask = response_logprobs(model, processor, rows, shared_prefix=True)
        original = sp.suffix_positions
        sp.suffix_positions = lambda last, m: original(last + 1, m)
        try:
            bad, _ = response_logprobs(model, processor, rows, shared_prefix=True)
        finally:
            sp.suffix_positions = original
    assert ((good - bad).abs() * mask).max().item() > 1e-4


def test_constrained_decoding_rows(policy):
    model, processor = policy
    obs = _image_obs((90, 60), (10, 200, 10), "pick a digit")
    obs.allowed_ids = [range(10, 60), [70, 71, 72]]
    rows = [Row(obs, [12, 71, 400]), Row(obs, [59, 70]), Row(_text_obs("free"), [15, 16, 17, 18])]
    _assert_same(_logp_and_grads(model, processor, rows, False), _logp_and_grads(model, processor, rows, True))


def test_gradient_checkpointing_keeps_the_prompt_cache(tiny_model_path):
    cfg = ModelConfig(path=tiny_model_path, gradient_checkpointing=True)
    model, processor = load_model(cfg), load_processor(cfg)
    rows = _rows(CASES["mixed_batch"]())
    _assert_same(_logp_and_grads(model, processor, rows, False), _logp_and_grads(model, processor, rows, True))


def test_lora_adapters_same_gradient(tiny_model_path):
    from vlrl.config import LoraConfig

    cfg = ModelConfig(path=tiny_model_path, lora=LoraConfig(r=4))
    model, processor = load_model(cfg), load_processor(cfg)
    for name, p in model.named_parameters():  # B starts at 0: give the adapters a gradient path through A too
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    rows = _rows(CASES["mixed_batch"]())
    plain, shared = _logp_and_grads(model, processor, rows, False), _logp_and_grads(model, processor, rows, True)
    _assert_same(plain, shared)
    assert any("lora_A" in n for n in plain[2])


def _train_rows(rows: list[Row]) -> list[TrainRow]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i, r in enumerate(rows):
        old = (-3.0 + 0.3 * torch.randn(len(r.response_ids), generator=g)).tolist()
        out.append(TrainRow(r, old, advantage=float(torch.randn((), generator=g)), weight=1.0 + 0.5 * (i % 2)))
    return out


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_every_loss_type_same_gradient(policy, loss_type):
    model, processor = policy
    mb = _train_rows(_rows(CASES["mixed_batch"]()))
    algo = AlgoConfig(loss_type=loss_type, beta=0.04 if loss_type == "grpo" else 0.0)
    results = []
    for shared in (False, True):
        model.zero_grad(set_to_none=True)
        loss = _policy_loss(model, processor, mb, algo, 1.0, model, lambda k, v: None, len(mb),
                            sum(len(r.row.response_ids) for r in mb), 1, 8, shared)
        loss.backward()
        results.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (l0, g0), (l1, g1) = results
    assert l0 == pytest.approx(l1, abs=TOL)
    assert any(g.abs().sum() > 0 for g in g0.values())
    for name in g0:
        assert torch.allclose(g0[name], g1[name], atol=TOL, rtol=0), (loss_type, name)


def test_micro_batching_and_accumulation_same_update(policy):
    """Micro-batches of 4 split groups of 3 across passes; the accumulated update equals the plain one."""
    model, processor = policy
    rows = _train_rows(_rows(CASES["mixed_batch"]() + CASES["text_only"]()))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    after, norms = [], []
    for shared in (False, True):
        model.load_state_dict(before)
        model.zero_grad(set_to_none=True)  # update() accumulates into .grad: start both runs clean
        cfg = Config(algo=AlgoConfig(loss_type="dapo"), rollout=RolloutConfig(max_new_tokens=8),
                     trainer=TrainerConfig(micro_batch_size=4, lr=1e-2, max_grad_norm=0.0, shared_prefix=shared))
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        out = update(model, processor, opt, make_scheduler(opt, cfg.trainer, 1), rows, cfg)
        norms.append(out["grad_norm"])
        after.append({k: v.clone() for k, v in model.state_dict().items()})
    model.load_state_dict(before)
    assert norms[0] > 0 and norms[0] == pytest.approx(norms[1], rel=1e-4)
    moved = max((after[0][k] - before[k]).abs().max().item() for k in before)
    assert moved > 1e-4
    for k in before:
        assert torch.allclose(after[0][k], after[1][k], atol=TOL, rtol=0), k


def test_suffix_positions_continue_from_the_prompt():
    last = torch.tensor([10, 4])
    mask = torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])
    pos = suffix_positions(last, mask)
    assert pos.shape == (3, 2, 4)
    assert pos[0].tolist() == [[10, 10, 11, 12], [4, 5, 6, 7]]
    assert torch.equal(pos[0], pos[2])


def test_default_on_where_supported_and_refused_under_fsdp2():
    assert resolve(None, "data_parallel") and resolve(None, "zero3") and not resolve(None, "fsdp2")
    assert not resolve(False, "data_parallel") and resolve(True, "zero3")
    with pytest.raises(UsageError, match="trainer.shared_prefix"):
        resolve(True, "fsdp2")
    assert TrainerConfig().shared_prefix is None
    assert "FSDP2" in dataclasses.fields(TrainerConfig)[[f.name for f in dataclasses.fields(TrainerConfig)].index(
        "shared_prefix")].metadata["help"]


@pytest.mark.slow
def test_two_seeded_training_steps_log_the_same_with_the_switch_on_and_off(tmp_path):
    from vlrl.config import compose, validate
    from vlrl.train import run

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    base = ["task=toy", "model=tiny", f"hydra.searchpath=[file://{root}/tests/configs]", "trainer.prompts_per_step=2",
            "algo.group_size=4", "rollout.max_new_tokens=6", "trainer.progress=false", "trainer.lr=1e-3",
            "trainer.steps=2", "trainer.micro_batch_size=3", "trainer.save_every=0"]
    logs = []
    for switch in ("false", "true"):
        out = str(tmp_path / switch)
        run(*validate(compose(base + [f"trainer.output_dir={out}", f"trainer.shared_prefix={switch}"])))
        logs.append([json.loads(ln) for ln in open(os.path.join(out, "metrics.jsonl"))])
    assert [m["step"] for m in logs[0]] == [1, 2]
    for a, b in zip(*logs):
        assert a["reward/mean"] == pytest.approx(b["reward/mean"], rel=1e-4)
        assert a["grad_norm"] > 0 and a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-6)  # on-policy loss is ~0: rounding


def test_padding_columns_are_zero_not_minus_inf(policy):
    """A short response beside a long one: its padding columns reach back into the prompt's image placeholders
    (banned tokens, -inf); a masked sum must stay finite in both forwards (it was NaN before)."""
    model, processor = policy
    obs = _image_obs((56, 56), (200, 30, 30), "hi")
    rows = [Row(obs, [12, 13]), Row(obs, list(range(20, 80)))]
    for shared in (False, True):
        logp, mask = response_logprobs(model, processor, rows, shared_prefix=shared)
        assert torch.isfinite(logp).all() and (logp[mask == 0] == 0).all()
        assert torch.isfinite((logp * mask).sum())
