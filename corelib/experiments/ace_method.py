"""Computations of the "How ACE works" chapter: ACE from simulated data, and ACE versus PCA.

The chapter's exact checks (Gramians, Hankel singular values) need only ``corelib.ace`` and
``corelib.linear``; this module holds the loops and the synthetic data the chapter builds on top.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from ..ace import Core, extract, jacobians
from ..compare import principal_angles
from ..linear import observability_matrix, simulate_states

__all__ = ["decoy_activations", "keep_r2", "simulated_core_errors"]


def simulated_core_errors(
    A, B, C, *, rank: int, reference_sv, reference_basis, sim_steps: Sequence[int], n_runs: int,
    n_jacobians: int, seed: int, horizon: int,
) -> tuple[list[float], list[float]]:
    """How close ACE from simulated states gets to the exact (Gramian) answer, per trajectory length.

    Simulates ``n_runs`` noise-driven trajectories, takes their first N states for each N in
    ``sim_steps`` as activations, and uses the exact Jacobian of the next ``horizon`` outputs as
    relevance. Returns, per N, the root-mean-square over runs of (a) the largest relative error of
    the top-``rank`` singular values against ``reference_sv`` and (b) the largest principal angle
    (degrees) to ``reference_basis``.
    """
    o_mat = torch.from_numpy(observability_matrix(A, C, horizon))
    runs = simulate_states(A, B, max(sim_steps), seed=seed, n_runs=n_runs)
    ref_sv = np.asarray(reference_sv)[:rank]
    errors, angles = [], []
    for n_steps in sim_steps:
        errs, angs = [], []
        for states in runs:
            h = states[:n_steps]
            j = jacobians(lambda x: o_mat @ x, h, n_samples=n_jacobians, seed=seed)
            core = extract(h, j, rank=rank)
            errs.append(np.max(np.abs(core.singular_values[:rank] - ref_sv) / ref_sv))
            angs.append(np.max(principal_angles(core.basis, reference_basis)))
        errors.append(float(np.sqrt(np.mean(np.square(errs)))))
        angles.append(float(np.sqrt(np.mean(np.square(angs)))))
    return errors, angles


def decoy_activations(
    dim: int, n: int, *, loud_std: float, quiet_std: float, seed: int, decorrelate: bool = True,
    offset: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Activations whose spread falls geometrically from ``loud_std`` to ``quiet_std``.

    Returns ``(H, axes)``: H is (n, dim); the columns of the orthogonal ``axes`` are the principal
    axes, loudest first, so ``axes[:, -1]`` is the quietest. With ``decorrelate`` the components
    are made exactly uncorrelated in the sample, so the axes are exactly the sample's principal
    axes (otherwise only in expectation).
    """
    if dim < 2 or n <= dim:
        raise ValueError(f"need dim >= 2 and more samples than dimensions, got dim={dim}, n={n}.")
    rng = np.random.default_rng(seed)
    axes, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    spreads = np.geomspace(loud_std, quiet_std, dim)
    latent = rng.standard_normal((n, dim))
    if decorrelate:  # centred orthogonal columns: sample covariance exactly the identity
        latent = np.linalg.qr(latent - latent.mean(axis=0))[0] * np.sqrt(n - 1)
    return (latent * spreads) @ axes.T + offset, axes


def keep_r2(f: Callable, H, basis, mean) -> float:
    """R^2 of a read-out ``f`` after the centred core-only intervention onto ``span(basis)``.

    ``1 - sum (f(h) - f(h_kept))^2 / sum (f(h) - mean f)^2`` with
    ``h_kept = mean + P (h - mean)``: 1 when the subspace keeps everything the read-out uses.
    """
    kept = Core(basis=np.asarray(basis), singular_values=np.ones(np.shape(basis)[1]),
                mean=np.asarray(mean))
    y, y_kept = f(H), f(kept.keep(H, centered=True))
    return float(1.0 - np.sum((y - y_kept) ** 2) / np.sum((y - y.mean()) ** 2))
