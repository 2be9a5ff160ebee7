"""The procedural fine-grained set: compositional classes, a base-to-new split over seen attributes,
deterministic images with nuisance variation, train and test drawn from disjoint seeds."""

import math
import random

import numpy as np

from tasks.classification.data import base_classes
from tasks.classification.shapes import COLOURS, PATTERNS, SHAPES, _pattern, class_attributes, classnames, read_shapes, render


def test_compositional_classes():
    names = classnames()
    assert len(names) >= 24 and len(set(names)) == len(names)
    assert "striped teal hexagon" in names
    assert {tuple(n.split()) for n in names} == set(class_attributes())
    assert len(names) == len(PATTERNS) * len(COLOURS) * len(SHAPES)


def test_new_classes_are_unseen_combinations_of_seen_attributes():
    attrs = class_attributes()
    m = base_classes(classnames())
    base, new = attrs[:m], attrs[m:]
    assert len(base) == len(new) == 18 and not set(base) & set(new)
    for pos in range(3):  # pattern, colour, shape: every value of a new class occurs among the base classes
        assert {a[pos] for a in new} <= {a[pos] for a in base}
    for p, c, s in new:  # ... and every pair too, so "new" means a new combination, not a new word
        assert any(b[0] == p and b[1] == c for b in base) or any(b[1] == c and b[2] == s for b in base)


def test_images_are_deterministic_and_vary_with_the_key():
    a = np.asarray(render("dotted amber hexagon", "k1", 64))
    assert a.shape == (64, 64, 3)
    assert np.array_equal(a, np.asarray(render("dotted amber hexagon", "k1", 64)))
    others = [np.asarray(render("dotted amber hexagon", f"k{i}", 64)) for i in range(2, 8)]
    assert all(np.abs(a.astype(int) - o).mean() > 8 for o in others)  # size, place, rotation, background differ
    corners = {tuple(o[0, 0] // 16) for o in others}
    assert len(corners) > 3  # backgrounds vary


def test_train_and_test_come_from_disjoint_seeds():
    ds = read_shapes(train_per_class=3, test_per_class=3, seed=0, size=56)
    train, test = ds.splits["train"], ds.splits["test"]
    assert len(train) == len(test) == 3 * len(classnames())
    assert not {(r.classname, r.ref) for r in train} & {(r.classname, r.ref) for r in test}
    one = [r for r in train if r.label == 5]
    two = [r for r in test if r.label == 5]
    imgs = [np.asarray(ds.load(r)) for r in one + two]
    assert all(not np.array_equal(imgs[i], imgs[j]) for i in range(3) for j in range(3, 6))
    again = read_shapes(3, 3, seed=0, size=56)
    assert np.array_equal(np.asarray(again.load(train[7])), np.asarray(ds.load(train[7])))
    other = read_shapes(3, 3, seed=1, size=56)
    assert not np.array_equal(np.asarray(other.load(other.splits["train"][7])), np.asarray(ds.load(train[7])))


def test_patterns_are_what_they_say():
    colour, rng = (20, 135, 135), random.Random(0)
    share = {}
    for p in PATTERNS:
        fill = _pattern(p, colour, 120, 40.0, rng.uniform(0, math.pi), rng)
        share[p] = float((np.abs(fill.astype(int) - colour).sum(-1) < 10).mean())
    assert share["solid"] == 1.0
    assert 0.4 < share["striped"] < 0.6  # half stripes, half tint
    assert 0.15 < share["dotted"] < 0.4  # dots of radius 0.3 x period: ~28% of the area
