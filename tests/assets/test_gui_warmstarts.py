"""The shipped GUI warm starts behave as their WARMSTART.json says, on held-out screens (greedy, so exact).

tiny-gui-locate was trained on single-widget screens only: it finds a widget but does not pick the named
one among several (the skill the GRPO demonstration teaches). tiny-gui-grounding saw 1-3 widgets.
Thresholds sit well inside the measured values (WARMSTART.json, 1,000 screens) to allow for numerics
across torch builds, and far from each other so that swapped or broken weights fail.
"""

import os

import pytest

from vlrl.config import compose, validate
from vlrl.evaluate import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _accuracy(asset: str, n_widgets: tuple[int, int], n: int = 200) -> float:
    cfg, task = validate(compose([
        "task=gui_grounding", f"model.path={os.path.join(ROOT, 'assets', asset)}",
        f"task.n_widgets=[{n_widgets[0]},{n_widgets[1]}]", f"eval.num_examples={n}", f"task.eval_examples={n}",
        "rollout.max_new_tokens=24"]))
    report, _ = evaluate(cfg, task, progress=False)
    assert report["count"] == n
    return report["overall"]


@pytest.mark.parametrize("asset,n_widgets,low,high", [
    ("tiny-gui-locate", (1, 1), 0.85, 1.0),   # measured 93% (200 screens at the end of training)
    ("tiny-gui-locate", (2, 3), 0.0, 0.40),   # measured 24% on the 2-3 widget part of the 1,000 screens
    ("tiny-gui-grounding", (2, 3), 0.55, 1.0),  # measured 67% on the same part
])
def test_shipped_gui_weights_on_held_out_screens(asset, n_widgets, low, high):
    acc = _accuracy(asset, n_widgets)
    assert low <= acc <= high, f"{asset} on {n_widgets} widgets: {acc:.3f} outside [{low}, {high}]"
