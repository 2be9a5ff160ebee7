"""One GRPO step with vLLM rollouts on a GPU, on a Qwen2.5-VL-3B-shaped model with random bf16 weights.

Run by scripts/gpu_check.sh (needs a CUDA GPU and vLLM's GPU build). The model is built from a config
(no weights are downloaded) with the tiny checkpoint's tokenizer and processor: rollout (vLLM, n=G),
training forward, one update, weight sync, a second rollout. Prints one JSON line: the rollout vs
training log-prob gap before and after the update (bf16: expect ~1e-2, not fp32's 1e-5) and timings.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import types

TINY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "tiny-qwen2.5-vl")
# Qwen2.5-VL-3B-Instruct's shapes (its config.json), with the tiny tokenizer's 2899 ids inside a full-size vocab.
TEXT = dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
            num_key_value_heads=2, vocab_size=151936, max_position_embeddings=128000,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]})
VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=2048,
              fullatt_block_indexes=[7, 15, 23, 31], window_size=112)


def build(out: str) -> str:
    """Write the random-weight bf16 model plus the tiny processor files to `out`."""
    import torch
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration

    cfg = AutoConfig.from_pretrained(TINY)
    for k, v in TEXT.items():
        setattr(cfg.text_config, k, v)
    cfg.text_config.layer_types = ["full_attention"] * TEXT["num_hidden_layers"]
    for k, v in VISION.items():
        setattr(cfg.vision_config, k, v)
    cfg.tie_word_embeddings = True
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    for f in os.listdir(TINY):
        if f not in ("config.json", "model.safetensors", "BUILD.json"):
            shutil.copy(os.path.join(TINY, f), out)
    return out


def main() -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import torch
    from PIL import Image

    from vlrl.config import AlgoConfig, ModelConfig, RolloutConfig, TrainerConfig
    from vlrl.episode import Observation, StepResult
    from vlrl.forward import Row, response_logprobs, right_aligned
    from vlrl.models import load_model, load_processor
    from vlrl.rollout import run_episodes
    from vlrl.rollout.vllm_engine import VLLMEngine
    from vlrl.trainer import build_rows, episode_advantages, make_optimizer, make_scheduler, update

    class Env:
        def reset(self, seed):
            return Observation(messages=[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "x"}]}],
                               images=[Image.new("RGB", (224, 224), (seed * 50 % 255, 90, 30))])

        def step_ids(self, ids):
            return StepResult(observation=None, rewards={"r": float(ids[0] % 5) / 4}, done=True)

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        path = build(tmp)
        out["build_s"] = time.perf_counter() - t
        mcfg = ModelConfig(path=path, dtype="bfloat16")
        model, processor = load_model(mcfg, "cuda"), load_processor(mcfg)
        rollout = RolloutConfig(engine="vllm", max_new_tokens=16, temperature=1.0, vllm_gpu_memory_utilization=0.3)
        cfg = types.SimpleNamespace(algo=AlgoConfig(group_size=4, beta=0.0), rollout=rollout,
                                    trainer=TrainerConfig(lr=1e-5, micro_batch_size=8, prompts_per_step=2, progress=False))
        opt = make_optimizer(model, cfg.trainer)
        sched = make_scheduler(opt, cfg.trainer, 10**6)
        t = time.perf_counter()
        engine = VLLMEngine(model, processor, rollout)
        out["engine_load_s"] = time.perf_counter() - t
        for step in range(2):
            t = time.perf_counter()
            eps = run_episodes(engine, Env, [2 * step, 2 * step + 1], 4)
            out[f"rollout_{step}_s"] = time.perf_counter() - t
            rows = [Row(tr.observation, tr.response_ids) for ep in eps for tr in ep.turns]
            with torch.no_grad():
                logp, mask = response_logprobs(model, processor, rows, temperature=1.0)
            old = right_aligned([tr.logprobs for ep in eps for tr in ep.turns], logp.shape[1]).to(logp.device)
            out[f"max_abs_logprob_gap_{step}"] = ((logp.float() - old).abs() * mask).max().item()
            if step == 1:
                break
            t = time.perf_counter()
            stats = update(model, processor, opt, sched, build_rows(eps, episode_advantages(eps, cfg.algo)), cfg)
            engine.sync_weights()
            out["update_and_sync_s"] = time.perf_counter() - t
            out["loss"] = float(stats.get("loss", float("nan")))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
