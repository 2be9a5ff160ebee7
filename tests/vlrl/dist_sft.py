"""One supervised step (`vlrl.sft.sft_step`) on a fixed batch, run with 1 or N processes; writes the parameter change.

Used by test_distributed.py:
    python tests/vlrl/dist_sft.py OUT MICRO_BATCH
    accelerate launch --config_file configs/accelerate/cpu_2proc.yaml tests/vlrl/dist_sft.py OUT MICRO_BATCH
Every process builds the same global batch of 16 toy examples (reference answers of two lengths, so the processes'
token counts differ) and keeps its contiguous share: 2 processes must give the update of 1 process accumulating
the same micro-batches (the loss is a token mean over the whole step, not over each process's share).
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from vlrl.config import Config, ModelConfig, TrainerConfig  # noqa: E402
from vlrl.forward import Row  # noqa: E402
from vlrl.models import load_model, load_processor  # noqa: E402
from vlrl.parallel import make_strategy  # noqa: E402
from vlrl.sft import sft_step  # noqa: E402
from vlrl.trainer import make_scheduler  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(out: str, micro_batch: int) -> None:
    torch.set_num_threads(1)
    model_cfg = ModelConfig(path=os.path.join(ROOT, "assets", "tiny-qwen2.5-vl"))
    trainer = TrainerConfig(micro_batch_size=micro_batch, lr=1e-2, max_grad_norm=0.0)
    strategy = make_strategy(Config(model=model_cfg, trainer=trainer))
    acc = strategy.accelerator
    rank, world = acc.process_index, acc.num_processes
    processor, model = load_processor(model_cfg), load_model(model_cfg)

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from toy_task import Config as ToyConfig
    from toy_task import make_env, reference_answer

    env, tok = make_env(ToyConfig(), "train"), processor.tokenizer
    rows = []
    for seed in range(16):
        obs = env.reset(seed)
        rows.append(Row(obs, tok(reference_answer(obs, ToyConfig()) + tok.eos_token, add_special_tokens=False)["input_ids"]))
    share = len(rows) // world
    mine = rows[rank * share : (rank + 1) * share]
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    stats = sft_step(model, processor, opt, make_scheduler(opt, trainer, 1), mine, trainer, strategy)
    after = model.state_dict()
    if rank == 0:
        delta = torch.cat([(after[k].detach() - before[k]).flatten() for k in sorted(before)])
        tokens = [len(r.response_ids) for r in mine]
        torch.save({"delta": delta, "world": world, "loss": stats["loss"], "token_acc": stats["token_acc"],
                    "rank0_tokens": sum(tokens)}, out)
    acc.wait_for_everyone()
    strategy.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
