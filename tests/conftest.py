"""Shared test setup: small thread counts (2-core machines), GPU marker handling."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402,F401  (before any MuJoCo EGL context: importing it after one segfaults here)

torch.set_num_threads(1)

# One offscreen GL backend for the whole session, chosen before any test imports MuJoCo: MuJoCo fixes its
# context class at first use, so a test that renders without robots.gl (vision_zero's CLEVR pairs) must
# find the same backend as the robot tests. Machines without a GL library fail in the sim tests, named.
try:
    from robots.gl import configure_gl

    configure_gl()
except RuntimeError:
    pass

TINY_MODEL = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "tiny-qwen2.5-vl")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny_model_path():
    return TINY_MODEL
