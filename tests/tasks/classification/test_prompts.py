"""The candidate-list rule, its seeding, and the prompts of both modes."""

import math

import pytest

from tasks.classification import candidates
from tasks.classification.prompts import prompt_text, reference_answer_text

NAMES = [f"class{i}" for i in range(250)]


def test_fewer_than_30_classes_lists_all_in_order():
    names = NAMES[:29]
    assert candidates(names, "class7", seed=3) == names
    assert candidates(names, 7, seed=3) == names  # a label index works too


@pytest.mark.parametrize("n", [30, 31, 57, 100, 249, 250])
def test_sampled_list_size_membership_and_distinctness(n):
    names = NAMES[:n]
    k = min(100, math.floor(0.4 * n))
    for seed in range(40):
        label = names[(seed * 7) % n]
        cands = candidates(names, label, seed)
        assert len(cands) == k and len(set(cands)) == k
        assert label in cands and set(cands) <= set(names)


def test_same_sample_and_seed_same_list_other_seed_other_list():
    a = candidates(NAMES, "class3", seed=11)
    assert candidates(list(NAMES), "class3", seed=11) == a
    others = {tuple(candidates(NAMES, "class3", seed=s)) for s in range(12, 22)}
    assert tuple(a) not in others and len(others) == 10


def test_true_class_position_is_shuffled():
    # The true class replaces a sampled one when absent, then the list is shuffled: it must not sit in a fixed slot.
    positions = {candidates(NAMES[:40], "class0", seed=s).index("class0") for s in range(60)}
    assert len(positions) > 5


def test_true_class_is_not_over_sampled():
    # Sampled among all classes: in ~40% of draws it is already there; the others replace a random slot.
    # Any other class appears about 40% of the time (never forced).
    names = NAMES[:100]
    hits = sum("class1" in candidates(names, "class0", seed=s) for s in range(400))
    assert 0.3 < hits / 400 < 0.5


def test_bad_inputs():
    with pytest.raises(ValueError, match="not one of"):
        candidates(NAMES[:5], "dog", 0)
    with pytest.raises(ValueError, match="distinct"):
        candidates(["a", "a", "b"], "a", 0)


def test_prompts_match_the_released_wording():
    q = "What type of object is in the photo?"
    assert prompt_text(q, ["cat", "dog"], "cls_rl") == (
        "What type of object is in the photo?\nPlease choose one from list [ cat, dog ].\n"
        " Please output the thinking process in <think> </think> and final answer in <answer> </answer> tags.")
    assert prompt_text(q, ["cat", "dog"], "no_thinking") == (
        "What type of object is in the photo?\nPlease choose one from list [ cat, dog ].\n Please directly output the answer.")


def test_reference_answers_earn_full_reward():
    from rewards.classification import score

    for mode, want in (("cls_rl", {"accuracy": 1.0, "format": 1.0}), ("no_thinking", {"accuracy": 1.0})):
        s = score(reference_answer_text("striped teal hexagon", mode), "striped teal hexagon", mode,
                  ["striped teal hexagon", "solid teal hexagon"])
        assert {k: s[k] for k in want} == want and s["reason"] is None
