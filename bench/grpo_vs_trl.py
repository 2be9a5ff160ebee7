"""GRPO step throughput, vlrl (shared prefix on and off) vs TRL's GRPOTrainer, on identical work.

    .venv/bin/python bench/grpo_vs_trl.py            # ~8 min on 2 busy CPU cores
    .venv/bin/python bench/grpo_vs_trl.py --quick    # smoke run (5 steps, one loss type: noisy ratios)

Same tiny Qwen2.5-VL checkpoint (fresh copies), same prompts and images (112x112, 448x448 and
1920x1080; the processor's max_pixels is 448*448), same reward, G = 8, one prompt per step, 32-token
completions, beta = 0, one optimizer step per generation batch, fp32, one thread, CPU.

Three stacks, interleaved in one process: TRL's trainer runs its own loop, and a callback runs one
step of vlrl with the shared prefix on (trainer.shared_prefix, one rollout prefill per prompt) and one
with it off (every row's whole sequence, generate's own G-fold expansion), in alternating order
(`run_episodes -> episode_advantages -> build_rows -> update`, on the same prompt TRL just used),
after each TRL step. Also, per size, the training forward+backward alone on one group (on vs off, and
the vision tower's share of it: where the time goes). Each side's step time is its own wall time; the first `--warmup` steps are
dropped and the median of the rest is reported. Peak RSS is measured in a separate process per side
(same settings), so each number is that stack alone.

Apples to apples: on the first step, TRL's sampled completions are scored both ways on identical
weights: TRL's `_compute_loss` and our `policy_loss` (on-policy, and with perturbed old log-probs so
the clip is active), per-token log-probs, gradients, and group advantages; the differences are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as C  # noqa: E402  (sets threads before torch)
import torch  # noqa: E402


TOL = {"logp": 1e-5, "loss": 1e-6, "grad_rel": 1e-5, "advantage": 1e-5}  # fp32 round-off
TARGETS = {"448x448": 5.0, "1920x1080": 8.0}  # issue 32: whole step, TRL / vlrl (shared prefix on)
FWD_BWD_TARGETS = {"448x448": 2.5}  # issue 32: training forward+backward, off / on


def timed_optimizer(stack, box: dict) -> None:
    """Book our optimizer.step time under 'optim' (it runs inside `update`)."""
    inner = stack.optimizer.step

    def step(*a, **k):
        t0 = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            box["optim"] = box.get("optim", 0.0) + time.perf_counter() - t0

    stack.optimizer.step = step


# ----------------------------------------------------------------------------------------------
# The apples-to-apples check


def _flat_grads(grads: dict[str, torch.Tensor], names: list[str]) -> torch.Tensor:
    return torch.cat([grads[n].reshape(-1) for n in names])


def loss_check(tr, model, inputs, ours, size, seed, loss_type) -> dict:
    """Score TRL's first-step completions with TRL and with vlrl on identical weights."""
    import vlrl.forward as F
    from vlrl.algos import group_advantages, policy_loss
    from vlrl.encoding import encode
    from vlrl.forward import Row, response_logprobs

    captured = {}
    orig = tr._get_per_token_logps_and_entropies

    def capture(*a, **k):
        out = orig(*a, **k)
        captured["logps"] = out[0]
        return out

    tr._get_per_token_logps_and_entropies = capture
    trl_params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    our_params = {n: p for n, p in ours.model.named_parameters() if p.requires_grad}
    names = [n for n in trl_params if n in our_params]
    same_weights = all(torch.equal(trl_params[n], our_params[n]) for n in names)

    cmask = inputs["completion_mask"]
    B, Cw = cmask.shape
    gen = torch.Generator().manual_seed(0)
    noise = (torch.rand(B, Cw, generator=gen) * 0.6 - 0.3) * cmask

    # TRL, on-policy (old = None -> per_token_logps.detach(), what its step computes) and perturbed.
    loss_trl = tr._compute_loss(model, inputs)
    g_trl = dict(zip(names, torch.autograd.grad(loss_trl, [trl_params[n] for n in names], allow_unused=False)))
    logps_trl = captured["logps"].detach()
    old_trl = logps_trl + noise
    loss_trl_off = tr._compute_loss(model, {**inputs, "old_per_token_logps": old_trl})
    g_trl_off = dict(zip(names, torch.autograd.grad(loss_trl_off, [trl_params[n] for n in names])))
    tr._get_per_token_logps_and_entropies = orig

    # vlrl on the same completions and the same observation.
    obs = C.SquareEnv(size).reset(seed)
    enc = encode(ours.processor, obs)
    prompt_same = all(
        torch.equal(inputs["prompt_ids"][i][inputs["prompt_mask"][i].bool()], enc.input_ids) for i in range(B)
    )
    responses = [inputs["completion_ids"][i][cmask[i].bool()].tolist() for i in range(B)]
    rows = [Row(obs, r) for r in responses]
    saved = F.banned_token_ids
    F.banned_token_ids = lambda processor: []  # TRL scores over the full vocabulary
    try:
        logp, mask = response_logprobs(ours.model, ours.processor, rows, 1.0)
    finally:
        F.banned_token_ids = saved
    with torch.no_grad():
        logp_masked, _ = response_logprobs(ours.model, ours.processor, rows, 1.0)
    L = logp.shape[1]

    def to_ours(t):  # TRL right-padded [B, C] -> ours right-aligned [B, L]
        out = torch.zeros(B, L)
        for i in range(B):
            n = int(cmask[i].sum())
            out[i, L - n :] = t[i, :n]
        return out

    logp_diff = float((logp.detach() - to_ours(logps_trl)).abs()[mask.bool()].max())
    banned_diff = float((logp_masked - to_ours(logps_trl)).abs()[mask.bool()].max())
    adv = inputs["advantages"].float()
    kw = dict(loss_type=loss_type, eps_low=0.2, eps_high=0.2, max_completion_length=32)
    loss_ours = policy_loss(logp, logp.detach(), adv, mask, **kw)
    g_ours = dict(zip(names, torch.autograd.grad(loss_ours, [our_params[n] for n in names], retain_graph=True)))
    loss_ours_off = policy_loss(logp, to_ours(old_trl), adv, mask, **kw)
    g_ours_off = dict(zip(names, torch.autograd.grad(loss_ours_off, [our_params[n] for n in names])))

    def rel(a, b):
        fa, fb = _flat_grads(a, names), _flat_grads(b, names)
        return float((fa - fb).norm() / fb.norm().clamp(min=1e-30))

    # Advantages: our estimator on the rewards of TRL's completions (same group statistics).
    color = C.square_image(seed, size)[1]
    texts = ours.processor.tokenizer.batch_decode(responses, skip_special_tokens=True)
    rewards = torch.tensor([C.score(t, color) for t in texts])
    adv_ours = group_advantages(rewards, B)
    return {
        "same_initial_weights": same_weights,
        "prompt_tokens_identical": prompt_same,
        "completion_tokens_mean": float(cmask.sum(1).float().mean()),
        "max_abs_logp_diff": logp_diff,
        "max_abs_logp_diff_with_vision_tokens_masked": banned_diff,
        "max_abs_advantage_diff": float((adv_ours - adv).abs().max()),
        "loss_trl": float(loss_trl),
        "loss_vlrl": float(loss_ours),
        "loss_abs_diff": abs(float(loss_trl) - float(loss_ours)),
        "grad_rel_diff": rel(g_ours, g_trl),
        "loss_trl_offpolicy": float(loss_trl_off),
        "loss_vlrl_offpolicy": float(loss_ours_off),
        "loss_abs_diff_offpolicy": abs(float(loss_trl_off) - float(loss_ours_off)),
        "grad_rel_diff_offpolicy": rel(g_ours_off, g_trl_off),
    }


# ----------------------------------------------------------------------------------------------
# One configuration, interleaved


def run_config(size: int, loss_type: str, gc: bool, steps: int, warmup: int, check: bool) -> dict:
    from transformers import TrainerCallback

    import trl_stack as T

    seeds = list(range(1000, 1000 + warmup + steps))
    ours = C.vlrl_stack(loss_type)
    plain = C.vlrl_stack(loss_type, shared_prefix=False)
    opt_box: dict = {}
    timed_optimizer(ours, opt_box)
    timed_optimizer(plain, opt_box)
    rec = {"trl": [], "vlrl": [], "vlrl_off": []}
    out: dict = {}
    state = {}

    class Interleave(TrainerCallback):
        def on_train_begin(self, args, st, control, **kw):
            state["mark"] = time.perf_counter()

        def on_pre_optimizer_step(self, args, st, control, **kw):
            state["opt0"] = time.perf_counter()

        def on_optimizer_step(self, args, st, control, **kw):
            instr._add("optim", time.perf_counter() - state["opt0"])

        def on_step_end(self, args, st, control, **kw):
            total = time.perf_counter() - state["mark"]
            sp = instr.take()
            sp["other"] = total - sum(sp.values())
            rec["trl"].append({"total": total, **sp, "tokens": state.pop("trl_tokens", 0)})
            # Our steps (shared prefix on and off, alternating which goes first) on the prompt TRL just used.
            order = [("vlrl", ours), ("vlrl_off", plain)]
            for side, stack in order if len(rec["trl"]) % 2 else order[::-1]:
                opt_box.clear()
                spl = C.Splits()
                t0 = time.perf_counter()
                stats = C.vlrl_step(stack, lambda: C.SquareEnv(size), [instr.seed], spl)
                total = time.perf_counter() - t0
                spl.t["train"] -= opt_box.get("optim", 0.0)
                spl.t["optim"] = opt_box.get("optim", 0.0)
                spl.t["other"] = total - spl.t["rollout"] - spl.t["train"] - spl.t["optim"]
                rec[side].append({"total": total, **spl.t, "tokens": stats["completion_tokens"]})
            state["mark"] = time.perf_counter()

    tr = T.trainer(size, seeds, loss_type, gradient_checkpointing=gc, max_steps=warmup + steps, callbacks=[Interleave()])
    instr = T.Instrument(tr)
    orig_cl = tr.compute_loss

    def compute_loss(model, inputs, *a, **k):
        state["trl_tokens"] = int(inputs["completion_mask"].sum())
        if check and "check" not in out:
            t0 = time.perf_counter()
            out["check"] = loss_check(tr, model, inputs, ours, size, instr.seed, loss_type)
            state["check_time"] = time.perf_counter() - t0  # inside TRL's first (warm-up) step
        return orig_cl(model, inputs, *a, **k)

    tr.compute_loss = compute_loss
    tr.train()
    if "check_time" in state:
        rec["trl"][0]["total"] -= state["check_time"]
        rec["trl"][0]["train"] -= state["check_time"]

    res = {"size": C.label(size), "loss_type": loss_type, "trl_gradient_checkpointing": gc, "steps": steps, "warmup": warmup}
    for side in ("trl", "vlrl", "vlrl_off"):
        kept = rec[side][warmup:]
        med = C.median(r["total"] for r in kept)
        res[side] = {
            "s_per_step": med,
            "samples_per_s": 8 / med,
            "split_s": {k: C.median(r.get(k, 0.0) for r in kept) for k in ("rollout", "train", "optim", "other")},
            "completion_tokens_per_step": C.median(r["tokens"] for r in kept),
            "all_steps_s": [round(r["total"], 4) for r in rec[side]],
        }
    pairs = [t["total"] / v["total"] for t, v in zip(rec["trl"][warmup:], rec["vlrl"][warmup:])]
    res["speedup"] = res["trl"]["s_per_step"] / res["vlrl"]["s_per_step"]
    res["speedup_paired_median"] = C.median(pairs)
    res["speedup_off"] = res["trl"]["s_per_step"] / res["vlrl_off"]["s_per_step"]
    split = lambda side, k: res[side]["split_s"][k]
    res["on_over_off"] = {"step": res["vlrl_off"]["s_per_step"] / res["vlrl"]["s_per_step"],
                          "train_fwd_bwd": split("vlrl_off", "train") / split("vlrl", "train"),
                          "rollout": split("vlrl_off", "rollout") / split("vlrl", "rollout")}
    if "check" in out:
        res["check"] = out["check"]
    return res


def rss_child(side: str, size: int, loss_type: str, steps: int) -> None:
    """Peak RSS of one stack alone (run in a fresh process)."""
    if side in ("vlrl", "vlrl_off"):
        s = C.vlrl_stack(loss_type, shared_prefix=None if side == "vlrl" else False)
        after_load = C.rss_mb()
        for i in range(steps):
            C.vlrl_step(s, lambda: C.SquareEnv(size), [1000 + i])
    else:
        import trl_stack as T

        tr = T.trainer(size, list(range(1000, 1000 + steps)), loss_type, max_steps=steps)
        after_load = C.rss_mb()
        tr.train()
    print(json.dumps({"peak_rss_mb": C.peak_rss_mb(), "rss_after_load_mb": after_load}))


def peak_rss(side: str, size: int, loss_type: str, steps: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--rss-child", side, "--sizes", C.label(size),
           "--loss-types", loss_type, "--steps", str(steps)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not line:
        return {"error": p.stderr[-2000:]}
    return json.loads(line[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=C.parse_size, nargs="+", default=[112, 448, (1920, 1080)],
                    help="square side (448) or WxH (1920x1080)")
    ap.add_argument("--loss-types", nargs="+", default=["dapo", "grpo"])
    ap.add_argument("--steps", type=int, default=10, help="measured steps per configuration (after warm-up)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-gc-off", action="store_true", help="skip the TRL gradient_checkpointing=False rows")
    ap.add_argument("--rss-steps", type=int, default=4, help="steps of each separate peak-RSS process (0: skip)")
    ap.add_argument("--quick", action="store_true", help="5 measured steps, 1 warm-up")
    ap.add_argument("--rss-child", choices=["vlrl", "vlrl_off", "trl"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rss_child:
        rss_child(args.rss_child, args.sizes[0], args.loss_types[0], args.steps)
        return {}
    if args.quick:
        args.steps, args.warmup, args.loss_types, args.no_gc_off = 5, 1, args.loss_types[:1], True

    t_start = time.perf_counter()
    results = []
    fb = [C.fwd_bwd(size) for size in args.sizes]
    print(f"  done forward+backward ({time.perf_counter() - t_start:.0f}s)", flush=True)
    for size in args.sizes:
        for loss_type in args.loss_types:
            results.append(run_config(size, loss_type, True, args.steps, args.warmup, check=True))
            print(f"  done size={C.label(size)} loss={loss_type} gc=on ({time.perf_counter() - t_start:.0f}s)", flush=True)
        if not args.no_gc_off:
            results.append(run_config(size, args.loss_types[0], False, args.steps, args.warmup, check=False))
            print(f"  done size={C.label(size)} loss={args.loss_types[0]} gc=off ({time.perf_counter() - t_start:.0f}s)", flush=True)

    rss = {}
    if args.rss_steps:
        for size in args.sizes:
            for side in ("vlrl", "vlrl_off", "trl"):
                rss[f"{side}_{C.label(size)}"] = peak_rss(side, size, args.loss_types[0], args.rss_steps)

    rows = []
    fmt_split = lambda d: "/".join(f"{d['split_s'][k]:.3f}" for k in ("rollout", "train", "optim", "other"))
    for r in results:
        v, o, t = r["vlrl"], r["vlrl_off"], r["trl"]
        rows.append([
            r["size"], r["loss_type"], "on" if r["trl_gradient_checkpointing"] else "off",
            round(v["s_per_step"], 3), round(o["s_per_step"], 3), round(t["s_per_step"], 3),
            f"{r['speedup']:.2f}x", f"{r['speedup_off']:.2f}x", f"{r['speedup_paired_median']:.2f}x",
            f"{r['on_over_off']['step']:.2f}x", f"{r['on_over_off']['train_fwd_bwd']:.2f}x",
            f"{r['on_over_off']['rollout']:.2f}x", fmt_split(v), fmt_split(o), fmt_split(t),
        ])
    print()
    print("GRPO step, vlrl shared prefix on / off vs TRL GRPOTrainer (G=8, 1 prompt/step, 32-token completions, beta=0, "
          "fp32, 1 thread, CPU)")
    print(C.table(["image", "loss", "TRL GC", "on s/step", "off s/step", "TRL s/step", "TRL/on", "TRL/off",
                   "TRL/on paired", "off/on step", "off/on train fwd+bwd", "off/on rollout",
                   "on split r/fb/opt/other (s)", "off split r/fb/opt/other (s)", "TRL split r/fb/opt/other (s)"], rows))
    print()
    print("Training forward+backward of one group (G=8), shared prefix on vs off; the vision tower's part is the same in both")
    print(C.table(["image", "prompt tokens", "response tokens", "on s", "off s", "off/on", "vision fwd+bwd s",
                   "language model off/on"],
                  [[f["size"], f["prompt_tokens"], round(f["response_tokens_mean"], 1), round(f["on_s"], 4),
                    round(f["off_s"], 4), f"{f['off_over_on']:.2f}x", round(f["vision_fwd_bwd_s"], 4),
                    f"{f['language_model_off_over_on']:.2f}x"] for f in fb]))
    if rss:
        print()
        rrows = []
        for size in args.sizes:
            sides = [rss[f"{side}_{C.label(size)}"] for side in ("vlrl", "vlrl_off", "trl")]
            if any("error" in x for x in sides):
                rrows.append([C.label(size), "error", "error", "error", ""])
                continue
            v, o, t = (x["peak_rss_mb"] for x in sides)
            rrows.append([C.label(size), round(v), round(o), round(t), f"{v / o:.2f}"])
        print("Peak RSS (MiB), each stack alone in its own process, "
              f"{args.rss_steps} steps, loss={args.loss_types[0]}, TRL default gradient checkpointing")
        print(C.table(["image", "vlrl on", "vlrl off", "TRL", "on/off"], rrows))
    print()
    crows = []
    for r in results:
        c = r.get("check")
        if not c:
            continue
        crows.append([r["size"], r["loss_type"], c["prompt_tokens_identical"], c["same_initial_weights"],
                      f"{c['max_abs_logp_diff']:.1e}", f"{c['loss_trl']:.6g}", f"{c['loss_abs_diff']:.1e}",
                      f"{c['grad_rel_diff']:.1e}", f"{c['loss_abs_diff_offpolicy']:.1e}", f"{c['grad_rel_diff_offpolicy']:.1e}",
                      f"{c['max_abs_advantage_diff']:.1e}", f"{c['max_abs_logp_diff_with_vision_tokens_masked']:.1e}"])
    print("Same completions (TRL's first step) scored by TRL `_compute_loss` and vlrl `policy_loss`, identical weights")
    print(C.table(["image", "loss", "same prompt ids", "same weights", "max |dlogp|", "TRL loss", "|dloss|",
                   "grad rel diff", "|dloss| off-policy", "grad rel diff off-policy", "max |dadv|",
                   "max |dlogp| (vlrl default vocab)"], crows))
    checks = [r["check"] for r in results if r.get("check")]
    same = all(c["prompt_tokens_identical"] and c["same_initial_weights"] and c["max_abs_logp_diff"] <= TOL["logp"]
               and max(c["loss_abs_diff"], c["loss_abs_diff_offpolicy"]) <= TOL["loss"]
               and max(c["grad_rel_diff"], c["grad_rel_diff_offpolicy"]) <= TOL["grad_rel"]
               and c["max_abs_advantage_diff"] <= TOL["advantage"] for c in checks)
    print(f"same objective within tolerance {TOL}: {'yes' if same else 'NO'}")
    for r in results:
        if r["trl_gradient_checkpointing"]:
            target = TARGETS.get(r["size"])
            if target:
                print(f"target {r['size']} {r['loss_type']}: whole step TRL/on >= {target}x -> {r['speedup']:.2f}x "
                      f"({'met' if r['speedup'] >= target else 'MISSED'})")
    for f in fb:
        target = FWD_BWD_TARGETS.get(f["size"])
        if target:
            print(f"target {f['size']}: training forward+backward off/on >= {target}x -> {f['off_over_on']:.2f}x "
                  f"({'met' if f['off_over_on'] >= target else 'MISSED'}); language model alone "
                  f"{f['language_model_off_over_on']:.2f}x, vision tower {f['vision_fwd_bwd_s']:.3f}s of {f['on_s']:.3f}s")
    payload = {"args": {**vars(args), "sizes": [C.label(x) for x in args.sizes]}, "results": results, "fwd_bwd": fb,
               "peak_rss": rss, "same_objective": same, "tolerance": TOL,
               "wall_s": time.perf_counter() - t_start}
    path = C.write_result("grpo_vs_trl", payload)
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f}s)")
    return payload


if __name__ == "__main__":
    main()
