"""Shared-token authentication and optional TLS for the robot bridge."""

from __future__ import annotations

import hmac
import os
import ssl
from pathlib import Path

TOKEN_ENV = "VLRL_BRIDGE_TOKEN"
MIN_TOKEN_CHARS = 16


def load_token(token_file: str | None = None, env_var: str = TOKEN_ENV) -> str:
    """The shared secret: from `token_file` if given, else the environment variable. Refuses short tokens."""
    if token_file:
        path = Path(token_file).expanduser()
        if path.stat().st_mode & 0o077:
            # Readable by others: still usable, but say so (a robot's token should be private).
            import logging  # noqa: PLC0415

            logging.getLogger(__name__).warning("token file %s is readable by group/others; chmod 600 it", path)
        token = path.read_text().strip()
    else:
        token = os.environ.get(env_var, "").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"bridge token missing or shorter than {MIN_TOKEN_CHARS} characters: set {env_var} or a token file "
            "(e.g. python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return token


def token_matches(expected: str, given: object) -> bool:
    """Constant-time comparison; anything but a string never matches."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def server_ssl_context(certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    """TLS for the server when a certificate is configured, else None (plain ws on loopback)."""
    if not certfile:
        return None
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    return ctx


def client_ssl_context(cafile: str | None) -> ssl.SSLContext | None:
    """TLS for the client, trusting `cafile` (e.g. the robot's self-signed certificate)."""
    if not cafile:
        return None
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
