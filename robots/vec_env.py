"""N environments in subprocesses (spawn) with batched observations, auto-reset and per-env seeds.

A worker that crashes, raises or does not answer within its timeout is killed and restarted; the
episode it was running ends with truncated=True and info["worker_failed"] = True (never a success), and
the run goes on. Spawn (not fork) because MuJoCo/OpenGL contexts and torch threads do not survive fork.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)


@dataclass
class VecEnvConfig:
    """How the vectorized env runs its workers."""

    seed: int = 0
    """Base seed; env i's k-th episode uses seed + i + k * num_envs, so no two episodes share a seed."""
    step_timeout_s: float = 30.0
    """A worker that has not answered a step within this is treated as hung and restarted."""
    reset_timeout_s: float = 180.0
    """Timeout for reset, which includes building the env after a (re)start."""
    auto_reset: bool = True
    """Reset an env as soon as its episode ends (the last obs goes to info["final_obs"])."""
    max_reset_failures: int = 3
    """Consecutive failed resets of one env before the run gives up (a broken config, not bad luck)."""
    inline_last: bool = False
    """Step the last env in the calling process instead of a worker: N processes for N envs, not N + 1 (the
    caller otherwise sits idle while the workers step). That env has no step timeout and shares the caller's
    threads and OpenGL state; a failure rebuilds it in place. bench/env_throughput.py --inline measures it."""
    worker_threads: int = 1
    """OpenMP / BLAS threads per worker (0 = the libraries' default: all cores each). Physics is single-threaded,
    so more threads per worker only risk oversubscribing the cores when N workers run; on 2 cores the measured
    N=2 scaling was the same within noise either way (bench/env_throughput.py --worker-threads)."""


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def _thread_env(threads: int):
    """Thread-count variables set only while a worker is spawned (the parent's own settings are kept)."""
    if threads <= 0:
        yield
        return
    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: str(threads) for k in _THREAD_VARS})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class WorkerFailure(RuntimeError):
    """A worker crashed, raised, or timed out."""


def _worker(conn, env_fn: Callable[[], Any]) -> None:
    """Subprocess loop: build the env, then answer (cmd, payload) requests with ("ok"|"error", value)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes us
    env = None
    try:
        env = env_fn()
        while True:
            cmd, payload = conn.recv()
            if cmd == "close":
                break
            try:
                if cmd == "reset":
                    out = env.reset(**payload)
                elif cmd == "step":
                    out = env.step(payload)
                elif cmd == "call":
                    name, args, kwargs = payload
                    attr = getattr(env, name)
                    out = attr(*args, **kwargs) if callable(attr) else attr
                else:
                    raise ValueError(f"unknown command {cmd!r}")
                conn.send(("ok", out))
            except Exception:  # noqa: BLE001  (reported to the parent, which restarts us)
                conn.send(("error", traceback.format_exc()))
    except (EOFError, KeyboardInterrupt, BrokenPipeError):
        pass
    except Exception:  # noqa: BLE001  (env build failed: tell the parent if it still listens)
        try:
            conn.send(("error", traceback.format_exc()))
        except (BrokenPipeError, OSError):
            pass
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001
                pass


class _InlineConn:
    """The worker protocol served in the calling process: `send` runs the request at once (the VecEnv sends
    to every real worker before it reaches this env, so they overlap), `recv` returns the answer."""

    def __init__(self, env_fn: Callable[[], Any]) -> None:
        self.env_fn, self.env, self._answer = env_fn, None, None

    def send(self, msg) -> None:
        cmd, payload = msg
        if cmd == "close":
            self.close()
            return
        try:
            if self.env is None:
                self.env = self.env_fn()
            if cmd == "reset":
                out = self.env.reset(**payload)
            elif cmd == "step":
                out = self.env.step(payload)
            elif cmd == "call":
                name, args, kwargs = payload
                attr = getattr(self.env, name)
                out = attr(*args, **kwargs) if callable(attr) else attr
            else:
                raise ValueError(f"unknown command {cmd!r}")
            self._answer = ("ok", out)
        except Exception:  # noqa: BLE001  (same contract as a worker: reported, then the env is rebuilt)
            self._answer = ("error", traceback.format_exc())

    def poll(self, timeout: float = 0.0) -> bool:
        return self._answer is not None

    def recv(self):
        if self._answer is None:
            raise EOFError("no request pending")
        answer, self._answer = self._answer, None
        return answer

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001
                pass


def stack_obs(obs_list: Sequence[dict]) -> dict:
    """Batch per-env observation dicts: arrays are stacked on a new axis 0, strings become lists."""
    first = obs_list[0]
    out = {}
    for k, v in first.items():
        vals = [o[k] for o in obs_list]
        if isinstance(v, dict):
            out[k] = stack_obs(vals)
        elif isinstance(v, (np.ndarray, np.generic, float, int)):
            out[k] = np.stack([np.asarray(x) for x in vals])
        else:
            out[k] = list(vals)
    return out


class VecEnv:
    """Vectorized env; construct with one picklable factory per env (e.g. functools.partial(make_env, cfg))."""

    def __init__(self, env_fns: Sequence[Callable[[], Any]], cfg: VecEnvConfig | None = None) -> None:
        self.cfg = cfg or VecEnvConfig()
        self.env_fns = list(env_fns)
        self.num_envs = len(self.env_fns)
        self._ctx = mp.get_context("spawn")
        self._procs: list = [None] * self.num_envs
        self._conns: list = [None] * self.num_envs
        self._episodes = [0] * self.num_envs
        self._last_obs: list = [None] * self.num_envs
        self.restarts = [0] * self.num_envs
        for i in range(self.num_envs):
            self._start(i)

    # ---- worker lifecycle -------------------------------------------------------------------
    def _start(self, i: int) -> None:
        if self.cfg.inline_last and i == self.num_envs - 1:
            self._procs[i], self._conns[i] = None, _InlineConn(self.env_fns[i])
            return
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child, self.env_fns[i]), daemon=True)
        with _thread_env(self.cfg.worker_threads):  # read by the child's numpy/MuJoCo at import time
            proc.start()
        child.close()
        self._procs[i], self._conns[i] = proc, parent

    def _kill(self, i: int) -> None:
        proc, conn = self._procs[i], self._conns[i]
        if conn is not None:
            conn.close()
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(timeout=5)
        self._procs[i] = self._conns[i] = None

    def _restart(self, i: int, reason: str) -> None:
        log.warning("env worker %d failed (%s); restarting", i, reason.strip().splitlines()[-1][:200])
        self._kill(i)
        self.restarts[i] += 1
        self._start(i)

    def _send(self, i: int, cmd: str, payload: Any) -> None:
        try:
            self._conns[i].send((cmd, payload))
        except (BrokenPipeError, OSError) as e:
            raise WorkerFailure(f"send failed: {e!r}") from e

    def _recv(self, i: int, deadline: float) -> Any:
        conn = self._conns[i]
        try:
            if not conn.poll(max(deadline - time.monotonic(), 0.0)):
                raise WorkerFailure("timed out")
            status, value = conn.recv()
        except (EOFError, OSError, ConnectionError) as e:
            code = self._procs[i].exitcode if self._procs[i] is not None else None
            raise WorkerFailure(f"worker died (exit code {code}): {e!r}") from e
        if status != "ok":
            raise WorkerFailure(str(value))
        return value

    # ---- seeds and resets -------------------------------------------------------------------
    def _next_seed(self, i: int) -> int:
        seed = self.cfg.seed + i + self._episodes[i] * self.num_envs
        self._episodes[i] += 1
        return seed

    def _reset_many(self, idx: Sequence[int], kwargs: dict[int, dict]) -> dict[int, dict]:
        """Reset envs in parallel; a failing worker is restarted and retried (bounded)."""
        pending, out, failures = list(idx), {}, {i: 0 for i in idx}
        while pending:
            sent = []
            for i in pending:
                try:
                    self._send(i, "reset", kwargs[i])
                    sent.append(i)
                except WorkerFailure as e:
                    self._fail_reset(i, str(e), failures)
            deadline = time.monotonic() + self.cfg.reset_timeout_s
            retry = [i for i in pending if i not in sent]
            for i in sent:
                try:
                    out[i] = self._recv(i, deadline)
                except WorkerFailure as e:
                    self._fail_reset(i, str(e), failures)
                    retry.append(i)
            pending = retry
        for i, o in out.items():
            self._last_obs[i] = o
        return out

    def _fail_reset(self, i: int, reason: str, failures: dict[int, int]) -> None:
        failures[i] += 1
        if failures[i] >= self.cfg.max_reset_failures:
            raise RuntimeError(f"env {i} failed to reset {failures[i]} times in a row:\n{reason}")
        self._restart(i, reason)

    def reset(self, seeds: Sequence[int | None] | None = None, init_states: Sequence[Any] | None = None) -> dict:
        """Reset every env (explicit seeds / init states, else each env's next seed); batched obs."""
        kwargs = {}
        for i in range(self.num_envs):
            seed = seeds[i] if seeds is not None else self._next_seed(i)
            kw = {"seed": seed}
            if init_states is not None and init_states[i] is not None:
                kw["init_state"] = init_states[i]
            kwargs[i] = kw
        out = self._reset_many(range(self.num_envs), kwargs)
        return stack_obs([out[i] for i in range(self.num_envs)])

    # ---- stepping ---------------------------------------------------------------------------
    def step(self, actions, active: Sequence[bool] | None = None):
        """Step the active envs (default all) with actions [N, 7]; inactive envs return their last obs.

        Returns batched obs, rewards [N], terminated [N], truncated [N], infos (list of dicts).
        """
        actions = np.asarray(actions, dtype=np.float64)
        if actions.shape[0] != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got shape {actions.shape}")
        active = [True] * self.num_envs if active is None else list(active)
        results: dict[int, tuple] = {}
        failed: dict[int, str] = {}
        sent = []
        for i in range(self.num_envs):
            if not active[i]:
                continue
            try:
                self._send(i, "step", actions[i])
                sent.append(i)
            except WorkerFailure as e:
                failed[i] = str(e)
        deadline = time.monotonic() + self.cfg.step_timeout_s
        for i in sent:
            try:
                results[i] = self._recv(i, deadline)
            except WorkerFailure as e:
                failed[i] = str(e)
        for i, reason in failed.items():
            self._restart(i, reason)
        # Envs whose episode ended (or whose worker failed) start a new one.
        to_reset = sorted(failed) + [i for i, r in results.items() if self.cfg.auto_reset and (r[2] or r[3])]
        fresh = self._reset_many(to_reset, {i: {"seed": self._next_seed(i)} for i in to_reset})

        obs, rew = [], np.zeros(self.num_envs, dtype=np.float32)
        term = np.zeros(self.num_envs, dtype=bool)
        trunc = np.zeros(self.num_envs, dtype=bool)
        infos: list[dict] = []
        for i in range(self.num_envs):
            if i in failed:
                info = {"worker_failed": True, "error": failed[i][-2000:], "success": False}
                trunc[i] = True
                obs.append(fresh[i])
            elif i in results:
                o, r, te, tr, info = results[i]
                info = dict(info)
                rew[i], term[i], trunc[i] = r, te, tr
                if i in fresh:
                    info["final_obs"] = o
                    o = fresh[i]
                obs.append(o)
                self._last_obs[i] = o
            else:
                info = {"inactive": True}
                obs.append(self._last_obs[i])
            infos.append(info)
        return stack_obs(obs), rew, term, trunc, infos

    def call(self, i: int, name: str, *args, **kwargs) -> Any:
        """Call a method (or read an attribute) of env i in its worker; a failure restarts the worker."""
        try:
            self._send(i, "call", (name, args, kwargs))
            return self._recv(i, time.monotonic() + self.cfg.step_timeout_s)
        except WorkerFailure as e:
            self._restart(i, str(e))
            raise

    def close(self) -> None:
        for i in range(self.num_envs):
            try:
                self._send(i, "close", None)
            except WorkerFailure:
                pass
        for i in range(self.num_envs):
            proc = self._procs[i]
            if proc is not None:
                proc.join(timeout=10)
            self._kill(i)

    def __enter__(self) -> "VecEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
