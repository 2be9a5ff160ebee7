"""Widen the MLPs of a Qwen2.5-VL checkpoint without changing what it computes.

    python assets/widen_mlp.py SRC DST --text 4 --vision 4

Each MLP's hidden layer gets (mult - 1) x as many new units: their gate/up rows are random (same std
as the existing rows, biases 0) and their down-projection columns are 0, so the new units add nothing
to the output until training moves those columns (Net2Net-style growth). Used to test whether extra
capacity raises the GRPO gain on GUI grounding (tasks/gui_grounding/README.md, from the stage-2 weights:
it did not: +7.5 vs +7.2 points).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file


def widen_state_dict(state: dict[str, torch.Tensor], text_mult: int, vision_mult: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """New state dict with every `.mlp.{gate,up,down}_proj` widened; other tensors unchanged.

    gate/up weight [I, D] -> [I * mult, D], bias [I] -> [I * mult]; down weight [D, I] -> [D, I * mult].
    Keys with a `visual` component use `vision_mult` (the merger's `mlp.0` / `mlp.2` are not gated MLPs and stay).
    """
    if text_mult < 1 or vision_mult < 1:
        raise ValueError(f"multipliers must be >= 1, got text={text_mult}, vision={vision_mult}")
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in state.items():
        # "visual.blocks..." in checkpoints saved by transformers 5 and the hub; "model.visual.blocks..." in
        # checkpoints saved by some 4.x releases. Both must get the vision multiplier the config records.
        mult = vision_mult if "visual" in key.split(".") else text_mult
        if mult > 1 and (".mlp.gate_proj." in key or ".mlp.up_proj." in key):
            rows = value.shape[0] * (mult - 1)
            if key.endswith(".weight"):
                extra = torch.randn((rows, value.shape[1]), generator=gen, dtype=torch.float32) * value.float().std()
            else:
                extra = torch.zeros(rows)
            value = torch.cat([value, extra.to(value.dtype)], 0)
        elif mult > 1 and ".mlp.down_proj.weight" in key:
            value = torch.cat([value, value.new_zeros(value.shape[0], value.shape[1] * (mult - 1))], 1)
        out[key] = value.contiguous()
    return out


def widen_checkpoint(src: Path, dst: Path, text_mult: int, vision_mult: int, seed: int = 0) -> None:
    """Copy the checkpoint folder `src` to `dst` with widened MLPs and a matching config.json."""
    src, dst = Path(src), Path(dst)
    if not (src / "model.safetensors").is_file():
        raise FileNotFoundError(f"{src / 'model.safetensors'} not found (a single-file save_pretrained folder is expected)")
    shutil.copytree(src, dst, dirs_exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    config["text_config"]["intermediate_size"] *= text_mult
    config["vision_config"]["intermediate_size"] *= vision_mult
    state = widen_state_dict(load_file(src / "model.safetensors"), text_mult, vision_mult, seed)
    save_file(state, dst / "model.safetensors", metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="checkpoint folder (save_pretrained layout)")
    parser.add_argument("dst", type=Path, help="output folder")
    parser.add_argument("--text", type=int, default=4, help="language-model MLP width multiplier")
    parser.add_argument("--vision", type=int, default=4, help="vision-tower MLP width multiplier")
    parser.add_argument("--seed", type=int, default=0, help="seed of the new units' random rows")
    args = parser.parse_args()
    widen_checkpoint(args.src, args.dst, args.text, args.vision, args.seed)
    print(f"wrote {args.dst}")


if __name__ == "__main__":
    main()
