"""Known-answer tests for corelib.ace (Algorithmic Core Extraction).

Each test plants a structure whose core is known in closed form -- a low-rank relevant subspace,
a linear system whose core is its balanced truncation, a known linear/quadratic read-out -- and
checks that ACE recovers it to a stated tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from corelib.ace import Core, MomentAccumulator, energy_rank, extract, from_moments, jacobians
from corelib.compare import principal_angles
from corelib.linear import (
    balanced_truncation,
    gramians,
    hankel_singular_values,
    pca_basis,
    random_stable_system,
)


def _orthonormal(d: int, r: int, rng: np.random.Generator) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((d, r)))
    return q


def _max_angle_rad(q1: np.ndarray, q2: np.ndarray) -> float:
    return float(np.max(scipy.linalg.subspace_angles(q1, q2)))


def ace_direct(H: np.ndarray, J: np.ndarray, r: int) -> tuple[np.ndarray, np.ndarray]:
    """The paper's direct route (solution of the chapter's exercise): SVD of ``Hc J^T``.

    ``Hc`` (N, D) are the centred activations and ``J`` (M, K, D) the Jacobians stacked to
    (M K, D). Returns ``(singular_values, basis)`` with the core basis the QR factor of
    ``Hc^T U_r``. Only sensible for small N and M K (the matrix is N x M K).
    """
    hc = H - H.mean(axis=0)
    jj = J.reshape(-1, J.shape[-1])
    u, s, _ = np.linalg.svd(hc @ jj.T, full_matrices=False)
    q, _ = np.linalg.qr(hc.T @ u[:, :r])
    return s, q


# --------------------------------------------------------------------------- planted cores


def _planted(n=4000, d=20, r=3, k=4, m=200, seed=0, block_diagonal=True):
    """Activations with a low-variance relevant subspace Qc and a high-variance irrelevant one.

    With ``block_diagonal`` the irrelevant coordinates are made exactly uncorrelated (in-sample)
    with the relevant ones, so the sample covariance leaves span(Qc) invariant.
    """
    rng = np.random.default_rng(seed)
    q = _orthonormal(d, d, rng)
    qc, qp = q[:, :r], q[:, r:]
    zc = rng.standard_normal((n, r)) * np.array([1.0, 0.8, 0.6])[:r]
    zp = rng.standard_normal((n, d - r)) * 3.0
    zc -= zc.mean(axis=0)
    zp -= zp.mean(axis=0)
    if block_diagonal:
        zp -= zc @ np.linalg.lstsq(zc, zp, rcond=None)[0]
    h = zc @ qc.T + zp @ qp.T + 5.0  # an offset: ACE must centre
    jac = rng.standard_normal((m, k, r)) @ qc.T  # the read-out only sees span(Qc)
    return h, jac, qc


def test_planted_core_is_recovered_exactly():
    h, jac, qc = _planted()
    core = extract(h, jac, rank=3, eps=0)
    assert core.basis.shape == (20, 3)
    np.testing.assert_allclose(core.basis.T @ core.basis, np.eye(3), atol=1e-12)
    assert _max_angle_rad(core.basis, qc) < 1e-9
    assert np.max(principal_angles(core.basis, qc)) < 1e-6  # degrees
    # Relevance has rank 3, so every later singular value is round-off (square roots of
    # eigenvalues ~1e-16 relative, hence ~1e-8).
    s = core.singular_values
    assert s[3] / s[0] < 1e-6
    assert energy_rank(s, 1.0) == 3


def test_planted_core_beats_pca():
    """The irrelevant subspace has 9x the variance: PCA's top-3 misses the core completely."""
    h, jac, qc = _planted()
    pca = pca_basis(h, 3)
    assert np.min(principal_angles(pca, qc)) > 60.0
    core = extract(h, jac, rank=3)
    assert np.max(principal_angles(core.basis, qc)) < 1e-3


def test_planted_core_general_covariance_is_cov_times_relevant_subspace():
    """Without exact decorrelation the core is span(Cov @ Qc), the reachability-weighted subspace."""
    h, jac, qc = _planted(block_diagonal=False, seed=3)
    core = extract(h, jac, rank=3, eps=0)
    cov = np.cov(h.T)
    target, _ = np.linalg.qr(cov @ qc)
    assert _max_angle_rad(core.basis, target) < 1e-9
    # ... which differs from Qc itself by a sampling-size angle, not by round-off.
    assert _max_angle_rad(core.basis, qc) > 1e-4


# --------------------------------------------------------------------------- LTI systems


@pytest.mark.parametrize("n, m, l, seed, r", [(8, 2, 2, 0, 3), (16, 3, 3, 1, 5), (30, 4, 4, 3, 10)])
def test_ace_singular_values_are_hankel_singular_values(n, m, l, seed, r):
    a, b, c = random_stable_system(n, m, l, seed=seed)
    wc, wo = gramians(a, b, c)
    core = from_moments(wc, wo, rank=r, eps=0)
    hsv = hankel_singular_values(a, b, c)
    rel = np.max(np.abs(core.singular_values - hsv) / hsv)
    assert rel <= 1e-8
    bt = balanced_truncation(a, b, c, r)
    assert _max_angle_rad(core.basis, bt.basis) < 1e-6


def test_default_jitter_barely_moves_the_hankel_spectrum():
    a, b, c = random_stable_system(10, 2, 2, seed=5)
    wc, wo = gramians(a, b, c)
    hsv = hankel_singular_values(a, b, c)
    s = from_moments(wc, wo, rank=3).singular_values  # eps = 1e-8 relative jitter
    assert np.max(np.abs(s[:3] - hsv[:3]) / hsv[:3]) < 1e-5


# --------------------------------------------------------------------------- energy rank


@pytest.mark.parametrize(
    "threshold, expected",
    [(0.5, 1), (9 / 14, 1), (0.6, 1), (0.65, 2), (13 / 14, 2), (0.93, 3), (1.0, 3)],
)
def test_energy_rank_uses_squared_singular_values(threshold, expected):
    # Energies 9, 4, 1 of 14: cumulative shares 9/14 = 0.643, 13/14 = 0.929, 1.
    # (Unsquared weights 3, 2, 1 would give shares 0.5, 0.833, 1 and rank 2 at threshold 0.6.)
    assert energy_rank([3.0, 2.0, 1.0], threshold) == expected


def test_energy_rank_with_zero_tail_and_threshold_one():
    assert energy_rank([2.0, 1.0, 0.0, 0.0], 1.0) == 2
    assert energy_rank(np.array([5.0]), 0.3) == 1


@pytest.mark.parametrize("threshold", [0.0, -0.1, 1.0001, 2.0])
def test_energy_rank_rejects_thresholds_outside_unit_interval(threshold):
    with pytest.raises(ValueError, match="energy"):
        energy_rank([3.0, 2.0, 1.0], threshold)


@pytest.mark.parametrize(
    "values, message",
    [
        ([], "non-empty"),
        ([[1.0, 2.0]], "1-D"),
        ([1.0, -1.0], "non-negative"),
        ([1.0, np.nan], "finite"),
        ([0.0, 0.0], "zero"),
    ],
)
def test_energy_rank_rejects_bad_singular_values(values, message):
    with pytest.raises(ValueError, match=message):
        energy_rank(values, 0.9)


# --------------------------------------------------------------------------- streaming moments


def test_accumulator_uneven_batches_match_one_shot_and_numpy():
    rng = np.random.default_rng(1)
    n, d, m, k = 777, 12, 95, 3
    h = rng.standard_normal((n, d)) @ rng.standard_normal((d, d)) + 1.0e3  # large offset
    jac = rng.standard_normal((m, k, d))
    acc = MomentAccumulator(d)
    cuts = [0, 1, 8, 300, 302, 650, n]  # first batch has a single row
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        acc.update(h_batch=h[lo:hi])
    for lo, hi in [(0, 7), (7, 8), (8, 60), (60, m)]:
        acc.update(j_batch=torch.from_numpy(jac[lo:hi]))
    assert acc.n == n and acc.n_jac == m
    np.testing.assert_allclose(acc.mean, h.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(acc.activity, np.cov(h.T), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(acc.relevance, np.einsum("mki,mkj->ij", jac, jac) / m, rtol=1e-12, atol=1e-14)

    streamed, one_shot = acc.core(rank=4), extract(h, jac, rank=4)
    np.testing.assert_allclose(streamed.singular_values, one_shot.singular_values, rtol=1e-9)
    np.testing.assert_allclose(streamed.projector, one_shot.projector, atol=1e-8)
    np.testing.assert_allclose(streamed.mean, one_shot.mean, rtol=1e-12)


def test_accumulator_takes_float32_tensors_as_numpy_and_keeps_mps_moments_on_the_cpu():
    rng = np.random.default_rng(3)
    h, jac = rng.standard_normal((50, 5)).astype(np.float32), rng.standard_normal((20, 2, 5)).astype(np.float32)
    from_numpy = MomentAccumulator(5).update(h, jac)
    from_torch = MomentAccumulator(5).update(torch.from_numpy(h), torch.from_numpy(jac))
    for name in ("mean", "activity", "relevance"):
        np.testing.assert_array_equal(getattr(from_torch, name), getattr(from_numpy, name))
    assert MomentAccumulator(5, device="mps").device == torch.device("cpu")  # MPS has no float64
    with pytest.raises(ValueError, match="activations contains 2 NaN/Inf"):
        MomentAccumulator(5).update(torch.tensor([[0.0, 1, 2, 3, float("nan")]] * 2))


def test_accumulator_precision_with_huge_offset():
    """A shifted sum keeps the covariance of data with offset 1e6 and unit spread accurate."""
    rng = np.random.default_rng(2)
    h = rng.standard_normal((5000, 4)) + 1.0e6
    acc = MomentAccumulator(4)
    for chunk in np.array_split(h, 9):
        acc.update(chunk)
    np.testing.assert_allclose(acc.activity, np.cov(h.T), rtol=1e-7, atol=1e-7)


def test_accumulator_accepts_single_output_jacobians_as_matrices():
    rng = np.random.default_rng(4)
    jac = rng.standard_normal((30, 6))
    a = MomentAccumulator(6).update(j_batch=jac)
    b = MomentAccumulator(6).update(j_batch=jac[:, None, :])
    np.testing.assert_array_equal(a.relevance, b.relevance)
    np.testing.assert_allclose(a.relevance, jac.T @ jac / 30, rtol=1e-12)


def test_accumulator_errors_name_the_problem():
    acc = MomentAccumulator(3)
    with pytest.raises(ValueError, match="at least 2"):
        _ = acc.activity
    acc.update(np.ones((1, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        acc.core(rank=1)
    with pytest.raises(ValueError, match="no Jacobians"):
        _ = acc.relevance
    with pytest.raises(ValueError, match="D=4"):
        acc.update(np.ones((2, 4)))
    with pytest.raises(ValueError, match="D=5"):
        acc.update(j_batch=np.ones((2, 1, 5)))
    with pytest.raises(ValueError, match="NaN/Inf"):
        acc.update(np.array([[1.0, np.inf, 0.0]]))
    for bad in (0, -2, 2.5):
        with pytest.raises(ValueError, match="positive integer"):
            MomentAccumulator(bad)


# --------------------------------------------------------------------------- invariances


def _random_problem(seed=0, n=600, d=8, m=80, k=2):
    rng = np.random.default_rng(seed)
    h = rng.standard_normal((n, d)) @ rng.standard_normal((d, d))
    jac = rng.standard_normal((m, k, d)) @ np.diag(np.linspace(0.2, 2.0, d))
    return h, jac


def test_scaling_activity_or_relevance_rescales_singular_values_only():
    h, jac = _random_problem()
    base = extract(h, jac, rank=3)
    scaled_h = extract(3.0 * h, jac, rank=3)  # activity x 9
    scaled_j = extract(h, 0.5 * jac, rank=3)  # relevance x 1/4
    np.testing.assert_allclose(scaled_h.singular_values, 3.0 * base.singular_values, rtol=1e-10)
    np.testing.assert_allclose(scaled_j.singular_values, 0.5 * base.singular_values, rtol=1e-10)
    for other in (scaled_h, scaled_j):
        np.testing.assert_allclose(other.projector, base.projector, atol=1e-10)


def test_orthogonal_change_of_coordinates_rotates_the_core():
    h, jac = _random_problem(seed=1)
    rot = _orthonormal(8, 8, np.random.default_rng(7))
    base = extract(h, jac, rank=3)
    moved = extract(h @ rot.T, jac @ rot.T, rank=3)  # h -> R h, J -> J R^T
    np.testing.assert_allclose(moved.singular_values, base.singular_values, rtol=1e-10)
    np.testing.assert_allclose(moved.projector, rot @ base.projector @ rot.T, atol=1e-10)
    np.testing.assert_allclose(moved.mean, rot @ base.mean, atol=1e-12)


def test_invertible_change_of_coordinates_keeps_singular_values():
    """Exercise of the chapter: x -> V x, J -> J V^{-1} (Wc -> V Wc V^T, Wo -> V^-T Wo V^-1)."""
    h, jac = _random_problem(seed=2)
    rng = np.random.default_rng(8)
    v = np.eye(8) + 0.4 * rng.standard_normal((8, 8))
    assert np.linalg.cond(v) > 3  # genuinely not orthogonal
    base = extract(h, jac, rank=3, eps=0)
    moved = extract(h @ v.T, jac @ np.linalg.inv(v), rank=3, eps=0)
    np.testing.assert_allclose(moved.singular_values, base.singular_values, rtol=1e-9)
    target, _ = np.linalg.qr(v @ base.basis)
    assert _max_angle_rad(moved.basis, target) < 1e-8


def test_lti_invariance_under_state_coordinates():
    a, b, c = random_stable_system(9, 2, 2, seed=4)
    v = np.random.default_rng(0).standard_normal((9, 9)) + 3 * np.eye(9)
    vi = np.linalg.inv(v)
    hsv = hankel_singular_values(a, b, c)
    hsv_moved = hankel_singular_values(v @ a @ vi, v @ b, c @ vi)
    # Small values lose accuracy in proportion to cond(V) (here ~1e2), not to round-off alone.
    np.testing.assert_allclose(hsv_moved, hsv, rtol=1e-6)
    wc, wo = gramians(a, b, c)
    wc2, wo2 = gramians(v @ a @ vi, v @ b, c @ vi)
    np.testing.assert_allclose(wc2, v @ wc @ v.T, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(wo2, vi.T @ wo @ vi, rtol=1e-8, atol=1e-10)


def test_ace_direct_route_matches_moment_route():
    """Exercise of the chapter: SVD(Hc J^T) has the same core; values differ by sqrt((N-1) M)."""
    h, jac = _random_problem(seed=3, n=150, m=40)
    s_direct, q_direct = ace_direct(h, jac, 3)
    core = extract(h, jac, rank=3, eps=0)
    scale = np.sqrt((h.shape[0] - 1) * jac.shape[0])
    np.testing.assert_allclose(s_direct[:8] / scale, core.singular_values, rtol=1e-9)
    assert _max_angle_rad(q_direct, core.basis) < 1e-8


# --------------------------------------------------------------------------- Core algebra


def _core_and_data(seed=0, d=6, r=2):
    rng = np.random.default_rng(seed)
    core = Core(basis=_orthonormal(d, r, rng), singular_values=np.array([3.0, 2.0, 1.0]), mean=rng.standard_normal(d))
    return core, rng.standard_normal((10, d)) + 2.0


def test_keep_remove_flip_algebra_uncentred():
    core, h = _core_and_data()
    p = core.projector
    np.testing.assert_allclose(core.keep(h), h @ p, atol=1e-12)
    np.testing.assert_allclose(core.keep(h) + core.remove(h), h, atol=1e-12)
    np.testing.assert_allclose(core.flip(h), h - 2 * h @ p, atol=1e-12)
    np.testing.assert_allclose(core.flip(core.flip(h)), h, atol=1e-12)
    np.testing.assert_allclose(core.keep(core.keep(h)), core.keep(h), atol=1e-12)
    np.testing.assert_allclose(core.coords(core.remove(h), centered=False), 0.0, atol=1e-12)


def test_keep_remove_flip_algebra_centred_uses_the_mean():
    core, h = _core_and_data(seed=1)
    mu, p = core.mean, core.projector
    keep, remove, flip = (core.keep(h, centered=True), core.remove(h, centered=True), core.flip(h, centered=True))
    np.testing.assert_allclose(keep, mu + (h - mu) @ p, atol=1e-12)
    np.testing.assert_allclose(remove, h - (h - mu) @ p, atol=1e-12)
    np.testing.assert_allclose(flip, h - 2 * (h - mu) @ p, atol=1e-12)
    np.testing.assert_allclose(keep + remove, h + mu, atol=1e-12)
    np.testing.assert_allclose(core.flip(flip, centered=True), h, atol=1e-12)
    np.testing.assert_allclose(core.coords(remove), 0.0, atol=1e-12)
    np.testing.assert_allclose(core.keep(mu[None, :], centered=True), mu[None, :], atol=1e-12)
    # The mean matters: centred and uncentred results differ for h with a non-zero mean.
    assert not np.allclose(keep, core.keep(h))


@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("op", ["keep", "remove", "flip", "coords"])
def test_torch_and_numpy_inputs_agree(op, centered):
    core, h = _core_and_data(seed=2)
    out_np = getattr(core, op)(h, centered=centered)
    out_t = getattr(core, op)(torch.from_numpy(h), centered=centered)
    assert isinstance(out_t, torch.Tensor) and out_t.dtype == torch.float64
    np.testing.assert_allclose(out_t.numpy(), out_np, atol=1e-12)
    out_32 = getattr(core, op)(torch.from_numpy(h).float(), centered=centered)
    assert out_32.dtype == torch.float32
    np.testing.assert_allclose(out_32.numpy(), out_np, atol=1e-5)


def test_core_properties_and_truncate():
    core, h = _core_and_data(seed=3)
    assert core.rank == 2 and core.dim == 6
    assert core.spectral_gap == pytest.approx(2.25)
    t = core.truncate(1)
    np.testing.assert_array_equal(t.basis, core.basis[:, :1])
    with pytest.raises(ValueError, match="rank"):
        core.truncate(3)
    with pytest.raises(ValueError, match="rank"):
        core.truncate(0)
    with pytest.raises(ValueError, match="D=6"):
        core.keep(np.ones((2, 5)))


# --------------------------------------------------------------------------- Jacobians


def test_jacobians_of_linear_and_quadratic_maps_are_analytic():
    rng = np.random.default_rng(0)
    d, k = 5, 3
    w = torch.from_numpy(rng.standard_normal((k, d)))
    m = torch.from_numpy(rng.standard_normal((d, d)))
    h = torch.from_numpy(rng.standard_normal((40, d)))

    lin = jacobians(lambda x: w @ x + 1.0, h, batch_size=7)
    assert lin.shape == (40, k, d) and lin.dtype == torch.float64
    np.testing.assert_allclose(lin.numpy(), np.broadcast_to(w.numpy(), (40, k, d)), atol=1e-12)

    quad = jacobians(lambda x: (x @ m @ x)[None], h)  # gradient of x^T M x is (M + M^T) x
    expected = h.numpy() @ (m.numpy() + m.numpy().T)
    np.testing.assert_allclose(quad[:, 0, :].numpy(), expected, atol=1e-10)

    scalar = jacobians(lambda x: (x**3).sum(), h)  # scalar output -> (M, 1, D)
    assert scalar.shape == (40, 1, d)
    np.testing.assert_allclose(scalar[:, 0].numpy(), 3 * h.numpy() ** 2, atol=1e-10)


def test_jacobian_sampling_is_seeded_and_without_replacement():
    h = torch.arange(60, dtype=torch.float64).reshape(30, 2)
    f = lambda x: (x**2).sum()[None]  # noqa: E731 -- gradient 2x identifies the sampled row
    a = jacobians(f, h, n_samples=10, seed=3)
    b = jacobians(f, h, n_samples=10, seed=3)
    c = jacobians(f, h, n_samples=10, seed=4)
    torch.testing.assert_close(a, b)
    assert not torch.equal(a, c)
    rows = (a[:, 0, 0] / 4).long()  # row i has first coordinate 2 i
    assert len(set(rows.tolist())) == 10
    every = jacobians(f, h)
    torch.testing.assert_close(every[:, 0, :], 2 * h)


def test_jacobians_reject_bad_input():
    f = lambda x: x.sum()[None]  # noqa: E731
    with pytest.raises(ValueError, match="NaN/Inf"):
        jacobians(f, torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="non-empty"):
        jacobians(f, torch.zeros((0, 3)))
    for n in (0, 4, 1.5):
        with pytest.raises(ValueError, match="n_samples"):
            jacobians(f, torch.ones((3, 2)), n_samples=n)


# --------------------------------------------------------------------------- bad input


def test_extract_rejects_bad_input_with_named_problem():
    h, jac = _random_problem(n=50, d=4, m=10)
    bad = h.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN/Inf"):
        extract(bad, jac)
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match="NaN/Inf"):
        extract(bad, jac)
    bad_j = jac.copy()
    bad_j[0, 0, 0] = -np.inf
    with pytest.raises(ValueError, match="NaN/Inf"):
        extract(h, bad_j)
    with pytest.raises(ValueError, match="D=5"):
        extract(h, np.ones((10, 2, 5)))
    for rank in (0, 5, -1, 1.5):
        with pytest.raises(ValueError, match="rank"):
            extract(h, jac, rank=rank)
    for energy in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError, match="energy"):
            extract(h, jac, energy=energy)
    with pytest.raises(ValueError, match="empty"):
        extract(np.zeros((0, 4)), jac)
    with pytest.raises(ValueError, match="empty"):
        extract(h, np.zeros((0, 2, 4)))
    with pytest.raises(ValueError, match="3 dimensions"):
        extract(h, jac[:, 0, :])


def test_from_moments_rejects_bad_moments():
    eye = np.eye(3)
    with pytest.raises(ValueError, match="square"):
        from_moments(np.ones((3, 4)), eye)
    with pytest.raises(ValueError, match="square"):
        from_moments(eye, np.ones((3, 2)))
    with pytest.raises(ValueError, match="activity is 3x3"):
        from_moments(eye, np.eye(4))
    with pytest.raises(ValueError, match="eps"):
        from_moments(eye, eye, eps=-1e-3)
    with pytest.raises(ValueError, match="mean"):
        from_moments(eye, eye, rank=1, mean=np.zeros(4))
    with pytest.raises(ValueError, match="NaN/Inf"):
        from_moments(np.full((3, 3), np.nan), eye)
    with pytest.raises(ValueError, match="zero"):
        from_moments(eye, np.zeros((3, 3)), eps=0)  # relevance shares no direction
