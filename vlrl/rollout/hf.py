"""Rollouts with transformers' `generate` (CPU or GPU), KV-cached and batched.

Each prompt goes through the model once per group (n samples): the prompts minus their last token are prefilled once and the KV cache repeated for the G samples
(vlrl/rollout/hf_prefill.py), so G samples cost one vision pass and one prompt prefill.
Log-probs come from `output_logits` (raw logits, before any logits processor) at the sampling
temperature, which is what the training forward recomputes.
"""

from __future__ import annotations

import torch

from vlrl.algos import token_logprobs
from vlrl.config import RolloutConfig
from vlrl.encoding import allowed_mask, banned_token_ids, collate_prompts, encode, mask_banned, mask_disallowed
from vlrl.episode import Observation
from vlrl.models import base_model
from vlrl.rollout.hf_prefill import can_share, prefill_once
from vlrl.rollout.sample import Sample


class _AllowedTokens:
    """Logits processor for constrained decoding: position t of row r keeps only allowed[r, t]."""

    def __init__(self, allowed: torch.Tensor, prompt_len: int):
        self.allowed, self.prompt_len = allowed, prompt_len

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1] - self.prompt_len
        return mask_disallowed(scores, self.allowed[:, t]) if t < self.allowed.shape[1] else scores


class HFEngine:
    def __init__(self, model, processor, cfg: RolloutConfig):
        self.model = model
        self.processor = processor
        self.cfg = cfg
        tok = processor.tokenizer
        self.pad_id = tok.pad_token_id
        gen_eos = base_model(model).generation_config.eos_token_id
        eos = gen_eos if gen_eos is not None else tok.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos])
        self.banned = banned_token_ids(processor)
        self.share_prefill = True  # one prefill per prompt for its n samples; False: generate's own expansion

    def sync_weights(self) -> None:
        """Nothing to do: generation uses the training model itself."""

    @torch.no_grad()
    def generate(self, observations: list[Observation], n: int = 1, greedy: bool = False) -> list[list[Sample]]:
        """`n` samples for each observation: result[i][j] is sample j of observation i."""
        per_call = max(1, self.cfg.batch_size // n)
        results: list[list[Sample]] = []
        for start in range(0, len(observations), per_call):
            results.extend(self._generate_chunk(observations[start : start + per_call], n, greedy))
        return results

    def _generate_chunk(self, observations: list[Observation], n: int, greedy: bool) -> list[list[Sample]]:
        model = base_model(self.model)
        device = next(model.parameters()).device
        encs = [encode(self.processor, o) for o in observations]
        batch = {k: v.to(device) for k, v in collate_prompts(encs, self.pad_id).items()}
        prompt_len = batch["input_ids"].shape[1]
        rows = [o for o in observations for _ in range(n)]  # generate's row order: n samples per prompt
        vocab = base_model(self.model).get_output_embeddings().weight.shape[0]
        allowed = allowed_mask(rows, self.cfg.max_new_tokens, vocab, device)
        sampling = dict(do_sample=not greedy)
        if not greedy:
            sampling.update(temperature=self.cfg.temperature, top_p=self.cfg.top_p, top_k=self.cfg.top_k or None)
        # G > 1 samples per prompt: the prompt is prefilled once and its KV cache shared (vlrl/rollout/hf_prefill.py).
        shared = n > 1 and self.share_prefill and can_share(batch)
        inputs = prefill_once(self.model, batch, n) if shared else batch
        out = model.generate(
            **inputs,
            **sampling,
            max_new_tokens=self.cfg.max_new_tokens,
            num_return_sequences=1 if shared else n,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids),
            use_cache=True,
            suppress_tokens=self.banned or None,
            logits_processor=[_AllowedTokens(allowed, prompt_len)] if allowed is not None else None,
        )
        tokens = out.sequences[:, prompt_len:]  # [B*n, T]
        temperature = 1.0 if greedy else self.cfg.temperature
        # One vocab-sized slice at a time: stacking all steps would hold [B*n, T, V] at once.
        logps = torch.stack(
            [
                token_logprobs(
                    mask_disallowed(mask_banned(step[:, None, :].float(), self.banned),
                                    None if allowed is None else allowed[:, t : t + 1]),
                    tokens[:, t : t + 1], temperature)[:, 0]
                for t, step in enumerate(out.logits)
            ],
            dim=1,
        )
        samples: list[list[Sample]] = []
        for i, obs in enumerate(observations):
            row = []
            for j in range(n):
                r = i * n + j
                ids = tokens[r].tolist()
                length, stopped = len(ids), False
                for k, tok in enumerate(ids):
                    if tok in self.eos_ids:
                        length, stopped = k + 1, True
                        break
                ids = ids[:length]
                row.append(
                    Sample(
                        response_ids=ids,
                        logprobs=logps[r, :length].tolist(),
                        text=self.processor.tokenizer.decode(ids, skip_special_tokens=True),
                        finished=stopped,
                    )
                )
            samples.append(row)
        return samples
