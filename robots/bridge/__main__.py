"""Serve a simulator behind the bridge (a dry run of the real-robot setup).

    VLRL_BRIDGE_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(32))') \
        python -m robots.bridge --task Lift --port 8765 [--libero-suite libero_object --task-id 1] [--record eps.h5]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import signal

from robots.bridge.adapters import SimAdapter
from robots.bridge.server import BridgeConfig, BridgeServer
from robots.env import RobosuiteConfig, make_env


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description="robot bridge server with a simulator behind it")
    p.add_argument("--task", default="Lift")
    p.add_argument("--libero-suite", default=None)
    p.add_argument("--task-id", type=int, default=0)
    p.add_argument("--image-size", type=int, default=128)
    p.add_argument("--max-steps", type=int, default=10_000, help="env steps before the episode times out")
    p.add_argument("--reward-shaping", action="store_true", help="robosuite's dense shaped reward")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--token-file", default=None)
    p.add_argument("--tls-cert", default=None)
    p.add_argument("--tls-key", default=None)
    p.add_argument("--record", default=None, help="HDF5 file for finished episodes")
    p.add_argument("--watchdog-s", type=float, default=BridgeConfig.watchdog_s,
                   help="halt after this much policy-client silence (counted from the reply to its last command)")
    p.add_argument("--command-deadline-s", type=float, default=BridgeConfig.command_deadline_s,
                   help="halt when the simulator has not answered a command this long after accepting it")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if a.libero_suite:
        from robots.libero_env import LiberoConfig  # noqa: PLC0415

        env_cfg = LiberoConfig(suite=a.libero_suite, task_id=a.task_id, image_size=a.image_size)
    else:
        env_cfg = RobosuiteConfig(task=a.task, image_size=a.image_size, max_steps=a.max_steps,
                                  reward_shaping=a.reward_shaping)
    cfg = BridgeConfig(host=a.host, port=a.port, token_file=a.token_file, tls_cert=a.tls_cert, tls_key=a.tls_key,
                       record_path=a.record, watchdog_s=a.watchdog_s, command_deadline_s=a.command_deadline_s)
    server = BridgeServer(SimAdapter(functools.partial(make_env, env_cfg)), cfg)
    asyncio.run(serve_until_signal(server))


async def serve_until_signal(server: BridgeServer) -> None:
    """Serve until SIGINT or SIGTERM (what process managers and containers send), then stop cleanly: the robot
    holds and the episode in progress is kept (reason `shutdown`, written to the record file)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda s=sig: (logging.getLogger(__name__).info("%s: shutting down", s.name),
                                                    stop.set()))
    await server.start()  # a signal during the start (building the simulator) stops right after it
    try:
        await stop.wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    main()
