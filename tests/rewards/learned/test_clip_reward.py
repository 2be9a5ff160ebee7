"""Golden tests for the VLM-RM projection (values computed by hand in the comments) and the CLIP wrapper."""

import numpy as np
import pytest
import torch

from rewards.learned.base import Query
from rewards.learned.clip_reward import projected_reward

G2, B2 = np.array([1.0, 0.0]), np.array([0.0, 1.0])  # d = (1, -1), ||d||^2 = 2


def test_alpha0_is_cosine_similarity():
    # x = (0.6, 0.8): R = 1 - 0.5 ||x - g||^2 = x . g = 0.6
    assert projected_reward(np.array([[0.6, 0.8]]), G2, B2, 0.0) == pytest.approx([0.6])
    x = np.random.default_rng(0).normal(size=(5, 7))
    g, b = np.random.default_rng(1).normal(size=7), np.random.default_rng(2).normal(size=7)
    xn, gn = x / np.linalg.norm(x, axis=1, keepdims=True), g / np.linalg.norm(g)
    assert projected_reward(x, g, b, 0.0) == pytest.approx(xn @ gn)


def test_alpha1_projects_on_goal_minus_baseline_2d():
    # y = x - g = (-0.4, 0.8); y.d = -1.2; proj = -0.6 (1, -1) -> ||.||^2 = 0.72 -> R = 0.64
    assert projected_reward(np.array([[0.6, 0.8]]), G2, B2, 1.0) == pytest.approx([0.64])
    # goal scores 1, baseline scores 0 (y = -d -> ||d||^2 / 2 = 1)
    assert projected_reward(np.stack([G2, B2]), G2, B2, 1.0) == pytest.approx([1.0, 0.0])


def test_alpha_half_2d():
    # (x - g) P = 0.5 * (-0.6, 0.6) + 0.5 * (-0.4, 0.8) = (-0.5, 0.7) -> 0.74 -> R = 0.63
    assert projected_reward(np.array([[0.6, 0.8]]), G2, B2, 0.5) == pytest.approx([0.63])


def test_3d_orthogonal_direction_ignored_with_alpha1():
    g, b, x = np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), np.array([[0, 0, 1.0]])
    # alpha 0: x . g = 0. alpha 1: y = (-1, 0, 1), y.d = -1, proj = -0.5 (1, -1, 0), ||.||^2 = 0.5 -> 0.75
    assert projected_reward(x, g, b, 0.0) == pytest.approx([0.0])
    assert projected_reward(x, g, b, 1.0) == pytest.approx([0.75])
    # moving x along the ignored axis does not change the alpha = 1 reward
    x2 = np.array([[0.6, 0.0, 0.8]])  # y = (-0.4, 0, 0.8), y.d = -0.4 -> proj = -0.2 (1,-1,0) -> 0.08 -> 0.96
    assert projected_reward(x2, g, b, 1.0) == pytest.approx([0.96])


def test_image_embeddings_are_normalised_and_goal_scale_free():
    x = np.array([[3.0, 4.0]])  # normalises to (0.6, 0.8)
    assert projected_reward(x, 5 * G2, 0.1 * B2, 1.0) == pytest.approx([0.64])


def test_k_prompts_averaged_then_normalised():
    # rows normalised: (1,0,0), (0,0,1); mean (0.5, 0, 0.5); normalised (1, 0, 1)/sqrt2
    goals = np.array([[2.0, 0, 0], [0, 0, 3.0]])
    x = np.random.default_rng(0).normal(size=(4, 3))
    b = np.array([0.0, 1.0, 0.0])
    for alpha in (0.0, 0.5, 1.0):
        assert projected_reward(x, goals, b, alpha) == pytest.approx(projected_reward(x, np.array([1.0, 0, 1.0]), b, alpha))
        assert projected_reward(x, goals, b[None], alpha) == pytest.approx(projected_reward(x, goals, b, alpha))
    # x = the normalised mean goal scores exactly 1 for every alpha
    gm = np.array([[1.0, 0, 1.0]]) / np.sqrt(2)
    assert projected_reward(gm, goals, b, 0.5) == pytest.approx([1.0])


def test_torch_in_torch_out_and_bad_alpha():
    r = projected_reward(torch.tensor([[0.6, 0.8]]), torch.tensor(G2), torch.tensor(B2), 1.0)
    assert isinstance(r, torch.Tensor) and r.shape == (1,) and float(r[0]) == pytest.approx(0.64)
    with pytest.raises(ValueError):
        projected_reward(np.ones((1, 2)), G2, B2, 1.5)


@pytest.fixture(scope="module")
def tiny_clip():
    pytest.importorskip("open_clip")
    from rewards.learned.clip_reward import ClipReward

    return ClipReward("tiny-clip", pretrained=None, alpha=0.5, baseline_prompts=("a robot arm",), batch_size=4)


def test_clip_reward_batched_cached_and_consistent(tiny_clip):
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, (7, 40, 40, 3), dtype=np.uint8)
    r = tiny_clip([Query(frames, "lift the red cube"), Query(frames[:3], "open the door")])
    assert [len(x) for x in r] == [6, 2]
    # per frame: the formula on the wrapper's own embeddings
    x = tiny_clip.embed_images(frames[1:]).double()
    g = tiny_clip.embed_texts(["lift the red cube"]).double()
    b = tiny_clip.embed_texts(["a robot arm"]).double()
    assert r[0] == pytest.approx(projected_reward(x, g, b, 0.5).numpy(), abs=1e-6)
    hits = tiny_clip.cache.hits
    again = tiny_clip([Query(frames, "lift the red cube")])[0]
    assert np.allclose(again, r[0]) and tiny_clip.cache.hits == hits + 6
    # last_rewards = the newest step of each query
    assert tiny_clip.last_rewards([Query(frames, "lift the red cube")]) == pytest.approx([r[0][-1]])
