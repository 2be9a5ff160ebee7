"""Success-rate curriculum over a finite pool of training seeds (tasks x initial states).

Each seed keeps its last `window` outcomes; a step draws its seeds with probability
``(1 - SR + 1e-9) ** (1 / T)`` ("failure", vlrl.algos.curriculum_weights: a seed never tried counts as
SR = 0) or ``(SR (1 - SR) + 0.01) ** (1 / T)`` ("learnability", vlrl.algos.learnability_weights: a seed
never tried counts as SR = 0.5), so every seed is visited early. The history is part of the
checkpoint, so a resumed run samples what the uninterrupted one would have.
"""

from __future__ import annotations

from collections import deque

import torch

from vlrl.algos import CURRICULUM_WEIGHTINGS, curriculum_weights, learnability_weights


class SeedCurriculum:
    def __init__(self, pool: int, window: int, temperature: float, first: int = 0, weighting: str = "failure"):
        if weighting not in CURRICULUM_WEIGHTINGS:
            allowed = " or ".join(repr(w) for w in CURRICULUM_WEIGHTINGS)
            raise ValueError(f"curriculum weighting must be {allowed}, got {weighting!r}")
        self.pool, self.window, self.temperature, self.first = pool, window, temperature, first
        self.weighting = weighting
        self.history: dict[int, deque] = {}  # seed -> recent outcomes; seeds are first..first+pool-1

    def _pool_outcomes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """([pool] success rate over each seed's window, 0 where never tried; [pool] bool tried); index i = seed first + i."""
        sr = torch.zeros(self.pool, dtype=torch.float64)
        tried = torch.zeros(self.pool, dtype=torch.bool)
        for seed, h in self.history.items():
            if h and 0 <= seed - self.first < self.pool:
                sr[seed - self.first] = sum(h) / len(h)
                tried[seed - self.first] = True
        return sr, tried

    def success_rates(self) -> torch.Tensor:
        """[pool] success rate per seed over its window (0 for seeds never tried); index i = seed first + i."""
        return self._pool_outcomes()[0]

    def sample(self, n: int, generator: torch.Generator) -> list[int]:
        """`n` distinct seeds (with replacement only when the pool is smaller than n)."""
        sr, tried = self._pool_outcomes()
        if self.weighting == "learnability":
            p = learnability_weights(sr, tried, self.temperature)
        else:
            p = curriculum_weights(sr, self.temperature)
        idx = torch.multinomial(p, n, replacement=n > self.pool, generator=generator).tolist()
        return [self.first + i for i in idx]

    def record(self, seed: int, success: float) -> None:
        self.history.setdefault(seed, deque(maxlen=self.window)).append(float(success))

    def state_dict(self) -> dict:
        return {str(k): list(v) for k, v in self.history.items()}

    def load_state_dict(self, state: dict) -> None:
        self.history = {int(k): deque(v, maxlen=self.window) for k, v in state.items()}
