"""Grow a Qwen2.5-VL checkpoint (wider MLPs, more language-model layers) without changing what it computes.

    python assets/grow_model.py SRC DST --text 4 --vision 4      # 4x wider MLPs
    python assets/grow_model.py SRC DST --extra-layers 2         # 2 more language-model layers on top

Widening: each MLP's hidden layer gets (mult - 1) x as many new units: their gate/up rows are random (same
std as the existing rows, biases 0) and their down-projection columns are 0, so the new units add nothing
to the output until training moves those columns (Net2Net-style growth).
Deepening: each new layer is a copy of the last one with its attention output projection and MLP down
projection set to 0, so it adds nothing to the residual stream at first; its attention and MLP start from
trained weights instead of noise, and the gradient reaches them once those projections move.
Used to test whether extra capacity raises the GRPO gain on GUI grounding (README: it did not).
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


def deepen_state_dict(state: dict[str, torch.Tensor], num_layers: int, extra: int) -> dict[str, torch.Tensor]:
    """New state dict with `extra` language-model layers appended after the `num_layers` existing ones.

    Layer `num_layers + i` copies every `model.layers.{num_layers - 1}.*` tensor, except `self_attn.o_proj.*`
    and `mlp.down_proj.*`, which are zeros (the layer's residual contribution starts at exactly 0).
    """
    if extra < 0 or num_layers < 1:
        raise ValueError(f"extra layers must be >= 0 and the model must have a layer, got extra={extra}, num_layers={num_layers}")
    last = f"model.layers.{num_layers - 1}."
    template = {k[len(last):]: v for k, v in state.items() if k.startswith(last)}
    if not template:
        raise ValueError(f"no tensors named {last}* in the checkpoint (num_layers={num_layers} does not match it)")
    out = dict(state)
    for i in range(extra):
        for name, value in template.items():
            silent = name.startswith(("self_attn.o_proj.", "mlp.down_proj."))
            out[f"model.layers.{num_layers + i}.{name}"] = torch.zeros_like(value) if silent else value.clone()
    return out


def grow_checkpoint(src: Path, dst: Path, text_mult: int = 1, vision_mult: int = 1, extra_layers: int = 0, seed: int = 0) -> None:
    """Copy the checkpoint folder `src` to `dst` with widened MLPs / extra layers and a matching config.json."""
    src, dst = Path(src), Path(dst)
    if not (src / "model.safetensors").is_file():
        raise FileNotFoundError(f"{src / 'model.safetensors'} not found (a single-file save_pretrained folder is expected)")
    shutil.copytree(src, dst, dirs_exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    text = config["text_config"]
    text["intermediate_size"] *= text_mult
    config["vision_config"]["intermediate_size"] *= vision_mult
    state = widen_state_dict(load_file(src / "model.safetensors"), text_mult, vision_mult, seed)
    state = deepen_state_dict(state, text["num_hidden_layers"], extra_layers)
    text["num_hidden_layers"] += extra_layers
    if "layer_types" in text:  # transformers 5 checks that it lists one type per layer
        text["layer_types"] = text["layer_types"] + [text["layer_types"][-1]] * extra_layers
    save_file(state, dst / "model.safetensors", metadata={"format": "pt"})
    (dst / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="checkpoint folder (save_pretrained layout)")
    parser.add_argument("dst", type=Path, help="output folder")
    parser.add_argument("--text", type=int, default=1, help="language-model MLP width multiplier")
    parser.add_argument("--vision", type=int, default=1, help="vision-tower MLP width multiplier")
    parser.add_argument("--extra-layers", type=int, default=0, help="language-model layers to append")
    parser.add_argument("--seed", type=int, default=0, help="seed of the new units' random rows")
    args = parser.parse_args()
    grow_checkpoint(args.src, args.dst, args.text, args.vision, args.extra_layers, args.seed)
    print(f"wrote {args.dst}")


if __name__ == "__main__":
    main()
