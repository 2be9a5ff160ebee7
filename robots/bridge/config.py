"""Bridge server settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from robots.bridge.auth import TOKEN_ENV
from robots.bridge.safety import SafetyConfig


@dataclass
class BridgeConfig:
    """Bridge server settings."""

    host: str = "127.0.0.1"
    """Bind address; loopback by default. Other addresses need TLS or allow_insecure_remote."""
    port: int = 8765
    """TCP port (0 = any free port)."""
    token_file: str | None = None
    """File holding the shared token; None = read the environment variable token_env."""
    token_env: str = TOKEN_ENV
    """Environment variable with the shared token."""
    tls_cert: str | None = None
    """PEM certificate: serve wss:// instead of ws://."""
    tls_key: str | None = None
    """PEM private key for tls_cert."""
    allow_insecure_remote: bool = False
    """Permit a non-loopback bind without TLS (the token would cross the network in clear)."""
    control_hz: float = 20.0
    """Control loop rate."""
    watchdog_s: float = 0.2
    """Halt when the policy client sends no valid command for this long after the reply to its last one."""
    command_deadline_s: float = 1.0
    """The robot side's own limit: a command not answered this long after acceptance halts the robot (one not yet
    started is refused as stale, never applied late). Separate from watchdog_s: executing a command is not client
    silence. Raise it for a slow simulator (cameras on a loaded CPU)."""
    auth_timeout_s: float = 2.0
    """Time a new connection has to authenticate."""
    max_bad_messages: int = 1000
    """Consecutive invalid messages before a client is disconnected."""
    record_path: str | None = None
    """HDF5 file the finished episodes are appended to (None = keep them in memory only)."""
    keep_episodes: int = 100
    """Finished episodes kept in memory (server.episodes)."""
    policy_can_reset: bool = True
    """Whether the policy client may reset (True for simulators; real scenes are reset by people)."""
    send_images: bool = True
    """Include camera frames in observations sent to clients."""
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    """Limits enforced on every command."""

    def __post_init__(self) -> None:
        for name in ("control_hz", "watchdog_s", "command_deadline_s", "auth_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"invalid config value for '{name}': must be > 0")
        if self.keep_episodes < 0:
            raise ValueError("invalid config value for 'keep_episodes': must be >= 0")
