"""Comparing cores across models: geometry (angles, overlap) versus statistics (CCA).

Two cores can sit in nearly orthogonal subspaces (large principal angles, overlap near 0) and
still carry the same information (canonical correlations near 1): the signature of functionally
equivalent but differently realised mechanisms.
"""

from __future__ import annotations

import numpy as np
import torch

from ._checks import as_matrix

__all__ = [
    "cca",
    "principal_angles",
    "projector_overlap",
    "weight_cosine",
    "weight_cosines_by_tensor",
]


def _orthonormal(q, name: str) -> np.ndarray:
    q = as_matrix(q, name)
    gram = q.T @ q
    if not np.allclose(gram, np.eye(q.shape[1]), atol=1e-6):
        raise ValueError(f"{name} must have orthonormal columns (use Core.basis or a QR factor).")
    return q


def _pair(q1, q2) -> tuple[np.ndarray, np.ndarray]:
    a, b = _orthonormal(q1, "Q1"), _orthonormal(q2, "Q2")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"Q1 and Q2 live in different spaces: D={a.shape[0]} vs D={b.shape[0]}.")
    return a, b


def principal_angles(q1, q2) -> np.ndarray:
    """Principal angles (degrees, ascending) between the column spaces of Q1 and Q2.

    Uses sines for small angles and cosines for large ones, so both ends are accurate.
    """
    a, b = _pair(q1, q2)
    if a.shape[1] < b.shape[1]:
        a, b = b, a
    cos = np.linalg.svd(a.T @ b, compute_uv=False)
    # Sines of the angles are the singular values of the part of b outside span(a).
    resid = b - a @ (a.T @ b)
    sin = np.sort(np.linalg.svd(resid, compute_uv=False))
    # min() only removes round-off above 1; cosines of orthonormal bases are at most 1.
    theta_cos = np.arccos(np.minimum(cos, 1.0))
    theta_sin = np.arcsin(np.minimum(sin, 1.0))
    theta = np.where(cos**2 < 0.5, theta_cos, theta_sin)
    return np.sort(np.degrees(theta))


def projector_overlap(q1, q2) -> float:
    """Normalised projector overlap ``||Q1^T Q2||_F^2 / sqrt(r1 r2)``: 1 same subspace, 0 orthogonal."""
    a, b = _pair(q1, q2)
    return float(np.sum((a.T @ b) ** 2) / np.sqrt(a.shape[1] * b.shape[1]))


def _whiten(z: np.ndarray, name: str) -> np.ndarray:
    zc = z - z.mean(axis=0)
    u, s, _ = np.linalg.svd(zc, full_matrices=False)
    keep = s > s[0] * 1e-10
    if not keep.all():
        raise ValueError(f"{name} has linearly dependent columns; CCA needs full column rank.")
    return u


def cca(z1, z2) -> np.ndarray:
    """Canonical correlations (descending) between paired samples Z1 (N, r1) and Z2 (N, r2)."""
    a, b = as_matrix(z1, "Z1"), as_matrix(z2, "Z2")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"Z1 and Z2 need the same samples: {a.shape[0]} vs {b.shape[0]} rows.")
    if a.shape[0] <= a.shape[1] + b.shape[1]:
        raise ValueError("CCA needs more samples than r1 + r2 dimensions.")
    rho = np.linalg.svd(_whiten(a, "Z1").T @ _whiten(b, "Z2"), compute_uv=False)
    return np.minimum(rho, 1.0)


def _matched_parameters(model_a: torch.nn.Module, model_b: torch.nn.Module) -> dict:
    pa = dict(model_a.named_parameters())
    pb = dict(model_b.named_parameters())
    if pa.keys() != pb.keys() or any(pa[k].shape != pb[k].shape for k in pa):
        raise ValueError("models have different architectures; weight cosine needs matching parameters.")
    return {k: (pa[k].detach().cpu().double().flatten(), pb[k].detach().cpu().double().flatten()) for k in pa}


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a @ b / (a.norm() * b.norm()))


def weight_cosine(model_a: torch.nn.Module, model_b: torch.nn.Module) -> float:
    """Cosine similarity of the two models' flattened parameter vectors (all parameters)."""
    pairs = _matched_parameters(model_a, model_b)
    return _cosine(torch.cat([a for a, _ in pairs.values()]), torch.cat([b for _, b in pairs.values()]))


def weight_cosines_by_tensor(model_a: torch.nn.Module, model_b: torch.nn.Module) -> dict[str, float]:
    """Cosine similarity per parameter tensor, by name.

    Separates matrices learned from random initialisations (near 0 across seeds) from tensors
    that start equal in every model, such as LayerNorm gains initialised at 1.
    """
    return {k: _cosine(a, b) for k, (a, b) in _matched_parameters(model_a, model_b).items()}
