"""Bridge wire format: versioned msgpack maps in binary websocket frames, arrays as raw bytes.

Every message is a map with "v" (protocol version) and "type". Arrays travel as
{"__nd__": 1, "dtype": str, "shape": [..], "data": bytes} so camera frames are binary, never base64/JSON.
decode() and the validators never trust the peer: sizes are bounded and every field is type-checked.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np

VERSION = 1
# Decoder limits: a fuzzed or hostile frame cannot make the server allocate much.
MAX_FRAME_BYTES = 1 << 20
_UNPACK_LIMITS = dict(max_bin_len=MAX_FRAME_BYTES, max_str_len=1 << 16, max_array_len=1 << 12, max_map_len=64, max_ext_len=0)
# Nesting and element count of a decoded message: msgpack decodes deep nesting happily, and the recursive array
# conversion below would then raise RecursionError (600 nested lists fit in 620 bytes). Every message of the
# protocol nests at most 4 deep (obs -> images -> camera -> encoded array).
MAX_DEPTH = 16
MAX_NODES = 1 << 16
# Before authentication only `hello` is accepted (a flat map of a few short strings); any well-formed client
# message fits these bounds, so one sent before `hello` is reported as what it is, an auth failure.
HELLO_MAX_BYTES, HELLO_MAX_DEPTH = 4096, 4
ARRAY_DTYPES = {"uint8", "float32", "float64", "int32", "int64"}
CLIENT_TYPES = {
    "hello", "act", "reset", "observe", "estop", "status", "bye",
    # operator-only
    "pause", "resume", "takeover", "teleop", "mark", "label", "clear_estop",
}
OPERATOR_TYPES = {"pause", "resume", "takeover", "teleop", "mark", "label", "clear_estop"}


class ProtocolError(ValueError):
    """A message that is malformed, of the wrong version, or fails validation; `code` is sent back."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code, self.detail = code, detail


def pack_array(a: np.ndarray) -> dict:
    a = np.ascontiguousarray(a)
    return {"__nd__": 1, "dtype": a.dtype.name, "shape": list(a.shape), "data": a.tobytes()}


def unpack_array(d: Any) -> np.ndarray:
    """Rebuild an array, checking dtype, shape and byte count against each other."""
    if not isinstance(d, dict) or d.get("__nd__") != 1:
        raise ProtocolError("bad_array", "not an encoded array")
    dtype, shape, data = d.get("dtype"), d.get("shape"), d.get("data")
    if dtype not in ARRAY_DTYPES or not isinstance(data, bytes) or not isinstance(shape, list):
        raise ProtocolError("bad_array", "dtype/shape/data missing or of the wrong type")
    if len(shape) > 4 or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s <= 1 << 16 for s in shape):
        raise ProtocolError("bad_array", "bad shape")
    if math.prod(shape) * np.dtype(dtype).itemsize != len(data):
        raise ProtocolError("bad_array", "byte count does not match shape")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def _encode_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return pack_array(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")


def encode(msg_type: str, **fields: Any) -> bytes:
    """One message as bytes (numpy arrays are packed as binary)."""
    return msgpack.packb({"v": VERSION, "type": msg_type, **fields}, default=_encode_default, use_bin_type=True)


def _to_arrays(obj: Any) -> Any:
    if isinstance(obj, dict):
        if obj.get("__nd__") == 1:
            return unpack_array(obj)
        return {k: _to_arrays(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_arrays(v) for v in obj]
    return obj


def check_size(obj: Any, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Raise ProtocolError when `obj` (decoded msgpack) nests deeper than `max_depth` maps/lists or holds more
    than `max_nodes` values in all. Iterative, so no input can exhaust the interpreter's stack."""
    stack, nodes = [(obj, 0)], 0
    while stack:
        o, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            raise ProtocolError("too_large", f"more than {max_nodes} values")
        if isinstance(o, (dict, list)):
            if depth >= max_depth:
                raise ProtocolError("too_deep", f"nested deeper than {max_depth}")
            stack.extend((v, depth + 1) for v in (o.values() if isinstance(o, dict) else o))


def decode(frame: Any, *, arrays: bool = True, max_bytes: int = MAX_FRAME_BYTES, max_depth: int = MAX_DEPTH) -> dict:
    """Parse one frame into a message dict; raises ProtocolError on anything malformed, too large or too deep."""
    if not isinstance(frame, (bytes, bytearray)):
        raise ProtocolError("bad_frame", "text frames are not accepted; send binary msgpack")
    if len(frame) > max_bytes:
        raise ProtocolError("bad_frame", "frame too large")
    try:
        msg = msgpack.unpackb(bytes(frame), raw=False, strict_map_key=True, **_UNPACK_LIMITS)
    except Exception as e:  # noqa: BLE001  (msgpack raises many types on garbage)
        raise ProtocolError("bad_msgpack", type(e).__name__) from None
    check_size(msg, max_depth)
    if not isinstance(msg, dict):
        raise ProtocolError("bad_message", "message must be a map")
    if msg.get("v") != VERSION:
        raise ProtocolError("bad_version", f"server speaks version {VERSION}")
    if not isinstance(msg.get("type"), str):
        raise ProtocolError("bad_message", "missing type")
    return _to_arrays(msg) if arrays else msg


def validate_client_message(msg: dict) -> dict:
    """Check a decoded client message's type and fields; return it (actions as float64 arrays)."""
    t = msg["type"]
    if t not in CLIENT_TYPES:
        raise ProtocolError("unknown_type", t[:40])
    if t in ("act", "teleop"):
        msg["action"] = validate_action(msg.get("action"))
    if "seq" in msg and (not isinstance(msg["seq"], int) or isinstance(msg["seq"], bool)):
        raise ProtocolError("bad_field", "seq must be an integer")
    if t == "mark" and not isinstance(msg.get("success"), bool):
        raise ProtocolError("bad_field", "mark needs success: bool")
    if t == "takeover" and not isinstance(msg.get("on"), bool):
        raise ProtocolError("bad_field", "takeover needs on: bool")
    if t in ("label", "hello") and not all(isinstance(msg.get(k, ""), str) for k in ("text", "token", "role")):
        raise ProtocolError("bad_field", "text/token/role must be strings")
    if t == "reset":
        if "seed" in msg and msg["seed"] is not None and (not isinstance(msg["seed"], int) or isinstance(msg["seed"], bool)):
            raise ProtocolError("bad_field", "seed must be an integer")
        st = msg.get("init_state")
        if st is not None and not isinstance(st, int) and not (isinstance(st, np.ndarray) and st.ndim == 1):
            raise ProtocolError("bad_field", "init_state must be an index or a 1-D state array")
        if isinstance(st, np.ndarray) and not np.all(np.isfinite(st)):
            raise ProtocolError("bad_field", "init_state is not finite")
    return msg


def validate_action(a: Any, dim: int | None = None) -> np.ndarray:
    """An action is a flat float array (or list of numbers), finite, of the expected length."""
    if isinstance(a, list):
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in a):
            raise ProtocolError("bad_action", "action list must hold numbers")
        a = np.asarray(a, dtype=np.float64)
    if not isinstance(a, np.ndarray) or a.dtype.kind != "f" or a.ndim != 1:
        raise ProtocolError("bad_action", "action must be a 1-D float array")
    if dim is not None and a.shape[0] != dim:
        raise ProtocolError("bad_action", f"action must have {dim} values, got {a.shape[0]}")
    if not np.all(np.isfinite(a)):
        raise ProtocolError("bad_action", "action has NaN or inf")
    return a.astype(np.float64)
