"""Robot bridge server: runs next to the robot (or simulator), authenticates clients, enforces safety.

Control model: a fixed-rate control loop. A policy client sends "act" commands; each valid command is
applied once at the next tick (through the safety filter) and answered with an "obs" message. Ticks
without a new command hold the robot. Watchdog (watchdog.py): no valid command for `watchdog_s` after the
reply to the last one, or a command unanswered `command_deadline_s` after acceptance -> halted (hold + notice).
An "estop" from any authenticated client refuses every motion-causing command (act, reset, teleop) from the
moment it is acknowledged; the adapter's estop runs at the next tick; only an operator clears it, and a reset
must follow. Operators can pause, take over (teleop), mark success/failure and label episodes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from robots.bridge.auth import load_token, server_ssl_context
from robots.bridge.config import BridgeConfig
from robots.bridge.handler import CLOSE_ABUSE, CLOSE_AUTH, CLOSE_BUSY, ClientHandler  # noqa: F401  (re-exported)
from robots.bridge.hitl import RemoteTeleop, Teleop
from robots.bridge.protocol import MAX_FRAME_BYTES, encode
from robots.bridge.safety import SafetyFilter
from robots.bridge.watchdog import Watchdog
from robots.recorder import Episode, HDF5Recorder

log = logging.getLogger(__name__)


class BridgeServer(ClientHandler):
    """Serve one robot adapter. Use `await start()` / `await stop()`, or ServerThread from tests."""

    def __init__(self, adapter, cfg: BridgeConfig | None = None, token: str | None = None,
                 teleop: Teleop | None = None) -> None:
        self.cfg = cfg or BridgeConfig()
        self._check_bind()
        self.token = token if token is not None else load_token(self.cfg.token_file, self.cfg.token_env)
        self.adapter, self.safety = adapter, SafetyFilter(self.cfg.safety)
        self.remote_teleop = RemoteTeleop()
        self.teleop = teleop if teleop is not None else self.remote_teleop
        self._exec = ThreadPoolExecutor(1, thread_name_prefix="robot")  # every adapter call on one thread
        self._lock = asyncio.Lock()
        self._recorder = HDF5Recorder(self.cfg.record_path) if self.cfg.record_path else None
        self._io = ThreadPoolExecutor(1, thread_name_prefix="episode-writer")  # file I/O off the control loop
        self._writes: list = []
        self.episodes: deque[Episode] = deque(maxlen=self.cfg.keep_episodes)
        self.episode = Episode()
        self.rejections: list[tuple[str, str]] = []
        self.bad_messages = 0
        self._cmd = None  # (action, seq, t) of the newest unapplied policy command
        self.watchdog = Watchdog(self.cfg.watchdog_s, self.cfg.command_deadline_s)
        self._wd_wake: asyncio.Event | None = None  # wakes the watchdog task when its due time may have moved
        self.halted = self.paused = self.takeover = self.estopped = self.needs_reset = False
        self.stopping = False  # stop() has begun: nothing moves any more
        self._estop_req_t: float | None = None
        self.estop_latency_s: float | None = None
        self.watchdog_latency_s: float | None = None
        self.ticks = 0
        self._policy_ws = None
        self._server = self._loop_task = self._watchdog_task = None
        self.port: int | None = None

    def _check_bind(self) -> None:
        try:
            loopback = ipaddress.ip_address(self.cfg.host).is_loopback
        except ValueError:
            loopback = self.cfg.host == "localhost"
        if not loopback and not self.cfg.tls_cert and not self.cfg.allow_insecure_remote:
            raise ValueError(f"refusing to bind {self.cfg.host} without TLS; set tls_cert or allow_insecure_remote")

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._exec, fn, *args)

    # ---- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> int:
        obs = await self._run(self.adapter.start)
        self._new_episode(obs, {})
        self._server = await serve(self._handler, self.cfg.host, self.cfg.port, max_size=MAX_FRAME_BYTES,
                                   ssl=server_ssl_context(self.cfg.tls_cert, self.cfg.tls_key))
        self.port = self._server.sockets[0].getsockname()[1]
        self._loop_task = asyncio.create_task(self._control_loop())
        self._watchdog_task = asyncio.create_task(self._watchdog_loop())
        log.info("bridge listening on %s:%d", self.cfg.host, self.port)
        return self.port

    async def stop(self) -> None:
        """Hold the robot and keep the episode in progress (reason `shutdown`, written to record_path), then close."""
        self.stopping = True  # from here every motion-causing command is refused
        for task in (self._loop_task, self._watchdog_task):
            if task:
                task.cancel()
        async with self._lock:  # before the connections close, so the episode ends as a shutdown, not a disconnect
            await self._drop_cmd("shutdown")
            await self._run(self.adapter.hold)
            if self.episode.steps:
                self.episode.event("shutdown")
            self._end_episode("shutdown")
        if self._server:
            self._server.close()
            await self._server.wait_closed()
        await self._run(self.adapter.close)
        self._exec.shutdown(wait=True)
        self._io.shutdown(wait=True)

    # ---- episodes -----------------------------------------------------------------------------
    def _write(self, ep: Episode) -> None:
        try:
            self._recorder.write(ep)
        except Exception:  # noqa: BLE001  (losing a file must not stop the robot loop)
            log.exception("could not write the episode")

    def flush_writes(self, timeout_s: float = 60.0) -> None:
        """Wait until every finished episode is on disk (thread-safe)."""
        for f in list(self._writes):
            f.result(timeout=timeout_s)

    def _new_episode(self, obs: dict, meta: dict) -> None:
        self.episode = Episode(language=obs.get("instruction", ""), meta=meta)

    def _end_episode(self, reason: str, success: bool | None = None) -> None:
        ep = self.episode.end(reason, success)
        if ep.steps:  # an episode without steps holds no data (events of a 0-step episode are dropped with it)
            self.episodes.append(ep)
            if self._recorder is not None:
                self._writes = [f for f in self._writes if not f.done()] + [self._io.submit(self._write, ep)]
        self.episode = Episode(language=ep.language, meta=dict(ep.meta))

    # ---- control loop -------------------------------------------------------------------------
    async def _control_loop(self) -> None:
        period = 1.0 / self.cfg.control_hz
        next_t = time.monotonic()
        while True:
            try:
                async with self._lock:
                    await self._tick(time.monotonic())
            except Exception:  # noqa: BLE001  (a failing tick holds; the loop must survive)
                log.exception("control tick failed; holding")
                await self._run(self.adapter.hold)
            self.ticks += 1
            next_t += period
            delay = next_t - time.monotonic()
            if delay < 0:
                next_t, delay = time.monotonic(), 0.0
            await asyncio.sleep(delay)

    def _watchdog_quiet(self) -> bool:
        """Nothing to watch: halted already, or the policy cannot command (pause, takeover, e-stop, reset due)."""
        return self.halted or self.paused or self.takeover or self._estop_active() or self.needs_reset

    async def _check_watchdog(self, now: float) -> None:
        trip = None if self._watchdog_quiet() else self.watchdog.check(now)
        if trip is None:
            return
        kind, seconds = trip
        self.halted = True  # ticks hold until a valid command arrives
        if kind == "watchdog":
            self.watchdog_latency_s = seconds
            self.episode.event("watchdog", silence_s=seconds)
            await self._notify("halted", reason="watchdog", silence_s=seconds)
        else:  # the robot side is late: a command not started yet is never applied late
            self.episode.event("deadline", exec_s=seconds)
            await self._notify("halted", reason="deadline", exec_s=seconds)
            await self._drop_cmd("stale")

    def _watchdog_changed(self) -> None:
        if self._wd_wake is not None:
            self._wd_wake.set()

    async def _watchdog_loop(self) -> None:
        """Trip the watchdog on time even while a control tick is busy in the robot thread."""
        self._wd_wake = asyncio.Event()
        while True:
            due = None if self._watchdog_quiet() else self.watchdog.due()  # woken when that changes
            timeout = None if due is None else max(due - time.monotonic(), 0.0) + 1e-3
            try:
                await asyncio.wait_for(self._wd_wake.wait(), timeout)
            except (TimeoutError, asyncio.TimeoutError):
                pass
            self._wd_wake.clear()
            await self._check_watchdog(time.monotonic())

    async def _apply_estop(self) -> None:
        """Run the adapter's e-stop for the acknowledged request and end the episode (caller holds the lock)."""
        await self._run(self.adapter.estop)
        self.estopped, self.needs_reset = True, True
        self.estop_latency_s = time.monotonic() - self._estop_req_t
        await self._drop_cmd("estopped")
        self.watchdog.disarm()  # nothing moves until a reset, which re-arms it
        self.episode.event("estop", latency_s=self.estop_latency_s)
        self._end_episode("estop", success=False)
        await self._notify("estopped", latency_s=self.estop_latency_s)

    async def _tick(self, now: float) -> None:
        if self._estop_req_t is not None and not self.estopped:
            return await self._apply_estop()
        if self.estopped:
            return
        action, source, seq = None, None, None
        if self.paused or self.needs_reset:  # after an e-stop or a failed reset nothing moves until a reset
            pass
        elif self.takeover:
            action = self.teleop.action(self.adapter.observe())
            source = "human"
        elif self._cmd is not None:
            action, seq, t_cmd = self._cmd
            self._cmd = None
            source = "policy"
            if now - t_cmd > self.cfg.command_deadline_s:  # stale (the loop fell behind): never apply late
                action = None
                await self._send(self._policy_ws, "refused", reason="stale", seq=seq)
                self._replied()
        if action is None:
            await self._check_watchdog(now)  # also checked by its own timer task, whichever is first
            await self._run(self.adapter.hold)
            self.safety.reset()
            return
        await self._apply(action, source, seq)

    async def _apply(self, action: np.ndarray, source: str, seq: int | None) -> None:
        obs = self.adapter.observe()
        safe, fired = self.safety(action, obs.get("proprio"))
        state = await self._run(self.adapter.get_state)
        result = await self._run(self.adapter.apply, safe)
        self.episode.add_step(obs, safe, reward=result.get("reward", 0.0), state=state, source=source,
                              requested=np.asarray(action, np.float32), safety=",".join(fired))
        done = bool(result.get("success")) or bool(result.get("truncated"))
        if source == "policy":
            await self._send_obs(self._policy_ws, seq, result=result, safety=fired, applied=np.asarray(safe, np.float64))
            self._replied()  # client silence counts from here: a synchronous client cannot send before this reply
        elif source == "human":
            # Tell the policy client what the human did (the observation it acted on, the applied action),
            # so a trainer can keep the intervention as a demonstration.
            await self._send(self._policy_ws, "human_step", **self._obs_fields(obs), action=np.asarray(safe, np.float64),
                             requested=np.asarray(action, np.float64), result=result, safety=fired)
        if done:
            self._end_episode("success" if result.get("success") else "timeout", success=bool(result.get("success")))

    # ---- messaging ----------------------------------------------------------------------------
    def _obs_fields(self, obs: dict | None = None) -> dict:
        obs = self.adapter.observe() if obs is None else obs
        images = obs.get("images", {}) if self.cfg.send_images else {}
        return {"images": images, "proprio": np.asarray(obs.get("proprio", []), np.float32),
                "instruction": obs.get("instruction", "")}

    async def _send(self, ws, msg_type: str, **fields) -> None:
        if ws is None:
            return
        try:
            await ws.send(encode(msg_type, **fields))
        except ConnectionClosed:
            pass

    async def _send_obs(self, ws, seq, **extra) -> None:
        await self._send(ws, "obs", seq=seq, **self._obs_fields(), **extra)

    async def _drop_cmd(self, reason: str) -> None:
        """Discard the pending policy command, answering it so a waiting client never hangs."""
        if self._cmd is not None:
            seq, self._cmd = self._cmd[1], None
            await self._send(self._policy_ws, "refused", reason=reason, seq=seq)
            self._replied()

    def _replied(self) -> None:
        self.watchdog.replied(time.monotonic())
        self._watchdog_changed()

    def _estop_active(self) -> bool:
        """An e-stop was acknowledged (applied or about to be at the next tick) and not cleared."""
        return self.estopped or self._estop_req_t is not None

    async def _notify(self, kind: str, **fields) -> None:
        await self._send(self._policy_ws, kind, **fields)

    def status(self) -> dict:
        return {"estopped": self.estopped, "halted": self.halted, "paused": self.paused, "takeover": self.takeover,
                "needs_reset": self.needs_reset, "ticks": self.ticks, "episode_steps": len(self.episode.steps),
                "episodes": len(self.episodes), "estop_latency_s": self.estop_latency_s,
                "watchdog_latency_s": self.watchdog_latency_s, "policy_connected": self._policy_ws is not None}
