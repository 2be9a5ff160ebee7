"""Rollout throughput: our HF engine vs a plain `model.generate` loop, at batch 1, 8 and 32.

    .venv/bin/python bench/rollout_throughput.py     # ~2 min on 2 CPU cores

Batch B = B distinct prompts (one image each), one sampled completion per prompt, up to 32 new
tokens, temperature 1, fp32, one thread. The engine (`HFEngine.generate`) encodes the B prompts and
decodes them in one left-padded `generate` call, and also returns per-token log-probs (what RL
needs). The baseline runs the processor and `model.generate(do_sample=True)` one prompt at a time,
with no log-probs. tokens/s counts generated tokens up to and including EOS. The two are timed
alternately (engine, loop, engine, loop, ...) in one process; medians of `--reps` repetitions.

The vLLM row runs only where a CUDA GPU and the vLLM engine exist; otherwise it is marked skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402
import torch  # noqa: E402


def count_tokens(ids: list[int], eos: set[int]) -> int:
    for k, t in enumerate(ids):
        if t in eos:
            return k + 1
    return len(ids)


def plain_loop(model, processor, observations, max_new_tokens: int, eos: set[int]) -> int:
    """The baseline: processor + generate, one prompt at a time. Returns generated tokens."""
    n = 0
    for obs in observations:
        text = processor.apply_chat_template(obs.messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(text=[text], images=list(obs.images), return_tensors="pt")
        with torch.no_grad():
            out = model.generate(**inputs, do_sample=True, temperature=1.0, top_p=1.0, top_k=None,
                                 max_new_tokens=max_new_tokens, pad_token_id=processor.tokenizer.pad_token_id)
        n += count_tokens(out[0, inputs["input_ids"].shape[1]:].tolist(), eos)
    return n


def engine_batch(engine, observations) -> int:
    samples = engine.generate(observations, n=1)
    return sum(len(g[0].response_ids) for g in samples)


def vllm_row(batch_sizes) -> tuple[str, dict]:
    if not torch.cuda.is_available():
        return "skipped: no CUDA GPU on this machine", {}
    try:
        import vllm  # noqa: F401

        import vlrl.rollout.vllm_engine  # noqa: F401
    except ImportError as e:
        return f"skipped: {e}", {}
    return "skipped: not measured by this script yet", {}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--size", type=int, default=224, help="image side in pixels")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    s = C.vlrl_stack(max_new_tokens=args.max_new_tokens)
    s.engine.cfg.batch_size = max(args.batches)
    model, processor = s.model, s.processor
    eos = s.engine.eos_ids
    env = C.SquareEnv(args.size)

    def observations(b, rep):
        return [env.reset(10_000 * rep + i) for i in range(b)]  # fresh objects: no cached encodings

    # warm-up both paths
    engine_batch(s.engine, observations(2, 99))
    plain_loop(model, processor, observations(1, 98), args.max_new_tokens, eos)

    results = []
    for b in args.batches:
        eng, loop = [], []
        for rep in range(args.reps):
            obs = observations(b, rep)
            t0 = time.perf_counter()
            n = engine_batch(s.engine, obs)
            eng.append((n, time.perf_counter() - t0))
            obs = observations(b, rep + 1000)
            t0 = time.perf_counter()
            n = plain_loop(model, processor, obs, args.max_new_tokens, eos)
            loop.append((n, time.perf_counter() - t0))
        e_tps = C.median(n / t for n, t in eng)
        l_tps = C.median(n / t for n, t in loop)
        results.append({"batch": b, "engine_tokens_per_s": e_tps, "loop_tokens_per_s": l_tps, "ratio": e_tps / l_tps,
                        "engine_runs": eng, "loop_runs": loop})
        print(f"  batch {b}: engine {e_tps:.0f} tok/s, loop {l_tps:.0f} tok/s ({time.perf_counter() - t_start:.0f}s)",
              flush=True)

    vllm_status, vllm_res = vllm_row(args.batches)
    rows = [[r["batch"], round(r["engine_tokens_per_s"]), round(r["loop_tokens_per_s"]), f"{r['ratio']:.2f}x"]
            for r in results]
    rows += [[b, vllm_status, "", ""] for b in args.batches[:1]]
    rows[-1][0] = "vLLM"
    print()
    print(f"Rollout tokens/s (one {args.size}x{args.size} image per prompt, 1 sample per prompt, "
          f"<= {args.max_new_tokens} new tokens, fp32, 1 thread)")
    print(C.table(["batch", "HF engine tok/s", "plain generate loop tok/s", "engine/loop"], rows))
    path = C.write_result("rollout_throughput", {"args": vars(args), "results": results, "vllm": vllm_status,
                                                 "wall_s": time.perf_counter() - t_start})
    print(f"wrote {path} ({time.perf_counter() - t_start:.0f}s)")
    return {"results": results}


if __name__ == "__main__":
    main()
