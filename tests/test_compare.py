"""Known-answer tests for corelib.compare: principal angles, projector overlap, CCA, weight cosine."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from corelib.compare import cca, principal_angles, projector_overlap, weight_cosine


def principal_angles_by_hand(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:
    """Principal angles in radians, ascending (solution of the chapter's coding exercise).

    The cosines are the singular values of ``Q1^T Q2``; the sines are the singular values of the
    part of the smaller basis that sticks out of the larger subspace, ``(I - Q1 Q1^T) Q2``.
    ``arctan2(sin, cos)`` is accurate at both ends, where ``arccos`` alone loses small angles
    (``cos`` is 1 to machine precision below ~1e-8 rad) and ``arcsin`` alone loses angles near 90°.
    """
    if q1.shape[1] < q2.shape[1]:
        q1, q2 = q2, q1
    cos = np.linalg.svd(q1.T @ q2, compute_uv=False)  # descending
    sin = np.linalg.svd(q2 - q1 @ (q1.T @ q2), compute_uv=False)[::-1]  # ascending
    return np.arctan2(sin, cos)


def _rotation(d: int, seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return q


def _pair_with_angles(theta: np.ndarray, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two r-dimensional subspaces of R^d with principal angles exactly ``theta`` (before rotation)."""
    r = len(theta)
    assert d >= 2 * r
    q1 = np.zeros((d, r))
    q2 = np.zeros((d, r))
    q1[np.arange(r), np.arange(r)] = 1.0
    q2[np.arange(r), np.arange(r)] = np.cos(theta)
    q2[r + np.arange(r), np.arange(r)] = np.sin(theta)
    rot = _rotation(d, seed)
    mix = _rotation(r, seed + 1)  # a different basis of the same subspace
    return rot @ q1, rot @ q2 @ mix


def _random_basis(d: int, r: int, rng: np.random.Generator) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((d, r)))[0]


# --------------------------------------------------------------------------- principal angles


@pytest.mark.parametrize("d, r1, r2", [(30, 4, 4), (30, 4, 7), (30, 9, 2), (5, 3, 3), (6, 6, 2)])
def test_principal_angles_match_scipy_on_random_subspaces(d, r1, r2):
    rng = np.random.default_rng(d + 10 * r1 + r2)
    q1, q2 = _random_basis(d, r1, rng), _random_basis(d, r2, rng)
    ours = principal_angles(q1, q2)
    ref = np.sort(np.degrees(scipy.linalg.subspace_angles(q1, q2)))
    assert ours.shape == (min(r1, r2),)
    np.testing.assert_allclose(ours, ref, atol=1e-10)
    np.testing.assert_allclose(principal_angles(q2, q1), ours, atol=1e-12)  # symmetric
    if r1 + r2 > d:  # the subspaces must intersect
        assert ours[0] < 1e-6


def test_principal_angles_tiny_and_near_right_angles_are_accurate():
    theta = np.array([1e-7, 1e-4, 0.3, np.pi / 2 - 1e-7])
    q1, q2 = _pair_with_angles(theta, 12, seed=0)
    ours = np.radians(principal_angles(q1, q2))
    np.testing.assert_allclose(ours, theta, rtol=1e-6)
    assert np.pi / 2 - ours[-1] == pytest.approx(1e-7, rel=1e-6)
    # scipy agrees to an absolute 1e-8 rad; at 1e-7 rad its relative error is ~1 % (sqrt(eps)
    # accuracy), whereas the sine route above is accurate to ~1e-9 relative.
    ref = np.sort(scipy.linalg.subspace_angles(q1, q2))
    np.testing.assert_allclose(np.radians(principal_angles(q1, q2)), ref, atol=1e-8)


def test_principal_angles_of_identical_and_orthogonal_subspaces():
    q = _random_basis(10, 3, np.random.default_rng(0))
    same = q @ _rotation(3, 5)
    np.testing.assert_allclose(principal_angles(q, same), 0.0, atol=1e-6)
    rot = _rotation(10, 6)
    np.testing.assert_allclose(principal_angles(rot[:, :3], rot[:, 3:7]), 90.0, atol=1e-10)


def test_exercise_solution_matches_corelib_and_naive_arccos_does_not():
    theta = np.array([3e-8, 2e-3, 1.0, 1.5])
    q1, q2 = _pair_with_angles(theta, 10, seed=2)
    by_hand = principal_angles_by_hand(q1, q2)
    np.testing.assert_allclose(by_hand, theta, rtol=1e-6)
    np.testing.assert_allclose(np.degrees(by_hand), principal_angles(q1, q2), rtol=1e-6)
    naive = np.sort(np.arccos(np.minimum(np.linalg.svd(q1.T @ q2, compute_uv=False), 1.0)))
    assert abs(naive[0] - theta[0]) / theta[0] > 0.01  # arccos cannot resolve 3e-8 rad
    rng = np.random.default_rng(3)
    for r1, r2 in [(3, 3), (2, 5), (6, 1)]:
        a, b = _random_basis(15, r1, rng), _random_basis(15, r2, rng)
        np.testing.assert_allclose(np.degrees(principal_angles_by_hand(a, b)), principal_angles(a, b), atol=1e-10)


def test_principal_angles_reject_bad_bases():
    q = _random_basis(6, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="orthonormal"):
        principal_angles(2.0 * q, q)
    with pytest.raises(ValueError, match="orthonormal"):
        projector_overlap(q, np.ones((6, 2)))
    with pytest.raises(ValueError, match="different spaces"):
        principal_angles(q, _random_basis(7, 2, np.random.default_rng(1)))
    with pytest.raises(ValueError, match="NaN/Inf"):
        principal_angles(np.full((6, 2), np.nan), q)


# --------------------------------------------------------------------------- projector overlap


def test_projector_overlap_known_values():
    rng = np.random.default_rng(0)
    q = _random_basis(12, 4, rng)
    assert projector_overlap(q, q @ _rotation(4, 1)) == pytest.approx(1.0, abs=1e-12)
    rot = _rotation(12, 2)
    assert projector_overlap(rot[:, :4], rot[:, 4:8]) == pytest.approx(0.0, abs=1e-12)
    theta = np.array([0.1, 0.7, 1.2])
    q1, q2 = _pair_with_angles(theta, 9, seed=4)
    assert projector_overlap(q1, q2) == pytest.approx(np.sum(np.cos(theta) ** 2) / 3, rel=1e-12)
    # Nested subspaces of different ranks: ||Q1^T Q2||_F^2 = 2, normalised by sqrt(2 * 4).
    assert projector_overlap(rot[:, :2], rot[:, :4]) == pytest.approx(2 / np.sqrt(8), rel=1e-12)


# --------------------------------------------------------------------------- CCA


def test_cca_of_invertible_transform_is_all_ones():
    rng = np.random.default_rng(0)
    z1 = rng.standard_normal((500, 4))
    m = rng.standard_normal((4, 4)) + 2 * np.eye(4)
    rho = cca(z1, z1 @ m + 7.0)
    assert rho.shape == (4,)
    np.testing.assert_allclose(rho, 1.0, atol=1e-10)


def test_cca_of_independent_data_is_small():
    rng = np.random.default_rng(1)
    n = 20000
    rho = cca(rng.standard_normal((n, 3)), rng.standard_normal((n, 3)))
    # Largest sample canonical correlation of independent data is O(sqrt(r / N)) ~ 0.01 here.
    assert rho.max() < 0.05
    assert np.all(np.diff(rho) <= 0)


def test_cca_recovers_a_planted_correlation_through_mixing():
    rng = np.random.default_rng(2)
    n, rho_true = 50000, 0.6
    x = rng.standard_normal(n)
    z1 = np.column_stack([x, rng.standard_normal(n)])
    z2 = np.column_stack([rho_true * x + np.sqrt(1 - rho_true**2) * rng.standard_normal(n), rng.standard_normal(n)])
    m1, m2 = rng.standard_normal((2, 2)) + np.eye(2), rng.standard_normal((2, 2)) + np.eye(2)
    rho = cca(z1 @ m1, z2 @ m2 - 3.0)
    # Sampling sd of a correlation is (1 - rho^2) / sqrt(N) ~ 0.003; the second one is ~0.
    assert rho[0] == pytest.approx(rho_true, abs=0.015)
    assert rho[1] < 0.02
    np.testing.assert_allclose(rho, cca(z1, z2), rtol=1e-10)  # invariant to invertible mixing


def test_cca_rejects_bad_input():
    rng = np.random.default_rng(3)
    z = rng.standard_normal((50, 3))
    with pytest.raises(ValueError, match="same samples"):
        cca(z, z[:40])
    with pytest.raises(ValueError, match="more samples"):
        cca(z[:5], z[:5])
    dependent = np.column_stack([z[:, 0], 2 * z[:, 0], z[:, 1]])
    with pytest.raises(ValueError, match="linearly dependent"):
        cca(dependent, z)


# --------------------------------------------------------------------------- weight cosine


def _tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))


def test_weight_cosine_known_values():
    a = _tiny_model(0)
    neg = _tiny_model(0)
    with torch.no_grad():
        for p in neg.parameters():
            p.neg_()
    assert weight_cosine(a, a) == pytest.approx(1.0, abs=1e-12)
    assert weight_cosine(a, neg) == pytest.approx(-1.0, abs=1e-12)
    u, v = torch.nn.Linear(2, 1, bias=False), torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        u.weight.copy_(torch.tensor([[1.0, 1.0]]))
        v.weight.copy_(torch.tensor([[3.0, 0.0]]))
    assert weight_cosine(u, v) == pytest.approx(1 / np.sqrt(2), rel=1e-12)
    b = _tiny_model(1)
    assert -1.0 < weight_cosine(a, b) < 1.0


def test_weight_cosine_rejects_different_architectures():
    with pytest.raises(ValueError, match="different architectures"):
        weight_cosine(_tiny_model(0), torch.nn.Sequential(torch.nn.Linear(3, 5)))
