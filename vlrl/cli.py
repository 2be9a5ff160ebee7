"""What the three entry points (vlrl/train.py, vlrl/sft.py, vlrl/evaluate.py) share on the command line.

    python vlrl/ENTRY.py [key=value ...]     Hydra-style overrides
    python vlrl/ENTRY.py --cfg job ...       the resolved config, nothing run
    python vlrl/ENTRY.py --help ...          the usage and every field with its effective value and help
                                             (`--help-fields`, `-h` alike; with `task=NAME` the task's fields too)

A mistake in the invocation (a bad or unknown field, a model path that does not exist, a run folder in use)
ends with one line on stderr, `vlrl: error: ...`, and exit status 2, not a traceback.
"""

from __future__ import annotations

import logging
from dataclasses import fields, is_dataclass
from typing import Callable

from omegaconf import OmegaConf

from vlrl.config import Config, UsageError, compose, validate

HELP_FLAGS = ("--help-fields", "-h", "--help")


def parse_cli(argv: list[str]) -> tuple[list[str], str | None]:
    """Hydra-style overrides plus our flags -> (overrides, mode): mode None (run), "help" or "cfg:job"."""
    overrides, mode = [], None
    it = iter(argv)
    for arg in it:
        if arg == "--cfg":
            mode = "cfg:" + next(it, "job")
        elif arg.startswith("--cfg="):
            mode = "cfg:" + arg.split("=", 1)[1]
        elif arg in HELP_FLAGS:
            mode = "help"
        else:
            overrides.append(arg)
    return overrides, mode


def field_lines(obj, prefix: str = "") -> list[str]:
    """One line per leaf field of a config dataclass instance: `name = value  # help`."""
    lines = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            lines.extend(field_lines(value, f"{prefix}{f.name}."))
        else:
            lines.append(f"{prefix}{f.name} = {value!r}  # {f.metadata.get('help', '')}".rstrip(" #"))
    return lines


def help_text(doc: str, overrides: list[str]) -> str:
    """The entry point's usage, then every field with the value this command line would run with (the YAML
    defaults and the overrides applied) and the task's own fields."""
    try:
        cfg, _ = validate(compose(overrides))
        where = "effective values with the overrides given" if overrides else "effective defaults"
    except ValueError as e:  # still show the fields: the schema's defaults
        cfg, where = Config(), f"schema defaults; this command line does not compose: {one_line(e)}"
    lines = field_lines(cfg)
    task = [ln for ln in lines if ln.startswith("task.")]
    rest = [ln for ln in lines if not ln.startswith("task.")]
    out = [doc.strip(), "", f"Fields ({where}):", *rest]
    if task:
        out += ["", f"Task fields (task={getattr(cfg.task, 'name', '?')}; another task: add task=NAME):", *task]
    return "\n".join(out)


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def quiet_known_noise(deepspeed_used: bool = False) -> None:
    """Drop log lines a user can do nothing about: DeepSpeed's accelerator probe when DeepSpeed is not used (it
    is imported by transformers' save path), robosuite's advice to write a private macro file, and transformers'
    weight loading / saving bars when stderr is a log file."""

    class Drop(logging.Filter):
        def __init__(self, *needles: str):
            super().__init__()
            self.needles = needles

        def filter(self, record: logging.LogRecord) -> bool:
            msg = record.getMessage()
            return not any(n in msg for n in self.needles)

    import sys

    if not sys.stderr.isatty():  # transformers' per-file loading bars: one frame each in a log file
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    if not deepspeed_used:
        logging.getLogger("DeepSpeed").addFilter(Drop("Setting accelerator to CPU", "Setting ds_accelerator to"))
    logging.getLogger("robosuite_logs").addFilter(Drop("private macro file", "setup_macros.py"))


def main(doc: str, argv: list[str], run: Callable, print_cfg: Callable | None = None):
    """Parse, compose, validate and `run(cfg, task, overrides)`; `--help` and `--cfg job` handled here. Usage
    mistakes end as one line (`vlrl: error: ...`, exit 2)."""
    from vlrl.models import check_model_path
    from vlrl.parallel import zero3

    overrides, mode = parse_cli(argv)
    quiet_known_noise(deepspeed_used=zero3.requested())
    if mode == "help":
        print(help_text(doc, overrides))
        return None
    try:
        raw = compose(overrides)
        cfg, task = validate(raw)
        if mode is None:
            check_model_path(cfg.model.path)
    except ValueError as e:
        raise _exit(e) from None
    if mode is not None:
        print(OmegaConf.to_yaml(raw, resolve=True) if print_cfg is None else print_cfg(cfg))
        return None
    try:
        return run(cfg, task, overrides)
    except UsageError as e:
        raise _exit(e) from None


def _exit(error: BaseException) -> SystemExit:
    import sys

    print(f"vlrl: error: {one_line(error)}", file=sys.stderr, flush=True)
    return SystemExit(2)


def method_overrides(items: list[str], methods: list[str]) -> dict[str, list[str]]:
    """Experiment scripts' repeatable `--set METHOD:KEY=VALUE` -> {method: [KEY=VALUE, ...]}; ValueError names a
    malformed item or a method that is not being run."""
    sets: dict[str, list[str]] = {}
    for item in items:
        method, sep, override = item.partition(":")
        if not sep or method not in methods or "=" not in override:
            raise ValueError(f"--set {item!r}: want METHOD:KEY=VALUE with METHOD one of {methods}")
        sets.setdefault(method, []).append(override)
    return sets
