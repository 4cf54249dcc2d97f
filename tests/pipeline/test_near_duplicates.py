"""Leader clustering of window embeddings: decisions against exact rational arithmetic (fractions.Fraction) for pairs
within the float32 screen's error of the threshold, the most similar kept window named, decisions of a prefix kept
when windows follow, and windows an earlier run kept leading without a decision."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from latentforge.pipeline.near_duplicates import near_duplicates

THRESHOLD = 0.95


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _at_least(a: np.ndarray, b: np.ndarray, threshold: float) -> bool:
    """cos(a, b) >= threshold in exact rationals: dot >= t |a| |b|, squared where both sides are positive."""
    x, y, t = [Fraction(float(v)) for v in a], [Fraction(float(v)) for v in b], Fraction(threshold)
    dot = sum(p * q for p, q in zip(x, y))
    return dot >= 0 and dot * dot >= t * t * sum(p * p for p in x) * sum(q * q for q in y)


def _pairs_near_the_threshold(count: int, width: int, spread: float) -> list[np.ndarray]:
    """Pairs whose cosine lies within `spread` of THRESHOLD: b = cos(theta) a + sin(theta) c, c orthogonal to a."""
    rng = np.random.default_rng(3)
    pairs = []
    for offset in np.linspace(-spread, spread, count):
        a = rng.normal(size=width)
        a /= np.linalg.norm(a)
        c = rng.normal(size=width)
        c -= (c @ a) * a
        c /= np.linalg.norm(c)
        cosine = THRESHOLD + offset
        pairs.append(_unit([a, cosine * a + np.sqrt(1 - cosine**2) * c]))
    return pairs


def test_decisions_near_the_threshold_equal_exact_arithmetic():
    width = 64  # the screen's margin is about 2 * 64 * 2**-24 = 7.6e-6; these pairs lie within 2e-5
    pairs = _pairs_near_the_threshold(81, width, 2e-5)
    decided = [near_duplicates(pair, THRESHOLD)[1] is not None for pair in pairs]
    assert decided == [_at_least(a, b, THRESHOLD) for a, b in pairs]
    assert 0 < sum(decided) < len(decided)


def test_the_most_similar_kept_window_is_named_and_only_kept_ones_lead():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=16), rng.normal(size=16)
    vectors = _unit([a, b, a + 0.05 * b, b + 0.01 * a, a + 0.02 * rng.normal(size=16)])
    decisions = near_duplicates(vectors, THRESHOLD)
    assert decisions[:2] == [None, None]
    assert [d.of for d in decisions[2:]] == [0, 1, 0]
    cosines = [float(vectors[i].astype(np.float64) @ vectors[d.of]) for i, d in enumerate(decisions) if d]
    np.testing.assert_allclose([d.similarity for d in decisions if d], cosines, atol=1e-7)

    same = near_duplicates(_unit([a, a]), THRESHOLD)[1]
    assert same.of == 0 and same.similarity == 1.0  # identical vectors: exactly 1, on any machine


def test_a_prefix_keeps_its_decisions_and_fixed_windows_lead():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(300, 24))
    vectors = _unit(np.concatenate([base, base[::7] + 0.01 * rng.normal(size=(43, 24)), base[:5]]))
    whole = near_duplicates(vectors, THRESHOLD)
    assert near_duplicates(vectors[:320], THRESHOLD) == whole[:320]
    assert sum(d is not None for d in whole) == 48

    fixed = np.zeros(len(vectors), dtype=bool)
    fixed[300] = True  # a duplicate an earlier run kept (as if decided under another threshold) leads its group
    decided = near_duplicates(vectors, THRESHOLD, fixed)
    assert decided[300] is None and decided[:300] == whole[:300]
