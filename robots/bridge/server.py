"""Robot bridge server: runs next to the robot (or simulator), authenticates clients, enforces safety.

Control model: a fixed-rate control loop. A policy client sends "act" commands; each valid command is
applied once at the next tick (through the safety filter) and answered with an "obs" message. Ticks
without a new command hold the robot. No valid command for `watchdog_s` -> halted (hold + notice).
An "estop" from any authenticated client takes effect at the next tick; only an operator clears it, and
a reset must follow. Operators can pause, take over (teleop), mark success/failure and label episodes.
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

from robots.bridge.auth import load_token, server_ssl_context, token_matches
from robots.bridge.config import BridgeConfig
from robots.bridge.hitl import RemoteTeleop, Teleop
from robots.bridge.protocol import MAX_FRAME_BYTES, OPERATOR_TYPES, ProtocolError, decode, encode, validate_action, validate_client_message
from robots.bridge.safety import SafetyFilter
from robots.recorder import Episode, HDF5Recorder

log = logging.getLogger(__name__)
CLOSE_AUTH = 4401  # application close codes (4000-4999)
CLOSE_BUSY = 4409
CLOSE_ABUSE = 4400


class BridgeServer:
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
        self._last_valid_t: float | None = None
        self.halted = self.paused = self.takeover = self.estopped = self.needs_reset = False
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
        for task in (self._loop_task, self._watchdog_task):
            if task:
                task.cancel()
        if self._server:
            self._server.close()
            await self._server.wait_closed()
        async with self._lock:
            await self._run(self.adapter.hold)
            self._end_episode("shutdown")
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
        if ep.steps or ep.events:
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

    async def _check_watchdog(self, now: float) -> None:
        if (not self.halted and not self.paused and not self.takeover and self._last_valid_t is not None
                and now - self._last_valid_t > self.cfg.watchdog_s):
            self.halted = True
            self.watchdog_latency_s = now - self._last_valid_t
            self.episode.event("watchdog", silence_s=self.watchdog_latency_s)
            await self._notify("halted", silence_s=self.watchdog_latency_s)

    async def _watchdog_loop(self) -> None:
        """Trip the watchdog on time even while a control tick is busy in the robot thread."""
        while True:
            last = self._last_valid_t
            wake = (last + self.cfg.watchdog_s + 1e-3) if last is not None and not self.halted else None
            await asyncio.sleep(max(wake - time.monotonic(), 0.0) if wake else self.cfg.watchdog_s / 4)
            await self._check_watchdog(time.monotonic())

    async def _tick(self, now: float) -> None:
        if self._estop_req_t is not None and not self.estopped:
            await self._run(self.adapter.estop)
            self.estopped, self.needs_reset = True, True
            self.estop_latency_s = time.monotonic() - self._estop_req_t
            await self._drop_cmd("estopped")
            self.episode.event("estop", latency_s=self.estop_latency_s)
            self._end_episode("estop", success=False)
            await self._notify("estopped", latency_s=self.estop_latency_s)
            return
        if self.estopped:
            return
        action, source, seq = None, None, None
        if self.paused:
            pass
        elif self.takeover:
            action = self.teleop.action(self.adapter.observe())
            source = "human"
        elif self._cmd is not None:
            action, seq, t_cmd = self._cmd
            self._cmd = None
            source = "policy"
            if now - t_cmd > self.cfg.watchdog_s:  # stale (the loop fell behind): never apply late
                action = None
                await self._send(self._policy_ws, "refused", reason="stale", seq=seq)
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
            # The watchdog measures client silence: a synchronous client cannot send before this reply.
            self._last_valid_t = time.monotonic()
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

    async def _notify(self, kind: str, **fields) -> None:
        await self._send(self._policy_ws, kind, **fields)

    async def _reject(self, ws, reason: str, code: int = CLOSE_AUTH) -> None:
        peer = str(ws.remote_address)
        log.warning("rejected bridge client %s: %s", peer, reason)
        self.rejections.append((peer, reason))
        await self._send(ws, "error", code=reason)
        await ws.close(code, reason)

    async def _handler(self, ws) -> None:
        try:
            frame = await asyncio.wait_for(ws.recv(), self.cfg.auth_timeout_s)
            hello = validate_client_message(decode(frame))
        except (TimeoutError, asyncio.TimeoutError):
            return await self._reject(ws, "auth_timeout")
        except ProtocolError as e:
            return await self._reject(ws, f"auth_{e.code}")
        except ConnectionClosed:
            return
        if hello["type"] != "hello" or not token_matches(self.token, hello.get("token")):
            return await self._reject(ws, "auth_failed")
        role = hello.get("role", "policy")
        if role not in ("policy", "operator"):
            return await self._reject(ws, "bad_role")
        if role == "policy" and self._policy_ws is not None:
            return await self._reject(ws, "busy", CLOSE_BUSY)
        if role == "policy":
            self._policy_ws = ws
        await self._send(ws, "welcome", role=role, action_dim=self.cfg.safety.action_dim,
                         control_hz=self.cfg.control_hz, watchdog_s=self.cfg.watchdog_s, **self._obs_fields())
        bad = 0
        try:
            async for frame in ws:
                seq = None
                try:
                    raw = decode(frame)
                    seq = raw.get("seq") if type(raw.get("seq")) is int else None  # so the client can match the error
                    msg = validate_client_message(raw)
                    bad = 0
                except ProtocolError as e:
                    self.bad_messages += 1
                    bad += 1
                    await self._send(ws, "error", code=e.code, detail=e.detail[:200], seq=seq)
                    if bad >= self.cfg.max_bad_messages:
                        return await self._reject(ws, "too_many_bad_messages", CLOSE_ABUSE)
                    continue
                if await self._dispatch(ws, role, msg) == "bye":
                    break
        except ConnectionClosed:
            pass
        finally:
            if role == "policy" and self._policy_ws is ws:
                await self._on_policy_gone()
                self._policy_ws = None  # only now: the episode is safely closed before a new policy may connect

    async def _on_policy_gone(self) -> None:
        """A dropped policy connection ends the episode safely and keeps what was recorded."""
        async with self._lock:
            self._cmd = None
            await self._run(self.adapter.hold)
            self.safety.reset()
            if self.episode.steps:
                self.episode.event("disconnect")
                self._end_episode("disconnect", success=False)

    async def _dispatch(self, ws, role: str, msg: dict) -> str | None:
        t, seq = msg["type"], msg.get("seq")
        if t in OPERATOR_TYPES and role != "operator":
            return await self._send(ws, "error", code="operator_only", seq=seq)
        if t == "act":
            if role != "policy":
                return await self._send(ws, "error", code="not_policy", seq=seq)
            why = ("estopped" if self.estopped or self._estop_req_t is not None else "needs_reset" if self.needs_reset
                   else "paused" if self.paused else "takeover" if self.takeover else None)
            if why:
                return await self._send(ws, "refused", reason=why, seq=seq)
            try:
                action = validate_action(msg["action"], self.cfg.safety.action_dim)
            except ProtocolError as e:
                return await self._send(ws, "error", code=e.code, detail=e.detail, seq=seq)
            await self._drop_cmd("superseded")  # a pipelining client sent a newer command before this tick
            self._cmd, self._last_valid_t = (action, seq, time.monotonic()), time.monotonic()
            if self.halted:
                self.halted = False
                self.episode.event("resume_after_watchdog")
        elif t == "estop":
            if self._estop_req_t is None:
                self._estop_req_t = time.monotonic()
            await self._send(ws, "ack", seq=seq)
        elif t == "reset":
            return await self._reset(ws, role, msg)
        elif t == "observe":
            await self._send_obs(ws, seq)
        elif t == "status":
            await self._send(ws, "status", seq=seq, **self.status())
        elif t == "bye":
            return "bye"
        else:
            await self._operator(ws, msg)
        return None

    async def _reset(self, ws, role: str, msg: dict):
        seq = msg.get("seq")
        if role == "policy" and not self.cfg.policy_can_reset:
            return await self._send(ws, "error", code="reset_not_allowed", seq=seq)
        if self.estopped:
            return await self._send(ws, "refused", reason="estopped", seq=seq)
        async with self._lock:
            await self._drop_cmd("reset")
            self._end_episode("reset")
            try:
                obs = await self._run(self.adapter.reset, msg.get("seed"), msg.get("init_state"))
            except Exception as e:  # noqa: BLE001  (e.g. a state vector of the wrong length)
                log.warning("reset failed: %r", e)
                await self._run(self.adapter.hold)
                self.needs_reset = True  # the robot may be mid-reset: no motion until a reset succeeds
                return await self._send(ws, "error", code="reset_failed", detail=str(e)[:200], seq=seq)
            init = msg.get("init_state")
            self._new_episode(obs, {"seed": msg.get("seed"), "init_state": init if isinstance(init, int) else None})
            self.safety.reset()
            self.needs_reset = self.halted = False
            self._last_valid_t = None  # the watchdog re-arms with the first command
        await self._send_obs(ws, seq)

    async def _operator(self, ws, msg: dict) -> None:
        t, seq = msg["type"], msg.get("seq")
        if t in ("pause", "resume"):
            self.paused = t == "pause"
            await self._drop_cmd("paused")
        elif t == "takeover":
            self.takeover = msg["on"]
            await self._drop_cmd("takeover")
        elif t == "teleop":
            self.remote_teleop.push(msg["action"])
        elif t == "mark":
            async with self._lock:
                self.episode.event("mark", success=msg["success"])
                self._end_episode("marked", success=msg["success"])
        elif t == "label":
            self.episode.event("label", text=msg.get("text", "")[:1000])
        elif t == "clear_estop":
            self.estopped, self._estop_req_t = False, None  # needs_reset stays: motion only after a reset
        if t in ("pause", "resume", "takeover"):
            self.episode.event(t, on=msg.get("on"))
        await self._send(ws, "ack", seq=seq)

    def status(self) -> dict:
        return {"estopped": self.estopped, "halted": self.halted, "paused": self.paused, "takeover": self.takeover,
                "needs_reset": self.needs_reset, "ticks": self.ticks, "episode_steps": len(self.episode.steps),
                "episodes": len(self.episodes), "estop_latency_s": self.estop_latency_s,
                "watchdog_latency_s": self.watchdog_latency_s, "policy_connected": self._policy_ws is not None}
