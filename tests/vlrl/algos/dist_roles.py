"""Helper of test_roles.py: 2 gloo processes update RoleBaselines on different halves of each step's batch.

Usage: python dist_roles.py INIT_FILE OUT_JSON. Rank 1 never sees a "spy" turn, so the all-reduce must
still line up (declared roles). Writes {rank: {"baselines": [...per step], "advantages": [...per step]}}.
"""

import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# Per step: rank -> (rewards, roles)
STEPS = [
    {0: ([1.0, -1.0, 0.5], ["spy", "civilian", "civilian"]), 1: ([2.0, float("nan")], ["civilian", "civilian"])},
    {0: ([0.0], ["civilian"]), 1: ([3.0, -2.0], ["civilian", "civilian"])},
]


def worker(rank: int, init_file: str, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    from vlrl.algos.roles import RoleBaselines

    rb = RoleBaselines(["spy", "civilian"], decay=0.9)
    result = {"baselines": [], "advantages": []}
    for step in STEPS:
        rewards, roles = step[rank]
        adv = rb.advantages(torch.tensor(rewards, dtype=torch.float64), roles)
        result["baselines"].append(dict(rb.baselines))
        result["advantages"].append(adv.tolist())
    with open(f"{out}.{rank}", "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1], sys.argv[2]), nprocs=2, join=True)
