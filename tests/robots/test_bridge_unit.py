"""Bridge pieces without a simulator: protocol decoding/validation, safety filter, tokens, teleop."""

import msgpack
import numpy as np
import pytest

from robots.bridge.auth import load_token, token_matches
from robots.bridge.hitl import KeyboardTeleop, ScriptedTeleop
from robots.bridge.protocol import ProtocolError, decode, encode, validate_action, validate_client_message
from robots.bridge.safety import SafetyConfig, SafetyFilter


def test_roundtrip_binary_arrays():
    img = np.random.default_rng(0).integers(0, 255, (4, 5, 3), dtype=np.uint8)
    frame = encode("obs", images={"cam": img}, proprio=np.arange(3, dtype=np.float32))
    assert isinstance(frame, bytes) and img.tobytes() in frame  # raw bytes, not base64
    msg = decode(frame)
    assert msg["v"] == 1 and np.array_equal(msg["images"]["cam"], img)


@pytest.mark.parametrize("frame", [
    "text frame", b"\xc1", b"", msgpack.packb([1, 2]), msgpack.packb({"v": 99, "type": "act"}),
    msgpack.packb({"v": 1}), msgpack.packb({"v": 1, "type": "act", "action": {"__nd__": 1, "dtype": "float32",
                                                                               "shape": [7], "data": b"\0" * 3}}),
])
def test_malformed_frames_raise_protocol_error(frame):
    with pytest.raises(ProtocolError):
        validate_client_message(decode(frame))


def test_action_validation():
    assert validate_action([0, 1, 2, 3, 4, 5, 6.5], 7).dtype == np.float64
    for bad in ([np.nan] * 7, [np.inf] + [0] * 6, [0] * 6, [True] * 7, "abc", np.zeros((7, 1)), np.zeros(7, np.int64)):
        with pytest.raises(ProtocolError):
            validate_action(bad if not isinstance(bad, list) else list(bad), 7)


def test_safety_clamps_limits_rate_and_workspace():
    f = SafetyFilter(SafetyConfig(max_action_change=0.5))
    a, fired = f(np.array([5, -5, 0, 3, 0, 0, 9.0]), proprio=np.array([0, 0, 1.0]))
    assert "translation_limit" in fired and "rotation_limit" in fired and "gripper_limit" in fired
    assert np.allclose(a, [0.5, -0.5, 0, 0.5, 0, 0, 1])  # first tick: rate-limited from rest
    a, _ = f(np.array([1, -1, 0, 1, 0, 0, 1.0]), proprio=np.array([0, 0, 1.0]))
    assert np.allclose(a[:3], [1, -1, 0])
    # Near the workspace edge the translation shrinks so the predicted position stays in the box.
    f.reset()
    a, fired = f(np.array([0, 0, -0.5, 0, 0, 0, -1.0]), proprio=np.array([0, 0, 0.81]))
    assert "workspace" in fired and 0.81 + a[2] * 0.05 >= 0.8 - 1e-9
    # Outside the box: moving further out is blocked, moving back in is allowed.
    f.reset()
    a, _ = f(np.array([0.5, 0, 0, 0, 0, 0, -1.0]), proprio=np.array([0.5, 0, 1.0]))
    assert a[0] == 0
    f.reset()
    a, _ = f(np.array([-0.5, 0, 0, 0, 0, 0, -1.0]), proprio=np.array([0.5, 0, 1.0]))
    assert a[0] == -0.5
    with pytest.raises(ValueError):
        f(np.array([np.nan] * 7))


def test_safety_joint_mode():
    cfg = SafetyConfig(action_mode="joint", joint_low=(-1, -1), joint_high=(1, 1), max_joint_step=0.1)
    a, fired = SafetyFilter(cfg)(np.array([3.0, -0.5, 2.0]), proprio=np.array([0.95, 0.0]))
    assert np.allclose(a, [1.0, -0.1, 1.0]) and {"joint_limit", "joint_step", "gripper_limit"} <= set(fired)


def test_token_loading_and_compare(tmp_path, monkeypatch):
    p = tmp_path / "tok"
    p.write_text("x" * 32 + "\n")
    p.chmod(0o600)
    assert load_token(str(p)) == "x" * 32
    monkeypatch.setenv("VLRL_BRIDGE_TOKEN", "short")
    with pytest.raises(ValueError):
        load_token()
    assert token_matches("a" * 20, "a" * 20) and not token_matches("a" * 20, "b" * 20)
    assert not token_matches("a" * 20, None) and not token_matches("a" * 20, b"a" * 20)


def test_teleop_adapters():
    k = KeyboardTeleop(speed=0.5)
    assert k.action({}) is None
    k.press("w"), k.press(" ")
    assert np.allclose(k.action({}), [0.5, 0, 0, 0, 0, 0, 1])
    s = ScriptedTeleop([np.ones(7)])
    assert s.action({}) is not None and s.action({}) is None


def test_watchdog_counts_silence_from_the_reply_and_the_deadline_from_acceptance():
    from robots.bridge.watchdog import Watchdog

    w = Watchdog(silence_s=0.2, deadline_s=1.0)
    assert w.check(100.0) is None and w.due() is None  # disarmed until a command is answered
    w.accepted(0.0)
    assert w.check(0.9) is None and w.due() == 1.0  # executing for 0.9 s is not client silence
    assert w.check(1.5) == ("deadline", 1.5)
    w.replied(1.5)
    assert w.check(1.6) is None and w.check(1.8)[0] == "watchdog"
    w.restart(5.0)
    assert w.check(5.1) is None
    w.disarm()
    assert w.check(100.0) is None


def test_decode_bounds_nesting_and_size_without_recursion():
    from robots.bridge.protocol import check_size

    head = msgpack.packb({"v": 1, "type": "act"})
    # 600 nested lists (msgpack itself refuses ~1000): decoded, then refused before any recursive walk
    deep = b"\x83" + b"".join(msgpack.packb(x) for x in ("v", 1, "type", "act", "action")) + b"\x91" * 600 + b"\xc0"
    with pytest.raises(ProtocolError, match="too_deep"):
        decode(deep)
    with pytest.raises(ProtocolError, match="too_deep"):
        decode(encode("hello", token=[[["x"]]]), max_depth=2)
    with pytest.raises(ProtocolError, match="bad_frame"):
        decode(encode("hello", token="x" * 5000), max_bytes=4096)
    with pytest.raises(ProtocolError, match="too_large"):
        check_size([0] * 100, max_nodes=50)
    assert decode(head)["type"] == "act"


def test_bridge_config_refuses_bad_values_by_name():
    from robots.bridge.config import BridgeConfig

    for field_name, value in (("watchdog_s", 0.0), ("keep_episodes", -1)):
        with pytest.raises(ValueError, match=field_name):
            BridgeConfig(**{field_name: value})
    assert BridgeConfig(keep_episodes=0).keep_episodes == 0  # keep none in memory: allowed
