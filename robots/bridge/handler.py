"""The per-connection half of the bridge server: authentication, the message loop and each message's handling.

`ClientHandler` is mixed into `BridgeServer` (server.py), whose state (flags, episode, watchdog, adapter) it reads
and changes; the control loop and the episode bookkeeping stay in server.py.
"""

from __future__ import annotations

import asyncio
import logging
import time

from websockets.exceptions import ConnectionClosed

from robots.bridge.auth import token_matches
from robots.bridge.protocol import (HELLO_MAX_BYTES, HELLO_MAX_DEPTH, OPERATOR_TYPES, ProtocolError, decode,
                                    validate_action, validate_client_message)

log = logging.getLogger("robots.bridge.server")
CLOSE_AUTH = 4401  # application close codes (4000-4999)
CLOSE_BUSY = 4409
CLOSE_ABUSE = 4400


class ClientHandler:
    """Message handling of BridgeServer (a mixin: every attribute used here is the server's)."""

    async def _reject(self, ws, reason: str, code: int = CLOSE_AUTH, seq: int | None = None) -> None:
        """Log one line, answer `error` with `reason` as its code, close with `code`."""
        peer = str(ws.remote_address)
        log.warning("rejected bridge client %s: %s", peer, reason)
        self.rejections.append((peer, reason))
        await self._send(ws, "error", code=reason, **({} if seq is None else {"seq": seq}))
        await ws.close(code, reason)

    async def _authenticate(self, ws) -> str | None:
        """The role of a client whose first frame is `hello` with the token; None when it was rejected or left.

        Before authentication a frame is small and flat (HELLO_MAX_BYTES, HELLO_MAX_DEPTH), and whatever goes wrong
        with it is an auth failure with one log line: an unauthenticated peer never reaches a traceback."""
        try:
            frame = await asyncio.wait_for(ws.recv(), self.cfg.auth_timeout_s)
            hello = validate_client_message(decode(frame, max_bytes=HELLO_MAX_BYTES, max_depth=HELLO_MAX_DEPTH))
        except (TimeoutError, asyncio.TimeoutError):
            return await self._reject(ws, "auth_timeout")
        except ProtocolError as e:
            return await self._reject(ws, f"auth_{e.code}")
        except ConnectionClosed:
            return None
        except Exception as e:  # noqa: BLE001  (defence in depth: decode bugs must not be triggerable pre-auth)
            return await self._reject(ws, f"auth_bad_frame ({type(e).__name__})")
        if hello["type"] != "hello" or not token_matches(self.token, hello.get("token")):
            return await self._reject(ws, "auth_failed")
        role = hello.get("role", "policy")
        if role not in ("policy", "operator"):
            return await self._reject(ws, "bad_role")
        if role == "policy" and self._policy_ws is not None:
            return await self._reject(ws, "busy", CLOSE_BUSY)
        return role

    async def _handler(self, ws) -> None:
        role = await self._authenticate(ws)
        if role is None:
            return
        if role == "policy":
            self._policy_ws = ws
        await self._send(ws, "welcome", role=role, action_dim=self.cfg.safety.action_dim,
                         control_hz=self.cfg.control_hz, watchdog_s=self.cfg.watchdog_s,
                         command_deadline_s=self.cfg.command_deadline_s, **self._obs_fields())
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
            self.watchdog.disarm()  # no client, no silence to measure (and no 0-step watchdog episodes)
            self.halted = False
            await self._run(self.adapter.hold)
            self.safety.reset()
            if self.episode.steps:
                self.episode.event("disconnect")
                self._end_episode("disconnect", success=False)

    def _motion_refusal(self) -> str | None:
        """Why no motion-causing command (act, reset, teleop) may run now, or None."""
        return "shutdown" if self.stopping else "estopped" if self._estop_active() else None

    async def _dispatch(self, ws, role: str, msg: dict) -> str | None:
        t, seq = msg["type"], msg.get("seq")
        if t in OPERATOR_TYPES and role != "operator":
            return await self._send(ws, "error", code="operator_only", seq=seq)
        if t == "hello":  # authenticated already: a second hello is refused and the connection closed
            wrong = not token_matches(self.token, msg.get("token"))
            await self._reject(ws, "auth_failed" if wrong else "already_authenticated",
                               CLOSE_AUTH if wrong else CLOSE_ABUSE, seq=seq)
            return "bye"
        if t == "act":
            return await self._act(ws, role, msg)
        if t == "estop":
            if self._estop_req_t is None:
                self._estop_req_t = time.monotonic()
            self.needs_reset = True  # at once: even a clear_estop before the next tick leaves a reset to do
            await self._drop_cmd("estopped")
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

    async def _act(self, ws, role: str, msg: dict) -> None:
        seq = msg.get("seq")
        if role != "policy":
            return await self._send(ws, "error", code="not_policy", seq=seq)
        why = (self._motion_refusal() or ("needs_reset" if self.needs_reset else "paused" if self.paused
                                          else "takeover" if self.takeover else None))
        if why:
            return await self._send(ws, "refused", reason=why, seq=seq)
        try:
            action = validate_action(msg["action"], self.cfg.safety.action_dim)
        except ProtocolError as e:
            return await self._send(ws, "error", code=e.code, detail=e.detail, seq=seq)
        await self._drop_cmd("superseded")  # a pipelining client sent a newer command before this tick
        now = time.monotonic()
        self._cmd = (action, seq, now)
        self.watchdog.accepted(now)  # in flight: the executor's deadline counts, not client silence
        self._watchdog_changed()
        if self.halted:
            self.halted = False
            self.episode.event("resume_after_watchdog")

    async def _reset(self, ws, role: str, msg: dict):
        seq = msg.get("seq")
        if role == "policy" and not self.cfg.policy_can_reset:
            return await self._send(ws, "error", code="reset_not_allowed", seq=seq)
        if why := self._motion_refusal():
            return await self._send(ws, "refused", reason=why, seq=seq)
        async with self._lock:
            if why := self._motion_refusal():  # an e-stop acknowledged while this reset waited for the lock
                return await self._send(ws, "refused", reason=why, seq=seq)
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
            self.watchdog.disarm()  # re-arms with the reply to the first command
        await self._send_obs(ws, seq)

    async def _teleop(self, ws, msg: dict) -> None:
        """Validate and queue one operator action; refused unless a takeover is active and motion is allowed."""
        seq = msg.get("seq")
        why = self._motion_refusal() or ("needs_reset" if self.needs_reset else "paused" if self.paused else None)
        if why:
            return await self._send(ws, "refused", reason=why, seq=seq)
        if not self.takeover:  # never queued for a later takeover: a takeover starts from a hold
            return await self._send(ws, "error", code="not_in_takeover", seq=seq)
        try:
            action = validate_action(msg["action"], self.cfg.safety.action_dim)
        except ProtocolError as e:
            return await self._send(ws, "error", code=e.code, detail=e.detail, seq=seq)
        self.remote_teleop.push(action)
        await self._send(ws, "ack", seq=seq)

    async def _operator(self, ws, msg: dict) -> None:
        t, seq = msg["type"], msg.get("seq")
        if t == "teleop":
            return await self._teleop(ws, msg)
        if t in ("pause", "resume"):
            self.paused = t == "pause"
            self.remote_teleop.clear()
            await self._drop_cmd("paused")
        elif t == "takeover":
            self.takeover = msg["on"]
            self.remote_teleop.clear()  # starts (and ends) from a hold
            await self._drop_cmd("takeover")
        elif t == "mark":
            async with self._lock:
                self.episode.event("mark", success=msg["success"])
                self._end_episode("marked", success=msg["success"])
        elif t == "label":
            self.episode.event("label", text=msg.get("text", "")[:1000])
        elif t == "clear_estop":
            async with self._lock:
                if self._estop_req_t is not None and not self.estopped:
                    await self._apply_estop()  # a clear that beats the next tick never skips the e-stop itself
                self.estopped, self._estop_req_t = False, None  # needs_reset stays: motion only after a reset
        if t in ("pause", "resume", "takeover"):
            self.episode.event(t, on=msg.get("on"))
            if not self.paused and not self.takeover:  # the client could not command until now
                self.watchdog.restart(time.monotonic())
                self._watchdog_changed()
        await self._send(ws, "ack", seq=seq)
