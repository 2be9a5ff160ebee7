"""One `update()` on a fixed batch, run with 1 or N processes; writes the parameter change.

Used by test_distributed.py:
    python tests/vlrl/dist_update.py OUT LOSS_TYPES MICRO_BATCH [SPLIT [SHARED]]
    accelerate launch --config_file configs/accelerate/cpu_2proc.yaml tests/vlrl/dist_update.py OUT LOSS_TYPES MICRO_BATCH [SPLIT]
    accelerate launch --config_file configs/accelerate/fsdp2_cpu_2proc.yaml tests/vlrl/dist_update.py ...
    accelerate launch --config_file configs/accelerate/deepspeed_zero3_cpu_2proc.yaml tests/vlrl/dist_update.py ...
Every process builds the same global batch of episodes (same seeds), then keeps its contiguous share:
SPLIT "even" (default) or "uneven" (2 processes: 10 rows and 6 rows, so a sharded run pads micro-batches),
or "nan" (even, but first an update whose loss is NaN, which must be skipped, then the normal one).
SHARED: trainer.shared_prefix, "auto" (default: the backend's default), "on" or "off".
The parallel strategy is chosen from the launch as in training (vlrl.parallel.make_strategy): under an FSDP2
launch the model is sharded first (vlrl/parallel/fsdp2.py); under a DeepSpeed launch accelerate partitions it with
ZeRO-3 (vlrl/parallel/zero3.py).
LOSS_TYPES is one loss type or a comma-separated list (unsharded runs only): each starts from the same weights
and batch, so one launch checks several loss types (process start-up dominates the cost).
"""

import dataclasses
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from vlrl.config import AlgoConfig, Config, ModelConfig, RolloutConfig, TrainerConfig  # noqa: E402
from vlrl.models import load_model, load_processor  # noqa: E402
from vlrl.parallel import make_strategy  # noqa: E402
from vlrl.parallel.zero3 import partitioned_count  # noqa: E402
from vlrl.rollout import make_engine, run_episodes  # noqa: E402
from vlrl.trainer import build_rows, episode_advantages, make_scheduler, update  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rows(episodes, algo, rank: int, world: int, split: str):
    adv = episode_advantages(episodes, algo)
    weights = [1.0 + 0.5 * (i % 2) for i in range(len(episodes))]
    rows = build_rows(episodes, adv, weights)
    if split == "uneven" and world == 2:
        return rows[:10] if rank == 0 else rows[10:]
    share = len(rows) // world
    return rows[rank * share : (rank + 1) * share]


def main(out: str, loss_types: str, micro_batch: int, split: str = "even", shared: str = "auto") -> None:
    torch.set_num_threads(1)
    model_cfg = ModelConfig(path=os.path.join(ROOT, "assets", "tiny-qwen2.5-vl"))
    rollout = RolloutConfig(max_new_tokens=6)
    trainer = TrainerConfig(micro_batch_size=micro_batch, lr=1e-2, max_grad_norm=0.0,
                            shared_prefix={"auto": None, "on": True, "off": False}[shared])
    cfg = Config(model=model_cfg, rollout=rollout, trainer=trainer)
    strategy = make_strategy(cfg, can_shard=True)
    acc = strategy.accelerator
    rank, world = acc.process_index, acc.num_processes
    loss_types = loss_types.split(",")
    if len(loss_types) > 1 and strategy.sharded:
        raise SystemExit("several loss types need an unsharded launch (the weights are reset between them)")
    processor, model = load_processor(model_cfg), load_model(model_cfg)

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from toy_task import Config as ToyConfig
    from toy_task import make_env

    torch.manual_seed(123)  # identical global batch on every process
    engine = make_engine(rollout, model, processor)
    episodes = run_episodes(engine, lambda: make_env(ToyConfig(), "train"), [0, 1, 2, 3], 4)
    # Ragged responses so token counts differ between rows.
    for i, ep in enumerate(episodes):
        cut = 6 - (i % 4)
        ep.turns[0].response_ids = ep.turns[0].response_ids[:cut]
        ep.turns[0].logprobs = [lp - 0.05 * (i % 3) for lp in ep.turns[0].logprobs[:cut]]

    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    deltas, skipped, partitioned = {}, 0.0, 0
    for loss_type in loss_types:
        model.load_state_dict(before)
        algo = AlgoConfig(group_size=4, loss_type=loss_type, scale="none" if loss_type == "gui_g1" else "group")
        run_cfg = dataclasses.replace(cfg, algo=algo)
        rows = _rows(episodes, algo, rank, world, split)
        model = strategy.shard(model)
        opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
        sched = make_scheduler(opt, trainer, 1)
        strategy.wrap(model, opt)
        partitioned = partitioned_count(model)  # ZeRO-3: parameters this process holds only a slice of
        if strategy.name == "zero3" and world > 1:
            # Ragged rollouts on full weights: rank r runs r + 1 groups. Any collective per forward would hang or
            # fail here; the update below then needs the partitioned weights back, unchanged.
            with strategy.gathered(model):
                run_episodes(engine, lambda: make_env(ToyConfig(), "train"), list(range(rank + 1)), algo.group_size)
        if split == "nan":
            clean = rows[0].old_logprobs
            rows[0].old_logprobs = [math.nan] * len(clean)
            skipped = update(model, processor, opt, sched, rows, run_cfg, strategy)["skipped_nonfinite"]
            rows[0].old_logprobs = clean
        update(model, processor, opt, sched, rows, run_cfg, strategy)
        after = strategy.full_model_state(model)
        if rank == 0:  # the full state exists on rank 0 only
            deltas[loss_type] = torch.cat([(after[k].detach() - before[k]).flatten() for k in sorted(before)])
    if rank == 0:
        torch.save({"deltas": deltas, "world": world, "sharded": strategy.sharded, "partitioned": partitioned,
                    "skipped": skipped},
                   out)
    acc.wait_for_everyone()
    strategy.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:6])
