"""Run a BridgeServer in a background thread with its own event loop (tests, notebooks, scripts)."""

from __future__ import annotations

import asyncio
import threading


class ServerThread:
    """server = BridgeServer(...); port = ServerThread(server).start(); ...; stop()."""

    def __init__(self, server) -> None:
        self.server = server
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="bridge-server", daemon=True)

    def _main(self) -> None:
        async def run() -> None:
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            try:
                await self.server.start()
            except BaseException as e:  # noqa: BLE001  (reported to start())
                self._error = e
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await self.server.stop()

        asyncio.run(run())

    def start(self, timeout_s: float = 120.0) -> int:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError("bridge server did not start")
        if self._error is not None:
            raise self._error
        return self.server.port

    def uri(self) -> str:
        scheme = "wss" if self.server.cfg.tls_cert else "ws"
        return f"{scheme}://127.0.0.1:{self.server.port}"

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)
