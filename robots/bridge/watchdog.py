"""The bridge's two timers: client silence (watchdog) and the robot side's own command deadline.

Silence is the policy client's: it counts from the moment the reply to its last valid command was sent (a
synchronous client cannot send before that reply), so the time the robot or simulator spends executing a command
is never taken for client silence. While a command is in flight (accepted, not yet answered) the client is
waiting on us; the only limit then is the executor's own `deadline_s`, counted from acceptance.
Pure bookkeeping: the server decides what tripping means (halt, hold, notice, episode event).
"""

from __future__ import annotations


class Watchdog:
    """Disarmed until the first reply to a valid command; `check(now)` says which limit, if any, was passed."""

    def __init__(self, silence_s: float, deadline_s: float) -> None:
        self.silence_s, self.deadline_s = silence_s, deadline_s
        self.accepted_t: float | None = None  # acceptance time of the command in flight (None: none)
        self.replied_t: float | None = None  # when the reply to the last valid command was sent

    def accepted(self, t: float) -> None:
        """A valid command was accepted at `t` (a newer one replaces the one in flight)."""
        self.accepted_t = t

    def replied(self, t: float) -> None:
        """The command in flight was answered (applied or refused) at `t`: client silence starts now."""
        self.accepted_t, self.replied_t = None, t

    def disarm(self) -> None:
        """No client to wait for (disconnect, reset): nothing trips until the next accepted command is answered."""
        self.accepted_t = self.replied_t = None

    def restart(self, t: float) -> None:
        """The client could not command until `t` (pause / takeover just ended): silence counts from `t`."""
        if self.replied_t is not None:
            self.replied_t = t

    def due(self) -> float | None:
        """Monotonic time at which `check` will first report a trip (None: disarmed)."""
        if self.accepted_t is not None:
            return self.accepted_t + self.deadline_s
        return None if self.replied_t is None else self.replied_t + self.silence_s

    def check(self, now: float) -> tuple[str, float] | None:
        """("deadline", seconds since acceptance) | ("watchdog", seconds of silence) once past the limit, else None."""
        if self.accepted_t is not None:
            over = now - self.accepted_t
            return ("deadline", over) if over > self.deadline_s else None
        if self.replied_t is not None and now - self.replied_t > self.silence_s:
            return "watchdog", now - self.replied_t
        return None
