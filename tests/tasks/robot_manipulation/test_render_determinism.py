"""The first frames an episode sees are the same in every fresh process (see _SACRIFICED in robots/env.py)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SNIPPET = """
import hashlib, sys
import numpy as np
import robots.env as E
from tasks.robot_manipulation import Config, make_env
if sys.argv[1] == "off":
    E._SACRIFICED.append(None)  # what the process did before the workaround
cfg = Config(camera="robot0_eye_in_hand", image_size=64, expert_labels=False)
envs = [make_env(cfg, "eval") for _ in range(2)]
obs = [e.reset(i) for i, e in enumerate(envs)]
print("HASH", [hashlib.md5(np.asarray(o.images[0]).tobytes()).hexdigest() for o in obs])
"""


def _hashes(mode: str) -> str:
    proc = subprocess.run([sys.executable, "-c", SNIPPET, mode], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [ln for ln in proc.stdout.splitlines() if ln.startswith("HASH")][0]


@pytest.mark.slow
@pytest.mark.sim
def test_first_frames_are_identical_across_processes():
    assert _hashes("on") == _hashes("on")
