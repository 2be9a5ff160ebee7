"""What an engine returns per sampled response (its own module: the engines and the runner both use it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Sample:
    response_ids: list[int]  # EOS included when the model stopped
    logprobs: list[float]  # per token, at the sampling temperature
    text: str
    finished: bool  # stopped on EOS (False: hit max_new_tokens)
