"""The baseline: TRL's GRPOTrainer on the same tiny checkpoint, prompts, images and reward.

TRL is configured with its defaults except what the comparison fixes: G = 8, 8 sequences per device
batch (one prompt per step, one optimizer step per generation batch), 32-token completions, the loss
type, beta = 0, learning rate 1e-6 (TRL's default; our side uses the same), fp32 (`bf16=False`: our
side runs fp32 on CPU; TRL's default bf16 autocast is slower on this CPU, see the README), no
reporting / saving. `gradient_checkpointing` is TRL's default (True) unless asked otherwise.
"""

from __future__ import annotations

import time

import common as C
import torch


def reward_fn(completions, color, **kwargs):
    """TRL reward function: the same `score` as our env."""
    out = []
    for comp, col in zip(completions, color):
        text = comp[0]["content"] if isinstance(comp, list) else comp
        out.append(C.score(text, col))
    return out


def dataset(seeds: list[int], size):
    import datasets

    rows = []
    for s in seeds:
        img, color = C.square_image(s, size)
        rows.append({"prompt": C.messages(), "image": img, "color": color, "seed": s})
    return datasets.Dataset.from_list(rows)


def trainer(size, seeds: list[int], loss_type: str = "dapo", gradient_checkpointing: bool = True,
            bf16: bool = False, max_steps: int = 10, callbacks=(), max_pixels: int | None = None,
            group: int = 8, max_completion_length: int = 32, learning_rate: float = 1e-6):
    from transformers import AutoModelForImageTextToText, AutoProcessor
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    model = AutoModelForImageTextToText.from_pretrained(C.TINY, dtype=torch.float32)
    processor = AutoProcessor.from_pretrained(C.TINY)
    if max_pixels is not None:
        processor.image_processor.max_pixels = max_pixels
        processor.image_processor.size["longest_edge"] = max_pixels
    args = GRPOConfig(
        output_dir="/tmp/vlrl-bench-trl",
        num_generations=group,
        per_device_train_batch_size=group,
        max_completion_length=max_completion_length,
        learning_rate=learning_rate,
        loss_type=loss_type,
        beta=0.0,
        max_steps=max_steps,
        gradient_checkpointing=gradient_checkpointing,
        bf16=bf16,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    tr = GRPOTrainer(model=model, reward_funcs=reward_fn, args=args, train_dataset=dataset(seeds, size),
                     processing_class=processor, callbacks=list(callbacks))
    tr.remove_callback(PrinterCallback)
    tr.remove_callback(ProgressCallback)
    return tr


class Instrument:
    """Per-step phase times of a GRPOTrainer: rollout (`_prepare_inputs`: generation, reward,
    the second preprocessing for the training forward), forward+backward (`training_step` minus
    `_prepare_inputs`), optimizer (`optimizer.step`), other (the rest of the step: data loading,
    clipping, scheduler, logging). Also remembers the seed of each step's prompt."""

    def __init__(self, tr):
        self.tr = tr
        self.cur: dict[str, float] = {}
        self.seed = None
        orig_prep, orig_ts, orig_gen = tr._prepare_inputs, tr.training_step, tr._generate_and_score_completions

        def prep(*a, **k):
            t0 = time.perf_counter()
            try:
                return orig_prep(*a, **k)
            finally:
                self._add("rollout", time.perf_counter() - t0)

        def ts(*a, **k):
            t0 = time.perf_counter()
            before = self.cur.get("rollout", 0.0)
            try:
                return orig_ts(*a, **k)
            finally:
                self._add("train", time.perf_counter() - t0 - (self.cur.get("rollout", 0.0) - before))

        def gen(inputs, *a, **k):
            self.seed = inputs[0]["seed"]
            return orig_gen(inputs, *a, **k)

        tr._prepare_inputs, tr.training_step, tr._generate_and_score_completions = prep, ts, gen

    def _add(self, k, v):
        self.cur[k] = self.cur.get(k, 0.0) + v

    def take(self) -> dict[str, float]:
        out, self.cur = self.cur, {}
        return out
