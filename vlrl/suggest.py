"""One-line messages for config mistakes Hydra / OmegaConf report at length: an unknown field gets the closest
valid one (`unknown config field 'trainer.stepz' (did you mean trainer.steps?)`), a missing group option the
list of options. Used by vlrl.config.compose / validate."""

from __future__ import annotations

import difflib
import re

from omegaconf import DictConfig, OmegaConf


def unknown_field(key: str, raw: DictConfig | None) -> str:
    """`key` (dotted) is not a field; `raw`: a composed config to take the valid names at its level from."""
    parent, _, leaf = key.rpartition(".")
    node = raw if not parent else (OmegaConf.select(raw, parent) if raw is not None else None)
    names = [str(k) for k in node.keys()] if isinstance(node, DictConfig) else []
    close = difflib.get_close_matches(leaf, names, n=1, cutoff=0.6)
    where = f"{parent}." if parent else ""
    if close:
        return f"unknown config field '{key}' (did you mean {where}{close[0]}?)"
    if raw is not None:  # maybe the right name in another section (`stepz=5` for trainer.steps)
        dotted = {f"{s}.{k}": str(k) for s, sub in raw.items() if isinstance(sub, DictConfig) for k in sub.keys()}
        close = difflib.get_close_matches(leaf, list(dotted.values()), n=1, cutoff=0.75)
        if close:
            return f"unknown config field '{key}' (did you mean {next(d for d, k in dotted.items() if k == close[0])}?)"
    if names:
        return f"unknown config field '{key}' (the fields of {parent or 'the config'}: {', '.join(sorted(names))})"
    return f"unknown config field '{key}'"


def _key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def composition_error(error: Exception, overrides: list[str], recompose) -> str:
    """The one-line message of a Hydra composition failure. `recompose(overrides)`: composes again (to list the
    valid fields once the offending override is left out)."""
    cause = error.__cause__
    key = getattr(cause, "full_key", None)
    text = str(error)
    if key and ("not in" in str(cause) or "not in struct" in text):
        rest = [o for o in overrides if _key_of(o) != key and not _key_of(o).startswith(key + ".")]
        try:
            raw = recompose(rest)
        except Exception:  # noqa: BLE001 - another problem: suggest from nothing
            raw = None
        return unknown_field(key, raw)
    missing = re.search(r"Could not find '([^']+)/([^']+)'", text)
    if missing:
        group, name = missing.groups()
        options = re.findall(r"^\t(\S+)$", text.split("Config search path")[0], flags=re.M)
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        hint = f"did you mean {group}={close[0]}? " if close else ""
        return f"no {group} config named {name!r} ({hint}available: {', '.join(options)})"
    if key and getattr(cause, "msg", None):  # a value of the wrong type
        return " ".join(f"invalid config value for '{key}': {cause.msg.split('full_key:')[0]}".split())
    detail = f": {cause}" if cause else ""
    return " ".join(f"invalid config: {text}{detail}".split())
