"""Bridge client for the trainer (policy role) or an operator console (operator role); synchronous."""

from __future__ import annotations

import itertools
import time

import numpy as np
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from robots.bridge.auth import client_ssl_context
from robots.bridge.protocol import decode, encode


class BridgeError(RuntimeError):
    """The server refused a request or the connection failed."""


class AuthError(BridgeError):
    """The server refused the connection: bad credentials, or `code` "busy" (another policy client is connected)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class BridgeClient:
    """Connect, authenticate with the shared token, then send requests and wait for their replies.

    Messages the server sends on its own (halted, estopped, human_step) are kept in `notices`, in order.
    """

    def __init__(self, uri: str, token: str, role: str = "policy", cafile: str | None = None,
                 timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self.notices: list[dict] = []
        self._seq = itertools.count(1)
        self.ws = connect(uri, ssl=client_ssl_context(cafile), max_size=64 << 20, open_timeout=timeout_s)
        self.ws.send(encode("hello", token=token, role=role))
        reply = self._recv()
        if reply["type"] != "welcome":
            self.ws.close()
            raise AuthError(f"server refused the connection: {reply.get('code')}", reply.get("code"))
        self.welcome = reply

    def _recv(self, timeout: float | None = None) -> dict:
        try:
            return decode(self.ws.recv(timeout=timeout or self.timeout_s))
        except ConnectionClosed as e:
            raise BridgeError(f"connection closed: {e}") from e
        except TimeoutError as e:
            raise BridgeError("timed out waiting for the server") from e

    def request(self, msg_type: str, **fields) -> dict:
        """Send one message and return the server's reply to it (matched by seq)."""
        seq = next(self._seq)
        try:
            self.ws.send(encode(msg_type, seq=seq, **fields))
        except ConnectionClosed as e:
            raise BridgeError(f"connection closed: {e}") from e
        deadline = time.monotonic() + self.timeout_s
        while True:
            msg = self._recv(max(deadline - time.monotonic(), 0.01))
            if msg.get("seq") == seq:
                return msg
            self.notices.append(msg)

    def pop_notices(self) -> list[dict]:
        """The notices received so far (oldest first), removing them."""
        out, self.notices = self.notices, []
        return out

    def send_raw(self, frame: bytes | str) -> None:
        """Send an arbitrary frame (tests use it to fuzz the server)."""
        self.ws.send(frame)

    # ---- policy -------------------------------------------------------------------------------
    def act(self, action) -> dict:
        """Apply one action; returns the observation after it (type "obs"), or a refusal / error."""
        return self.request("act", action=np.asarray(action, dtype=np.float32))

    def reset(self, seed: int | None = None, init_state=None) -> dict:
        fields = {"seed": seed}
        if init_state is not None:
            fields["init_state"] = init_state if isinstance(init_state, int) else np.asarray(init_state, np.float64)
        return self.request("reset", **fields)

    def observe(self) -> dict:
        return self.request("observe")

    def estop(self) -> dict:
        return self.request("estop")

    def status(self) -> dict:
        return self.request("status")

    # ---- operator -----------------------------------------------------------------------------
    def pause(self, on: bool = True) -> dict:
        return self.request("pause" if on else "resume")

    def takeover(self, on: bool) -> dict:
        return self.request("takeover", on=on)

    def teleop(self, action) -> dict:
        return self.request("teleop", action=np.asarray(action, dtype=np.float64))

    def mark(self, success: bool) -> dict:
        return self.request("mark", success=success)

    def label(self, text: str) -> dict:
        return self.request("label", text=text)

    def clear_estop(self) -> dict:
        return self.request("clear_estop")

    def close(self) -> None:
        try:
            self.ws.send(encode("bye"))
        except Exception:  # noqa: BLE001
            pass
        self.ws.close()

    def __enter__(self) -> "BridgeClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
