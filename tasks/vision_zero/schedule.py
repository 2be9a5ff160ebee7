"""Iterative-SPO phase schedules: which stage of the game is trained at a step ("decision" or "clue").

Both stages are played at every step; the schedule only picks the one that receives gradients.

* Fixed (Vision-Zero's released schedule): `phase(step, cycle)` is "decision" when step % (2L) < L,
  else "clue", with L = cycle: L decision steps, then L clue steps, repeated; step 0 is a decision step.
* Adaptive (the paper's switch), a pure state machine `next_state(state, stats, cfg)`: each step
  reports the decision stage's counts (correct, N/A, total answers). The window holds the counts of
  the last `cfg.window` steps with at least one answer (steps without answers carry no evidence and
  are skipped). With the window full:
    - decision -> clue when pooled accuracy >= `to_clue_accuracy` and pooled N/A rate <= `max_na_rate`;
    - clue -> decision when pooled accuracy < `back_accuracy`.
  Pooled = sums over the window's steps (a step with more answers weighs more). The window is
  emptied on every switch, so each phase lasts at least `window` steps with answers: a new phase is
  judged only on evidence gathered under it, and the schedule cannot flip every step.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

PHASES = ("decision", "clue")


def _index(value, name: str, minimum: int) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def phase(step: int, cycle: int) -> str:
    """The fixed schedule: "decision" when step % (2 * cycle) < cycle, else "clue" (step >= 0, cycle >= 1)."""
    step, cycle = _index(step, "step", 0), _index(cycle, "cycle", 1)
    return "decision" if step % (2 * cycle) < cycle else "clue"


@dataclass(frozen=True)
class SwitchConfig:
    """Thresholds of the adaptive switch; invalid values raise ValueError naming the field."""

    to_clue_accuracy: float = 0.9  # switch to clue training when the window's decision accuracy reaches this
    max_na_rate: float = 0.1  # ... and its N/A rate is at most this
    back_accuracy: float = 0.6  # back to decision training when the window's accuracy falls below this
    window: int = 4  # steps (with at least one decision answer) pooled for each judgement

    def __post_init__(self):
        for name in ("to_clue_accuracy", "max_na_rate", "back_accuracy"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"invalid config value for '{name}': {v!r} (a number in [0, 1])")
        if self.back_accuracy > self.to_clue_accuracy:
            raise ValueError(f"invalid config value for 'back_accuracy': {self.back_accuracy!r} "
                             f"(must be <= to_clue_accuracy = {self.to_clue_accuracy!r}, or the switch oscillates)")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 1:
            raise ValueError(f"invalid config value for 'window': {self.window!r} (an int >= 1)")


@dataclass(frozen=True)
class DecisionStats:
    """One step's decision-stage answers: how many were right, how many N/A, how many in all."""

    correct: int
    na: int
    total: int

    def __post_init__(self):
        if min(self.correct, self.na, self.total) < 0 or self.correct + self.na > self.total:
            raise ValueError(f"need 0 <= correct, na and correct + na <= total, got {self}")


@dataclass(frozen=True)
class SwitchState:
    """The adaptive schedule's state: the phase trained now and the window of recent stats (oldest first)."""

    phase: str = "decision"
    window: tuple[DecisionStats, ...] = ()

    def __post_init__(self):
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {self.phase!r}")


def pooled(window: tuple[DecisionStats, ...]) -> tuple[float, float]:
    """(accuracy, N/A rate) over all answers of the window; (0, 0) for no answers."""
    total = sum(s.total for s in window)
    if total == 0:
        return 0.0, 0.0
    return sum(s.correct for s in window) / total, sum(s.na for s in window) / total


def next_state(state: SwitchState, stats: DecisionStats, cfg: SwitchConfig) -> SwitchState:
    """The state after one step's decision stats (see the module docstring); the phase for the next step."""
    if stats.total == 0:
        return state
    window = (state.window + (stats,))[-cfg.window:]
    if len(window) < cfg.window:
        return SwitchState(state.phase, window)
    acc, na = pooled(window)
    if state.phase == "decision" and acc >= cfg.to_clue_accuracy and na <= cfg.max_na_rate:
        return SwitchState("clue", ())
    if state.phase == "clue" and acc < cfg.back_accuracy:
        return SwitchState("decision", ())
    return SwitchState(state.phase, window)
