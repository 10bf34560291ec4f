"""Computations of the "How ACE works" chapter: ACE from simulated data, and ACE versus PCA.

The chapter's exact checks (Gramians, Hankel singular values) need only ``corelib.ace`` and
``corelib.linear``; this module holds the loops and the synthetic data the chapter builds on top.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import numpy as np
import scipy.linalg
import torch

from .._checks import check_seed, check_settings, is_number
from ..ace import Core, energy_rank, extract, from_moments, jacobians
from ..compare import principal_angles
from ..linear import (
    balanced_truncation,
    gramians,
    hankel_singular_values,
    observability_matrix,
    pca_basis,
    random_stable_system,
    simulate_states,
)

__all__ = [
    "AceMethodParams",
    "LTIComparison",
    "SimulationResult",
    "DecoyComparison",
    "HANKEL_REL_TOL",
    "ANGLE_TOL_RAD",
    "decoy_activations",
    "keep_r2",
    "simulated_core_errors",
    "lti_comparison",
    "from_simulation",
    "decoy_comparison",
    "glue_values",
]

HANKEL_REL_TOL = 1e-8
"""Largest relative difference between ACE's and the Hankel singular values the tests accept."""
ANGLE_TOL_RAD = 1e-6
"""Largest principal angle (rad) between the ACE core and balanced truncation the tests accept."""
ENERGY = 0.99
"""Energy threshold quoted for the linear system."""


ARROW_SD = 2.5  # the figure draws each direction as an arrow this many standard deviations long


@dataclass(frozen=True)
class AceMethodParams:
    """The chapter's parameters (see its ``parameters`` cell for their meaning)."""

    n_states: int = 12
    n_inputs: int = 2
    n_outputs: int = 2
    spectral_radius: float = 0.9
    rank: int = 4
    seed: int = 0
    sim_steps: tuple[int, ...] = (1000, 10000, 100000)
    sim_repeats: int = 8
    n_jacobian_samples: int = 16
    pca_dim: int = 6
    pca_samples: int = 4000
    pca_signal_std: float = 0.3
    pca_nuisance_std: float = 3.0
    pca_decorrelate: bool = True

    def __post_init__(self):
        object.__setattr__(self, "sim_steps", tuple(int(n) for n in self.sim_steps))
        check_settings(
            "AceMethodParams",
            integers={
                **{k: getattr(self, k) for k in ("n_states", "n_inputs", "n_outputs", "rank", "sim_repeats")},
                **{k: getattr(self, k) for k in ("n_jacobian_samples", "pca_dim", "pca_samples")},
                **{f"sim_steps[{i}]": n for i, n in enumerate(self.sim_steps)},
            },
            positive={"spectral_radius": self.spectral_radius, "pca_signal_std": self.pca_signal_std},
            non_negative={"pca_nuisance_std": self.pca_nuisance_std},
        )
        if not self.sim_steps:
            raise ValueError("AceMethodParams: sim_steps must list at least one simulation length.")
        if self.rank > self.n_states:
            raise ValueError(f"AceMethodParams: rank ({self.rank}) cannot exceed n_states ({self.n_states}).")

        check_seed("AceMethodParams", "seed", self.seed)
        if not is_number(self.spectral_radius) or not self.spectral_radius < 1:
            raise ValueError(
                f"AceMethodParams: spectral_radius must be below 1 (a stable system, whose Gramians exist), "
                f"got {self.spectral_radius!r}."
            )

    @classmethod
    def from_namespace(cls, namespace: dict) -> AceMethodParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class LTIComparison:
    """ACE from a linear system's Gramians against balanced truncation (:func:`lti_comparison`).

    Attributes:
        params: the chapter's parameters.
        system: the matrices ``(A, B, C)``: (n, n), (n, inputs), (outputs, n).
        observability_gramian: ``W_o``, (n, n).
        hankel: (n,) Hankel singular values by the square-root method, largest first.
        ace: (n,) ACE's singular values from the two Gramians, largest first.
        truncation_basis: (n, rank) orthonormal basis of balanced truncation's subspace.
        hankel_rel_err: largest relative difference of ``ace`` from ``hankel``.
        angle_scipy: largest principal angle (radians) between ACE's and truncation's
            rank-``rank`` subspaces, by scipy.
        angle_corelib: the same angle by :func:`corelib.compare.principal_angles` (radians).
        eig_route_rel_err: largest relative difference of ``sqrt(eig(Wc Wo))`` from ``hankel``.
    """

    params: AceMethodParams
    system: tuple[np.ndarray, np.ndarray, np.ndarray]
    observability_gramian: np.ndarray
    hankel: np.ndarray
    ace: np.ndarray
    truncation_basis: np.ndarray
    hankel_rel_err: float
    angle_scipy: float
    angle_corelib: float
    eig_route_rel_err: float


@dataclass(frozen=True)
class SimulationResult:
    """ACE from simulated states of the same system, per trajectory length (:func:`from_simulation`).

    Attributes:
        params: the chapter's parameters (``sim_steps`` are the lengths).
        horizon: the steps of the output Jacobian, enough for the Gramian's tail to fall below 1e-12.
        errors: per length, the largest relative error of the top-``rank`` singular values
            against the Hankel ones (root mean square over the ``sim_repeats`` runs).
        angles: per length, the largest principal angle to balanced truncation, in degrees
            (root mean square over the runs).
        horizon_tail: the observability Gramian's remainder beyond ``horizon``, relative to it.
    """

    params: AceMethodParams
    horizon: int
    errors: list[float]
    angles: list[float]
    horizon_tail: float


@dataclass(frozen=True)
class DecoyComparison:
    """ACE and PCA on activations whose loudest direction the read-out ignores (:func:`decoy_comparison`).

    Attributes:
        params: the chapter's parameters.
        activations: (pca_samples, pca_dim) the activations.
        axes: (pca_dim, pca_dim) their axes as columns; the read-out's is the last.
        readout_values: (pca_samples,) the read-out of each activation, in (-1, 1).
        ace_direction, pca_direction: (pca_dim,) the leading ACE and PCA directions.
        ace_rank: ACE's energy rank (99 % of the energy).
        angle_ace, angle_pca: the angle of each leading direction to the read-out's, in degrees.
        ks: (pca_dim,) the numbers of kept directions, 1 ... pca_dim.
        r2_ace, r2_pca: per ``k``, the read-out's R² after keeping the top-k ACE or PCA directions.
        pca_k_needed: the fewest PCA directions that keep R² above 0.99.
    """

    params: AceMethodParams
    activations: np.ndarray
    axes: np.ndarray
    readout_values: np.ndarray
    ace_direction: np.ndarray
    pca_direction: np.ndarray
    ace_rank: int
    angle_ace: float
    angle_pca: float
    ks: np.ndarray
    r2_ace: list[float]
    r2_pca: list[float]
    pca_k_needed: int


def simulated_core_errors(
    A,
    B,
    C,
    *,
    rank: int,
    reference_sv,
    reference_basis,
    sim_steps: Sequence[int],
    n_runs: int,
    n_jacobians: int,
    seed: int,
    horizon: int,
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
    dim: int,
    n: int,
    *,
    loud_std: float,
    quiet_std: float,
    seed: int,
    decorrelate: bool = True,
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
    kept = Core(basis=np.asarray(basis), singular_values=np.ones(np.shape(basis)[1]), mean=np.asarray(mean))
    y, y_kept = f(H), f(kept.keep(H, centered=True))
    return float(1.0 - np.sum((y - y_kept) ** 2) / np.sum((y - y.mean()) ** 2))


def lti_comparison(params: AceMethodParams) -> LTIComparison:
    """ACE from the Gramians of a random stable system against balanced truncation.

    Returns the system, both sets of singular values, their largest relative difference, the
    largest principal angle between the two rank-``rank`` subspaces (by scipy and by corelib),
    and the error of the textbook route ``sqrt(eig(Wc Wo))`` (:class:`LTIComparison`).
    """
    system = random_stable_system(
        params.n_states, params.n_inputs, params.n_outputs, seed=params.seed, spectral_radius=params.spectral_radius
    )
    wc, wo = gramians(*system)  # scipy.linalg.solve_discrete_lyapunov
    hsv = hankel_singular_values(*system)  # square-root method, Cholesky factors
    truncation = balanced_truncation(*system, params.rank)
    core = from_moments(wc, wo, rank=params.rank, eps=0)  # ACE: eigh factors, no jitter
    eig_route = np.sort(np.sqrt(np.abs(np.linalg.eigvals(wc @ wo))))[::-1]
    return LTIComparison(
        params=params,
        system=tuple(system),
        observability_gramian=wo,
        hankel=hsv,
        ace=core.singular_values,
        truncation_basis=truncation.basis,
        hankel_rel_err=float(np.max(np.abs(core.singular_values - hsv) / hsv)),
        angle_scipy=float(np.max(scipy.linalg.subspace_angles(core.basis, truncation.basis))),
        angle_corelib=float(np.radians(np.max(principal_angles(core.basis, truncation.basis)))),
        eig_route_rel_err=float(np.max(np.abs(eig_route - hsv) / hsv)),
    )


def from_simulation(lti: LTIComparison) -> SimulationResult:
    """ACE from simulated states of the system of :func:`lti_comparison`, per trajectory length.

    The relevance is the exact Jacobian of the outputs over a horizon long enough that the
    observability Gramian's tail is below 1e-12 of it (``horizon_tail`` is the actual remainder).
    """
    params, (a, b, c) = lti.params, lti.system
    horizon = int(np.ceil(np.log(1e-12) / np.log(params.spectral_radius)))
    o_mat = observability_matrix(a, c, horizon)
    wo = lti.observability_gramian
    errors, angles = simulated_core_errors(
        a,
        b,
        c,
        rank=params.rank,
        reference_sv=lti.hankel,
        reference_basis=lti.truncation_basis,
        sim_steps=params.sim_steps,
        n_runs=params.sim_repeats,
        n_jacobians=params.n_jacobian_samples,
        seed=params.seed,
        horizon=horizon,
    )
    return SimulationResult(
        params=params,
        horizon=horizon,
        errors=errors,
        angles=angles,
        horizon_tail=float(np.linalg.norm(o_mat.T @ o_mat - wo) / np.linalg.norm(wo)),
    )


def decoy_comparison(params: AceMethodParams) -> DecoyComparison:
    """ACE and PCA on activations whose loudest direction the read-out ignores.

    The read-out is a squashed projection on the quietest axis. Returns the activations, the
    read-out direction, both leading directions and their angles to it (degrees), and the R^2 of
    the read-out after keeping the top-k ACE or PCA directions, for every k.
    """
    h, axes = decoy_activations(
        params.pca_dim,
        params.pca_samples,
        loud_std=params.pca_nuisance_std,
        quiet_std=params.pca_signal_std,
        seed=params.seed,
        decorrelate=params.pca_decorrelate,
    )
    readout = _squashed_readout(axes[:, -1], h.mean(axis=0), params.pca_signal_std)
    jac = jacobians(readout, torch.from_numpy(h))  # (N, 1, D)
    ace = extract(h, jac)  # rank by the default 99 % energy
    pca = pca_basis(h, 1)
    ks = np.arange(1, params.pca_dim + 1)
    r2_pca = [keep_r2(readout, h, pca_basis(h, k), h.mean(axis=0)) for k in ks]
    r2_ace = [keep_r2(readout, h, extract(h, jac, rank=int(k)).basis, h.mean(axis=0)) for k in ks]
    survives = np.asarray(r2_pca) > 0.99
    return DecoyComparison(
        params=params,
        activations=h,
        axes=axes,
        readout_values=readout(h),
        ace_direction=ace.basis[:, 0],
        pca_direction=pca[:, 0],
        ace_rank=int(ace.rank),
        angle_ace=float(principal_angles(ace.basis[:, :1], axes[:, -1:])[0]),
        angle_pca=float(principal_angles(pca, axes[:, -1:])[0]),
        ks=ks,
        r2_ace=r2_ace,
        r2_pca=r2_pca,
        pca_k_needed=int(ks[np.argmax(survives)]) if survives.any() else int(params.pca_dim),
    )


def _squashed_readout(direction: np.ndarray, mean: np.ndarray, scale: float) -> Callable:
    """``tanh((h - mean) . direction / scale)``, on numpy arrays or torch tensors."""
    direction_t, mean_t = torch.from_numpy(direction), torch.from_numpy(mean)

    def readout(h):
        if isinstance(h, torch.Tensor):
            return torch.tanh((h - mean_t) @ direction_t / scale)
        return np.tanh((h - mean) @ direction / scale)

    return readout


def glue_values(lti: LTIComparison, simulation: SimulationResult, decoy: DecoyComparison) -> dict[str, object]:
    """Every value the chapter's prose quotes, by glue name."""
    params = lti.params
    ratio = params.pca_nuisance_std / params.pca_signal_std
    return {
        "hankel_rel_tol": HANKEL_REL_TOL,
        "angle_tol_rad": ANGLE_TOL_RAD,
        # the relative jitter corelib.ace.extract adds by default, which the chapter describes
        "extract_eps": inspect.signature(extract).parameters["eps"].default,
        "n_states": params.n_states,
        "n_inputs": params.n_inputs,
        "n_outputs": params.n_outputs,
        "rank": params.rank,
        "spectral_radius": float(params.spectral_radius),
        "hankel_rel_err": lti.hankel_rel_err,
        "angle_scipy": lti.angle_scipy,
        "angle_corelib": lti.angle_corelib,
        "hsv_ratio": float(lti.hankel[0] / lti.hankel[-1]),
        "energy": ENERGY,
        "lti_energy_rank": int(energy_rank(lti.hankel, ENERGY)),
        "eig_route_rel_err": lti.eig_route_rel_err,
        "horizon": simulation.horizon,
        "horizon_tail": simulation.horizon_tail,
        "n_jacobian_samples": params.n_jacobian_samples,
        "sim_n_max": max(params.sim_steps),
        "sim_n_min": min(params.sim_steps),
        "sim_repeats": params.sim_repeats,
        "data_err_max_n": simulation.errors[-1],
        "data_angle_max_n": simulation.angles[-1],
        "data_err_min_n": simulation.errors[0],
        "pca_dim": params.pca_dim,
        "pca_samples": params.pca_samples,
        "spread_ratio": float(ratio),
        "variance_ratio": float(ratio**2),
        "ace_toy_rank": decoy.ace_rank,
        "angle_ace_w": decoy.angle_ace,
        "angle_pca_w": decoy.angle_pca,
        # Rounded to the 3 decimals shown (adding 0.0 turns a rounded -0.0 into 0.0).
        "r2_ace_1": round(decoy.r2_ace[0], 3) + 0.0,
        "r2_pca_1": round(decoy.r2_pca[0], 3) + 0.0,
        "pca_k_needed": decoy.pca_k_needed,
        "arrow_sd": ARROW_SD,
    }
