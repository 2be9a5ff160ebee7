"""Rollouts with vLLM, colocated with the trainer on the same GPU(s). GPU only.

UNTESTED on a GPU so far (no GPU was available while writing it); its tests are marked `gpu`.
vLLM pins its own torch / transformers, so install it in a separate environment (`.[vllm]`).

The engine keeps its own copy of the weights; `sync_weights()` pushes the trainer's weights into
it after every update. Samples come back with the log-prob of each sampled token (`logprobs=0`),
computed by vLLM at the sampling temperature.
"""

from __future__ import annotations

import os

from vlrl.config import RolloutConfig
from vlrl.encoding import banned_token_ids
from vlrl.episode import Observation
from vlrl.models import base_model
from vlrl.rollout.sample import Sample


class VLLMEngine:
    def __init__(self, model, processor, cfg: RolloutConfig):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("rollout.engine=vllm needs a CUDA GPU; use rollout=hf on CPU")
        # In-process engine so that the weights can be loaded from this process after each update.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.model, self.processor, self.cfg = model, processor, cfg
        path = base_model(model).name_or_path
        self.llm = LLM(
            model=path,
            tensor_parallel_size=cfg.vllm_tensor_parallel_size,
            gpu_memory_utilization=cfg.vllm_gpu_memory_utilization,
            dtype="bfloat16",
            enable_prefix_caching=True,  # a group's G samples share their prompt (and its image encoding)
            limit_mm_per_prompt={"image": 8, "video": 1},
        )
        self.banned = banned_token_ids(processor)

    def sync_weights(self) -> None:
        """Copy the trainer's current weights into the vLLM engine (same process, same GPU)."""
        state = base_model(self.model).state_dict()

        def load(worker):
            worker.model_runner.model.load_weights(weights=state.items())

        if hasattr(self.llm, "collective_rpc"):
            self.llm.collective_rpc(load)
        else:
            self.llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(state.items())
        self.llm.reset_prefix_cache()

    def generate(self, observations: list[Observation], n: int = 1, greedy: bool = False) -> list[list[Sample]]:
        from vllm import SamplingParams

        params = SamplingParams(
            n=n,
            temperature=0.0 if greedy else self.cfg.temperature,
            top_p=self.cfg.top_p,
            top_k=self.cfg.top_k if self.cfg.top_k > 0 else -1,
            max_tokens=self.cfg.max_new_tokens,
            logprobs=0,
            logit_bias={i: -100.0 for i in self.banned} or None,
        )
        prompts = []
        for obs in observations:
            text = self.processor.apply_chat_template(obs.messages, add_generation_prompt=True, tokenize=False)
            mm = {}
            if obs.images:
                mm["image"] = list(obs.images)
            if obs.videos:
                mm["video"] = [list(v) for v in obs.videos]
            prompts.append({"prompt": text, "multi_modal_data": mm} if mm else {"prompt": text})
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        results = []
        for out in outputs:
            row = []
            for c in out.outputs:
                ids = list(c.token_ids)
                lps = [step[tok].logprob for step, tok in zip(c.logprobs, ids)]
                row.append(Sample(response_ids=ids, logprobs=lps, text=c.text, finished=c.finish_reason == "stop"))
            results.append(row)
        return results
