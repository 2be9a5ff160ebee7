"""Rebuild the embedded tiny Qwen2.5-VL (random weights) under assets/tiny-qwen2.5-vl.

Deterministic: the tokenizer is trained on a corpus generated here, and the weights come from a
fixed seed. Run: `python assets/build_tiny_model.py [--out DIR]`.

The model is a real `Qwen2_5_VLForConditionalGeneration` with a tiny config. Settings follow the
measured recipe in docs/INSTALL.md (the tiny model): text 2 layers x 128 (2 heads of 64), vision depth 2 x 64
with full attention in every block, patch 14, merge 2, and interleaved M-RoPE (`mrope_section=[1]*32`),
which localises ~2x faster than the chunked default when training from scratch.

The embeddings of the integer tokens 0..1023, with and without a leading space (tied with the
output head), start as a sinusoidal code of their value, so that nearby numbers start close: a from-scratch model then predicts
coordinates as a smooth bump around the right value instead of learning ~450 unrelated classes.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# Integers up to this bound get their own token so coordinate answers stay short.
MAX_SINGLE_TOKEN_INT = 1024

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

WORDS = (
    "user assistant system the a an of to in on at is are and or click tap select find locate "
    "button icon text field checkbox menu toolbar tab link slider switch toggle input search "
    "submit cancel ok save open close delete edit settings home back next previous login sign "
    "red green blue yellow orange purple pink cyan gray grey black white brown dark light "
    "gear star heart bell trash folder file user lock cloud play pause plus minus arrow "
    "left right top bottom upper lower middle center first second third last "
    "grounding instruction report bbox coordinates json format bbox_2d point_2d answer think "
    "image video real fake authentic generated class category which what robot action take "
    "should out task completed yes no progress done square circle triangle object "
    "spot difference same different game clue vote player"
).split()


def build_corpus() -> list[str]:
    """Deterministic training text covering the prompts, answers and every small integer."""
    lines = []
    for w in WORDS:
        lines.append(f"{w} {w.capitalize()} {w.upper()} \"{w}\"")
    for n in range(MAX_SINGLE_TOKEN_INT):
        # Repeated so that BPE merges every integer into one token.
        lines.append(" ".join([str(n)] * 24))
        lines.append(f"[{n}, {n}, {n}, {n}]" * 4)
    for a, b in itertools.product(WORDS[:40], WORDS[40:80]):
        lines.append(f"{a} the {b}. {b}, {a}!")
    answers = [
        '```json\n[{"bbox_2d": [12, 34, 56, 78], "label": "button"}]\n```',
        '<think>the target is here</think><answer>[{"bbox_2d": [1, 2, 3, 4]}]</answer>',
        "Grounding instruction is: click the blue gear icon. Report the bbox coordinates in JSON format.",
        "In: What action should the robot take to pick up the red cube?\nOut:",
    ]
    lines.extend(answers * 50)
    return lines


def build_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    # Digits stay grouped (no per-digit split) so that "123" can be one token.
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=3000,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(build_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        additional_special_tokens=SPECIAL_TOKENS[1:],
        model_max_length=32768,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def init_number_embeddings(model, tokenizer, max_period: float = 2048.0, min_period: float = 4.0,
                           space_offset: float = 0.5) -> None:
    """Sinusoidal value code for the integer tokens "n" and " n", at the norm of the random embeddings.

    JSON answers use both forms ("[32, 65, ...": "32" then " 65"), so both need the value code. The
    space form adds a fixed random direction: tied rows must differ, or the output head would give
    "n" and " n" the same logit and sampling would mix the two spellings.
    """
    import math

    import torch

    emb = model.get_input_embeddings().weight
    dim = emb.shape[1]
    half = dim // 2
    periods = torch.tensor([min_period * (max_period / min_period) ** (k / (half - 1)) for k in range(half)])
    values = torch.arange(MAX_SINGLE_TOKEN_INT, dtype=torch.float32)[:, None]
    angles = 2 * math.pi * values / periods[None, :]
    code = torch.cat([angles.sin(), angles.cos()], dim=1) / math.sqrt(half)  # unit norm
    scale = emb.norm(dim=1).mean()
    space_dir = torch.randn(dim, generator=torch.Generator().manual_seed(1))
    space_dir = space_dir / space_dir.norm()
    spaced = code + space_offset * space_dir
    spaced = spaced / spaced.norm(dim=1, keepdim=True)
    for prefix, rows in (("", code), (" ", spaced)):
        ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(prefix + str(n))[0]) for n in range(MAX_SINGLE_TOKEN_INT)]
        with torch.no_grad():
            emb[ids] = rows * scale


def build(out: Path, seed: int = 0) -> None:
    import torch
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    missing = [p + str(n) for p in ("", " ") for n in range(MAX_SINGLE_TOKEN_INT) if len(tokenizer(p + str(n))["input_ids"]) != 1]
    if missing:
        raise RuntimeError(f"integers not single tokens: {missing[:10]}...")

    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=128,
            intermediate_size=256,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1] * 32},
            bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(
            depth=2,
            hidden_size=64,
            intermediate_size=128,
            num_heads=2,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
            out_hidden_size=128,
            window_size=112,
            fullatt_block_indexes=[0, 1],
        ),
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).float().eval()
    init_number_embeddings(model, tokenizer)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.generation_config.bos_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out, safe_serialization=True)

    # 112..448 px screens: min 4 merged tokens, max 16x16 merged tokens (448x448).
    image_processor = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=448 * 448)
    video_processor = Qwen2VLVideoProcessor(min_pixels=56 * 56, max_pixels=112 * 112 * 4)
    processor = Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )
    processor.save_pretrained(out)
    (out / "BUILD.json").write_text(json.dumps({"seed": seed, "script": "assets/build_tiny_model.py"}) + "\n")
    n_params = sum(p.numel() for p in model.parameters())
    print(f"wrote {out} ({n_params / 1e6:.2f}M params, vocab {len(tokenizer)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "tiny-qwen2.5-vl")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    build(args.out, args.seed)


if __name__ == "__main__":
    main()
