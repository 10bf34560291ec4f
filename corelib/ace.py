"""Algorithmic Core Extraction (ACE): activity x relevance balanced SVD.

Given activations ``h`` (N x D) at a layer and Jacobians ``J_i = df/dh (h_i)`` (K x D) of a
task-relevant read-out ``f``, ACE finds the directions that are both *active* (the activations
vary along them) and *relevant* (the read-out is sensitive to them). With

* activity  ``A = Hc^T Hc / (N - 1)``  (covariance of the centred activations), and
* relevance ``S = mean_i J_i^T J_i``,

take square-root factors ``A + eps I = L L^T`` and ``S = G G^T`` and the SVD ``L^T G = U Sigma V^T``.
The core is ``span(L U_r)``; its singular values ``Sigma`` rank directions by joint activity and
relevance. For a linear system with activity = reachability Gramian and relevance = observability
Gramian this is exactly balanced truncation and ``Sigma`` are the Hankel singular values.

Everything is accumulated in float64 and costs O(D^2) memory regardless of N or the number of
Jacobians (see :class:`MomentAccumulator`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import untrusted
from ._checks import as_matrix, check_energy, check_rank, is_whole
from .hooks import CoreHooks, intervention_hook, nearest_names

__all__ = [
    "Core",
    "CoreHooks",
    "MomentAccumulator",
    "energy_rank",
    "extract",
    "extract_from_model",
    "from_moments",
    "jacobians",
    "sqrt_factor",
]


@dataclass(frozen=True)
class Core:
    """An algorithmic core: an r-dimensional subspace of a D-dimensional activation space.

    Attributes:
        basis: (D, r) matrix with orthonormal columns spanning the core.
        singular_values: all D activity x relevance singular values, descending.
        mean: (D,) mean activation of the data the core was extracted from; used by centred
            interventions and by :meth:`coords`.
        metadata: where the core comes from (model, hook, positions, energy, a fingerprint of
            the data, ...): JSON values, kept by :meth:`save` and :meth:`load`.
    """

    basis: np.ndarray
    singular_values: np.ndarray
    mean: np.ndarray
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def rank(self) -> int:
        """Dimension r of the core."""
        return int(self.basis.shape[1])

    @property
    def dim(self) -> int:
        """Dimension D of the activation space."""
        return int(self.basis.shape[0])

    @property
    def projector(self) -> np.ndarray:
        """Orthogonal projector ``P = Q Q^T`` onto the core (D x D)."""
        return self.basis @ self.basis.T

    @property
    def spectral_gap(self) -> float:
        """``(s1 / s2)^2``: how strongly the leading direction dominates the next one."""
        s = self.singular_values
        return float((s[0] / s[1]) ** 2) if len(s) > 1 and s[1] > 0 else float("inf")

    def _prep(self, h):
        """Return ``(h, basis, mean)`` in h's array type (torch tensor on h's device, or numpy)."""
        if isinstance(h, torch.Tensor):
            q = torch.as_tensor(self.basis, dtype=h.dtype, device=h.device)
            mu = torch.as_tensor(self.mean, dtype=h.dtype, device=h.device)
            return h, q, mu
        h = np.asarray(h, dtype=np.float64)
        return h, self.basis, self.mean

    def _check_dim(self, h) -> None:
        # An integer tensor would turn the basis into integers too (zeros): refuse it.
        if isinstance(h, torch.Tensor) and not h.is_floating_point():
            raise TypeError(
                f"activations must be a floating-point tensor, got {h.dtype}; convert them first, e.g. h.float()."
            )
        if h.shape[-1] != self.dim:
            raise ValueError(f"activations have last dimension {h.shape[-1]} but the core lives in D={self.dim}.")

    def coords(self, h, centered: bool = True):
        """Core coordinates ``z = Q^T (h - mean)`` (or ``Q^T h`` if not centred), shape (..., r)."""
        self._check_dim(h)
        h, q, mu = self._prep(h)
        return ((h - mu) if centered else h) @ q

    def _project(self, h, centered: bool):
        h, q, mu = self._prep(h)
        x = (h - mu) if centered else h
        return (x @ q) @ q.T

    def keep(self, h, centered: bool = False):
        """Core-only activations: ``P h``, or ``mu + P (h - mu)`` when centred."""
        self._check_dim(h)
        h, _, mu = self._prep(h)
        p = self._project(h, centered)
        return p + mu if centered else p

    def remove(self, h, centered: bool = False):
        """Core-removed activations: ``h - P h``, or ``h - P (h - mu)`` when centred."""
        self._check_dim(h)
        return h - self._project(h, centered)

    def flip(self, h, centered: bool = False):
        """Reflect the core component: ``h - 2 P h``, or ``h - 2 P (h - mu)`` when centred."""
        self._check_dim(h)
        return h - 2 * self._project(h, centered)

    def truncate(self, rank: int) -> Core:
        """The same core restricted to its leading ``rank`` directions."""
        check_rank(rank, self.rank, "rank of this core")
        meta = {**self.metadata, "rank": rank} if "rank" in self.metadata else dict(self.metadata)
        return replace(self, basis=self.basis[:, :rank], metadata=meta)

    def hooks(self, hook_name: str, mode: str = "remove", *, centered: bool = False, positions="all") -> CoreHooks:
        """The intervention ``mode`` (``"keep"``, ``"remove"`` or ``"flip"``) at ``hook_name``.

        The result is a ``fwd_hooks`` list for ``model.run_with_hooks(x, fwd_hooks=...)``
        (TransformerLens hook names), and ``with core.hooks("model.layers.3", "flip").on(model):``
        applies it to the output of that submodule of a plain ``nn.Module`` (e.g. a Hugging Face
        model). ``centered`` and ``positions`` are those of :func:`corelib.hooks.intervention_hook`.
        """
        return CoreHooks([(hook_name, intervention_hook(self, mode, centered=centered, positions=positions))])

    def save(self, path: str | Path) -> Path:
        """Write the core to the folder ``path``: arrays as safetensors, metadata as JSON, both
        recorded with their SHA-256 (nothing is pickled). The JSON also holds the arrays' shapes,
        dtype and digest, so that :meth:`load` refuses arrays of another core. Returns the folder."""
        from .results import save_json, save_tensors

        try:
            json.dumps(self.metadata)
        except TypeError as err:
            raise TypeError(f"core metadata must be JSON values (str, numbers, lists, dicts): {err}") from None
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {k: np.ascontiguousarray(getattr(self, k), dtype=np.float64) for k in _ARRAYS}
        save_tensors(folder / "core.safetensors", {k: torch.from_numpy(v) for k, v in arrays.items()})
        described = {
            "shapes": {k: list(v.shape) for k, v in arrays.items()},
            "dtype": str(np.asarray(self.basis).dtype),
            "sha256": _arrays_digest(arrays),
        }
        save_json(folder / "core.json", {"format": CORE_FORMAT, "metadata": self.metadata, "arrays": described})
        return folder

    @classmethod
    def load(cls, path: str | Path) -> Core:
        """Read a core written by :meth:`save`, as a file from elsewhere (:mod:`corelib.untrusted`):
        no symbolic link is followed and nothing is written; the files must match their manifest, the
        arrays must be finite with an orthonormal basis and descending non-negative singular values,
        and they must be the arrays ``core.json`` describes (cores saved before it described them
        are checked without that)."""
        from .results import StoreError

        folder = Path(path)
        if not (folder / "core.json").exists() and not (folder / "core.json").is_symlink():
            raise StoreError(f"{folder} holds no saved core (no core.json); write one with Core.save({str(path)!r}).")
        try:
            meta, arrays = _read_core(folder)
            _check_core_arrays(arrays, meta.get("arrays"), meta["metadata"])
        except untrusted.UntrustedError as exc:
            raise StoreError(f"refused the core in {folder}: {exc} Save it again with Core.save.") from None
        return cls(arrays["basis"], arrays["singular_values"], arrays["mean"], meta["metadata"])


_ARRAYS = ("basis", "singular_values", "mean")
MAX_CORE_BYTES = 1 << 30  # a full D x D float64 basis of D = 8192 is 512 MiB


def _arrays_digest(arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of a core's float64 arrays, with their names and shapes."""
    digest = hashlib.sha256()
    for name in _ARRAYS:
        a = np.ascontiguousarray(arrays[name], dtype=np.float64)
        digest.update(f"{name}:{a.shape}:".encode())
        digest.update(a.tobytes())
    return digest.hexdigest()


def _read_core(folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """``core.json`` and the arrays of ``core.safetensors``, read as untrusted files."""
    from safetensors.numpy import load as st_load

    files = untrusted.read_manifest(folder, "Core.load")
    raw = untrusted.read_stored(folder / "core.json", limit=MAX_CORE_BYTES, what="Core.load", files=files)
    meta = untrusted.load_json(raw, str(folder / "core.json"), constants=True)  # metadata may hold NaN
    if not isinstance(meta, dict) or meta.get("format") != CORE_FORMAT:
        raise untrusted.UntrustedError(f"{folder / 'core.json'} is not a core of format {CORE_FORMAT!r}.")
    if not isinstance(meta.get("metadata"), dict):
        raise untrusted.UntrustedError(
            f"{folder / 'core.json'} has no metadata object; it was not written by Core.save."
        )
    data = untrusted.read_stored(folder / "core.safetensors", limit=MAX_CORE_BYTES, what="Core.load", files=files)
    try:
        tensors = st_load(data)
    except Exception as err:  # noqa: BLE001 - any parse failure means the file is unusable
        raise untrusted.UntrustedError(
            f"{folder / 'core.safetensors'} is not a readable safetensors file ({err})."
        ) from None
    if set(tensors) != set(_ARRAYS) or not all(np.issubdtype(t.dtype, np.floating) for t in tensors.values()):
        found = {k: str(v.dtype) for k, v in tensors.items()}
        raise untrusted.UntrustedError(f"{folder / 'core.safetensors'} holds {found}, not a core's float arrays.")
    return meta, {k: tensors[k].astype(np.float64) for k in _ARRAYS}


def _check_core_arrays(arrays: dict[str, np.ndarray], described: object, metadata: dict) -> None:
    """Refuse arrays that no :meth:`Core.save` writes: inconsistent shapes, NaN/Inf, a basis that is
    not orthonormal (to a tolerance of the dtype it was saved from), singular values negative or not
    descending, or not the arrays ``described`` (shapes, digest) and ``metadata`` (rank) name."""
    basis, sv, mean = (arrays[k] for k in _ARRAYS)
    if basis.ndim != 2 or not 1 <= basis.shape[1] <= basis.shape[0] or mean.shape != (basis.shape[0],):
        raise untrusted.UntrustedError(f"inconsistent core arrays: basis {basis.shape}, mean {mean.shape}.")
    if sv.ndim != 1 or not basis.shape[1] <= len(sv) <= basis.shape[0]:
        raise untrusted.UntrustedError(
            f"the core has {len(sv)} singular values for a basis {basis.shape}; it needs between r and D."
        )
    bad = [k for k in _ARRAYS if not np.all(np.isfinite(arrays[k]))]
    if bad:
        raise untrusted.UntrustedError(f"the core's {', '.join(bad)} hold NaN/Inf values.")
    if np.any(sv < 0) or np.any(np.diff(sv) > 0):
        raise untrusted.UntrustedError("the singular values must be non-negative and sorted in descending order.")
    # The basis may have been computed in a coarser dtype than the float64 it is saved in; cores
    # saved without their dtype are given float32's tolerance, the coarsest the book computes in.
    dtype = described.get("dtype", "float32") if isinstance(described, dict) else "float32"
    eps = float(np.finfo(np.dtype(dtype) if dtype in ("float16", "float32", "float64") else np.float32).eps)
    error = float(np.abs(basis.T @ basis - np.eye(basis.shape[1])).max())
    if error > 10 * eps * basis.shape[0]:
        raise untrusted.UntrustedError(
            f"the basis is not orthonormal (|Q^T Q - I| reaches {error:.3g}, allowed {10 * eps * basis.shape[0]:.3g})."
        )
    if described is not None:
        _check_described(arrays, described)
    if isinstance(metadata.get("rank"), int) and metadata["rank"] != basis.shape[1]:
        raise untrusted.UntrustedError(f"the metadata gives rank {metadata['rank']}, the basis has {basis.shape[1]}.")


def _check_described(arrays: dict[str, np.ndarray], described: object) -> None:
    """The arrays are those ``core.json`` describes: their shapes, then their digest."""
    if not isinstance(described, dict) or not isinstance(described.get("shapes"), dict):
        raise untrusted.UntrustedError(f"core.json's 'arrays' entry is malformed: {described!r:.200}.")
    shapes = {k: list(v.shape) for k, v in arrays.items()}
    if described["shapes"] != shapes:
        raise untrusted.UntrustedError(f"the arrays have shapes {shapes}, core.json describes {described['shapes']}.")
    if described.get("sha256") != _arrays_digest(arrays):
        raise untrusted.UntrustedError(
            "the arrays are not those core.json describes (digest mismatch): they belong to another core."
        )


CORE_FORMAT = "ace-core-1"


def energy_rank(singular_values, threshold: float = 0.99) -> int:
    """Smallest r whose leading squared singular values hold ``threshold`` of the total energy."""
    check_energy(threshold)
    s = np.asarray(singular_values, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty 1-D array, got shape {s.shape}.")
    if np.any(s < 0) or not np.all(np.isfinite(s)):
        raise ValueError("singular_values must be finite and non-negative.")
    energy = s**2
    total = energy.sum()
    if total == 0:
        raise ValueError("all singular values are zero: activity and relevance share no direction.")
    share = np.cumsum(energy) / total
    # Tolerance guards against share[-1] = 0.9999999999 when threshold = 1.
    return int(np.searchsorted(share, threshold - 1e-12) + 1)


def sqrt_factor(m: np.ndarray, eps: float = 0.0) -> np.ndarray:
    """A square-root factor ``F`` with ``F F^T = m + eps * trace(m)/D * I`` (symmetric PSD ``m``).

    Uses ``eigh``; eigenvalues below zero (round-off of a PSD matrix) are set to zero.
    """
    d = m.shape[0]
    jitter = eps * np.trace(m) / d
    w, v = np.linalg.eigh((m + m.T) / 2 + jitter * np.eye(d))
    return v * np.sqrt(np.maximum(w, 0.0))


def _check_square(m, name: str, d: int | None = None) -> np.ndarray:
    m = as_matrix(m, name)
    if m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be square (D x D), got shape {m.shape}.")
    if d is not None and m.shape[0] != d:
        raise ValueError(f"{name} is {m.shape[0]}x{m.shape[0]} but activity is {d}x{d}.")
    return m


def from_moments(
    activity,
    relevance,
    *,
    rank: int | None = None,
    energy: float = 0.99,
    eps: float = 1e-8,
    mean=None,
) -> Core:
    """Extract a core from the two D x D moment matrices.

    Args:
        activity: covariance of the activations (D x D).
        relevance: mean of ``J^T J`` over sampled Jacobians (D x D).
        rank: core dimension; if None, chosen by :func:`energy_rank` with ``energy``.
        energy: energy threshold in (0, 1] used when ``rank`` is None.
        eps: relative jitter ``eps * trace / D`` added to both matrices before factorisation.
        mean: (D,) activation mean stored on the core (zeros if None).
    """
    a = _check_square(activity, "activity")
    d = a.shape[0]
    s = _check_square(relevance, "relevance", d)
    check_energy(energy)
    if eps < 0:
        raise ValueError(f"eps must be non-negative, got {eps}.")
    l_act = sqrt_factor(a, eps)
    g_rel = sqrt_factor(s, eps)
    u, sigma, _ = np.linalg.svd(l_act.T @ g_rel)
    r = energy_rank(sigma, energy) if rank is None else check_rank(rank, d)
    q, _ = np.linalg.qr(l_act @ u[:, :r])
    mu = np.zeros(d) if mean is None else as_matrix(mean, "mean", ndim=1)
    if mu.shape != (d,):
        raise ValueError(f"mean must have shape ({d},), got {mu.shape}.")
    return Core(basis=q, singular_values=sigma, mean=mu)


class MomentAccumulator:
    """Streaming float64 accumulator of activity and relevance moments, O(D^2) memory.

    Feed activations and Jacobians in batches of any size, in any order; call :meth:`core`.
    The covariance uses a shifted sum (shift = first batch's mean) so that large activation
    offsets do not cost precision. ``device``: where the sums live and the batch products run
    (e.g. the GPU that computed the batches, so that large-D Jacobians never leave it; MPS has no
    float64, so it accumulates on the CPU); default the CPU.
    """

    def __init__(self, d: int, device: torch.device | str | None = None):
        if int(d) != d or d < 1:
            raise ValueError(f"d must be a positive integer, got {d}.")
        self.d = int(d)
        device = torch.device(device) if device is not None else torch.device("cpu")
        self.device = torch.device("cpu") if device.type == "mps" else device
        self.n = 0
        self.n_jac = 0
        self._shift: torch.Tensor | None = None
        zeros = partial(torch.zeros, dtype=torch.float64, device=self.device)
        self._sum = zeros(self.d)
        self._outer = zeros(self.d, self.d)
        self._jtj = zeros(self.d, self.d)

    def _batch(self, x, name: str, ndim: int) -> torch.Tensor:
        """A batch as float64 on the accumulator's device, checked (shape, finite) on arrival."""
        if isinstance(x, torch.Tensor):
            t = x.detach().to(self.device).to(torch.float64)  # move first: MPS has no float64
            if t.ndim != ndim or t.numel() == 0:
                raise ValueError(f"{name} must have {ndim} dimensions and be non-empty, got shape {tuple(t.shape)}.")
            bad = int((~torch.isfinite(t)).sum())
            if bad:
                raise ValueError(
                    f"{name} contains {bad} NaN/Inf values; check the model or the inputs that produced it "
                    "(e.g. a diverged training run) before extracting a core."
                )
            return t
        return torch.from_numpy(as_matrix(x, name, ndim=ndim)).to(self.device)

    def update(self, h_batch=None, j_batch=None) -> MomentAccumulator:
        """Add a batch of activations (n, D) and/or Jacobians (m, K, D) or (m, D) (numpy or torch)."""
        if h_batch is not None:
            h = self._batch(h_batch, "activations", 2)
            if h.shape[1] != self.d:
                raise ValueError(f"activations have D={h.shape[1]}, accumulator expects {self.d}.")
            if self._shift is None:
                self._shift = h.mean(dim=0)
            x = h - self._shift
            self._sum += x.sum(dim=0)
            self._outer += x.T @ x
            self.n += h.shape[0]
        if j_batch is not None:
            j = j_batch if isinstance(j_batch, torch.Tensor) else np.asarray(j_batch)
            if j.ndim == 2:
                j = j[:, None, :]
            j = self._batch(j, "Jacobians", 3)
            if j.shape[2] != self.d:
                raise ValueError(f"Jacobians have D={j.shape[2]}, accumulator expects {self.d}.")
            flat = j.reshape(-1, self.d)
            self._jtj += flat.T @ flat
            self.n_jac += j.shape[0]
        return self

    @property
    def mean(self) -> np.ndarray:
        """Mean of the activations seen so far."""
        self._require()
        return (self._shift + self._sum / self.n).cpu().numpy()

    @property
    def activity(self) -> np.ndarray:
        """Covariance of the activations seen so far, ``Hc^T Hc / (N - 1)``."""
        self._require()
        centred_sum = self._outer - torch.outer(self._sum, self._sum) / self.n
        return (centred_sum / (self.n - 1)).cpu().numpy()

    @property
    def relevance(self) -> np.ndarray:
        """Mean of ``J^T J`` over the Jacobians seen so far."""
        if self.n_jac == 0:
            raise ValueError("no Jacobians accumulated: call update(j_batch=...) first.")
        return (self._jtj / self.n_jac).cpu().numpy()

    @property
    def has_relevance(self) -> bool:
        """Whether any Jacobian seen so far is non-zero."""
        return bool(self._jtj.any())

    def _require(self) -> None:
        if self.n < 2:
            raise ValueError(f"need at least 2 activations for a covariance, have {self.n}.")

    def core(self, *, rank: int | None = None, energy: float = 0.99, eps: float = 1e-8) -> Core:
        """The core of everything accumulated so far (see :func:`from_moments`)."""
        return from_moments(self.activity, self.relevance, rank=rank, energy=energy, eps=eps, mean=self.mean)


def extract(H, J, *, rank: int | None = None, energy: float = 0.99, eps: float = 1e-8) -> Core:
    """Extract a core from activations ``H`` (N, D) and Jacobians ``J`` (M, K, D)."""
    h = as_matrix(H, "activations H")
    j = as_matrix(J, "Jacobians J", ndim=3)
    if j.shape[2] != h.shape[1]:
        raise ValueError(
            f"Jacobians have D={j.shape[2]} but activations have D={h.shape[1]}; they must "
            "be taken with respect to the same layer."
        )
    return MomentAccumulator(h.shape[1]).update(h, j).core(rank=rank, energy=energy, eps=eps)


def jacobians(
    f: Callable[[torch.Tensor], torch.Tensor],
    H,
    *,
    n_samples: int | None = None,
    seed: int = 0,
    batch_size: int = 256,
) -> torch.Tensor:
    """Jacobians of ``f: R^D -> R^K`` at ``n_samples`` rows of ``H`` drawn without replacement.

    ``f`` takes a single activation vector (D,) and returns (K,); it is vectorised with
    ``torch.func.vmap(jacrev(f))`` and evaluated in batches. Returns a float64 tensor (M, K, D)
    on the CPU. ``n_samples=None`` uses every row, in order.
    """
    h = torch.as_tensor(H)
    if h.ndim != 2 or h.shape[0] == 0:
        raise ValueError(f"H must be a non-empty (N, D) matrix, got shape {tuple(h.shape)}.")
    if not torch.isfinite(h).all():
        raise ValueError("H contains NaN/Inf values; Jacobians would be meaningless.")
    n = h.shape[0]
    if n_samples is None:
        idx = torch.arange(n)
    else:
        if int(n_samples) != n_samples or not (1 <= n_samples <= n):
            raise ValueError(f"n_samples must be an integer in [1, {n}] (rows of H), got {n_samples}.")
        gen = torch.Generator().manual_seed(int(seed))
        idx = torch.randperm(n, generator=gen)[: int(n_samples)]
    jac = torch.func.vmap(torch.func.jacrev(f))
    out = [jac(h[idx[i : i + batch_size]]).detach().cpu().double() for i in range(0, len(idx), batch_size)]
    j = torch.cat(out)
    return j[:, None, :] if j.ndim == 2 else j


def _check_token_ids(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Integer inputs of a model with one token embedding must be ids in [0, vocabulary)."""
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    ids = {k: t for k, t in tensors.items() if k in ("", "input_ids") and not t.is_floating_point() and t.numel()}
    if not embeddings or not ids:
        return
    vocab = embeddings[0].num_embeddings
    for k, t in ids.items():
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi >= vocab:
            raise ValueError(
                f"{'inputs' if not k else k} holds token ids from {lo} to {hi}; the model's vocabulary has {vocab} "
                f"tokens (ids 0 to {vocab - 1}). Tokenize with the model's own tokenizer."
            )


def extract_from_model(
    model: torch.nn.Module,
    hook_name: str | Sequence[str],
    inputs,
    target: Callable[[Any], torch.Tensor],
    *,
    positions="last",
    n_jacobians: int | None = None,
    seed: int = 0,
    batch_size: int = 64,
    energy: float = 0.99,
    rank: int | None = None,
    eps: float = 1e-8,
    device=None,
) -> Core | dict[str, Core]:
    """ACE on a model in one call: the core of the activation at ``hook_name`` for the read-out ``target``.

    Args:
        model: a TransformerLens-style model (``hook_name`` a hook point, e.g.
            ``"blocks.1.hook_resid_post"``), or any ``nn.Module`` (``hook_name`` the path of a
            submodule whose output, or its first element, is the activation, e.g. ``"model.layers.12"``).
        hook_name: one hook, or several: then every hook's relevance comes from the same
            backward passes and the result is ``{hook: Core}``.
        inputs: a tensor whose first dimension indexes examples (e.g. token ids (N, T)), or a
            mapping of such tensors passed as keyword arguments (e.g. ``input_ids``, ``attention_mask``).
        target: ``target(output) -> (B, K)`` or ``(B,)``: the read-out whose sensitivity defines
            relevance, e.g. ``lambda out: out[:, -1]`` for last-position logits.
        positions: ``"last"``, or a (N,) tensor with the position of each example (e.g. its last
            real token under padding).
        n_jacobians: examples at which Jacobians are taken, drawn without replacement with
            ``seed`` as :func:`jacobians` draws them (None: every example).
        batch_size: examples per forward pass.
        device: where the input batches are sent (default: the device of the model's first
            parameter). The model is not moved: put it there first (``model.to(device)``), or
            leave ``device`` unset for a model spread over devices by ``device_map``.
        energy, rank, eps: as in :func:`from_moments`.

    Activations and Jacobians stream through a :class:`MomentAccumulator` per hook (memory
    O(D^2), whatever the number of examples). The Jacobian at a hook is the total derivative of
    the read-out, through every later layer: a zero vector added at the hook's position is
    differentiated, so hooks do not cut each other's paths. Examples must not interact within
    a batch (no batch norm), since each example's Jacobian is read off the gradient of the
    batch's sum.
    """
    hooks = _hook_names(hook_name)
    tensors = _input_tensors(inputs)
    n = _check_request(model, tensors, batch_size, positions, n_jacobians)
    run = _hooked_runner(model, hooks)
    device = torch.device(device) if device is not None else next(model.parameters()).device
    sampled = _jacobian_rows(n, n_jacobians, seed)
    accs: dict[str, MomentAccumulator] = {}
    for start in range(0, n, batch_size):
        rows = slice(start, min(start + batch_size, n))
        batch = {k: t[rows].to(device) for k, t in tensors.items()}
        _accumulate_batch(accs, run, batch, target, hooks, positions, rows, sampled[rows])
    cores = {}
    for h in hooks:
        core = _hook_core(accs[h], h, rank=rank, energy=energy, eps=eps)
        meta = _core_metadata(model, h, tensors, positions, sampled, seed)
        cores[h] = replace(core, metadata={**meta, "energy": energy if rank is None else None, "rank": core.rank})
    return cores[hook_name] if isinstance(hook_name, str) else cores


def _hook_names(hook_name: str | Sequence[str]) -> list[str]:
    """The requested hooks as a list of distinct names."""
    hooks = [hook_name] if isinstance(hook_name, str) else list(hook_name)
    if not hooks or not all(isinstance(h, str) for h in hooks) or len(set(hooks)) != len(hooks):
        raise ValueError(f"hook_name must be a hook name or a list of distinct ones, got {hook_name!r}.")
    return hooks


def _input_tensors(inputs) -> dict[str, torch.Tensor]:
    """The inputs as named tensors (``""`` for a single positional tensor); numpy arrays converted."""
    tensors = {"": inputs} if isinstance(inputs, (torch.Tensor, np.ndarray)) else dict(inputs)
    tensors = {k: torch.from_numpy(t) if isinstance(t, np.ndarray) else t for k, t in tensors.items()}
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        raise TypeError("inputs must be a tensor or a mapping of tensors (one row per example).")
    return tensors


def _check_request(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor], batch_size, positions, n_jacobians: int | None
) -> int:
    """Check the settings of :func:`extract_from_model` against its inputs; returns the number of examples."""
    if not is_whole(batch_size) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number of at least 1 (examples per pass), got {batch_size!r}.")
    _check_token_ids(model, tensors)
    sizes = {t.shape[0] for t in tensors.values()}
    if len(sizes) != 1:
        raise ValueError(f"the input tensors have different numbers of examples: {sorted(sizes)}.")
    n = sizes.pop()
    if n < 2:
        raise ValueError(f"need at least 2 examples for the activity covariance, got {n}.")
    _check_positions(positions, n)
    if n_jacobians is not None and not 1 <= int(n_jacobians) <= n:
        raise ValueError(f"n_jacobians must lie in [1, {n}] (the examples given), got {n_jacobians}.")
    return n


def _check_positions(positions, n: int) -> None:
    """``positions`` is ``"last"`` or an integer tensor with one position per example."""
    if isinstance(positions, torch.Tensor) and positions.shape != (n,):
        raise ValueError(f"positions must have shape ({n},), one per example, got {tuple(positions.shape)}.")
    if isinstance(positions, torch.Tensor) and (positions.is_floating_point() or positions.is_complex()):
        raise ValueError(f"positions must be whole token positions (an integer tensor), got dtype {positions.dtype}.")
    if not isinstance(positions, torch.Tensor) and positions != "last":
        raise ValueError(f"positions must be 'last' or a tensor of one position per example, got {positions!r}.")


def _jacobian_rows(n: int, n_jacobians: int | None, seed: int) -> torch.Tensor:
    """(n,) bool: the examples whose Jacobians are taken, drawn as :func:`jacobians` draws them."""
    if n_jacobians is None:
        return torch.ones(n, dtype=torch.bool)
    sampled = torch.zeros(n, dtype=torch.bool)
    sampled[torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))[: int(n_jacobians)]] = True
    return sampled


def _accumulate_batch(
    accs: dict[str, MomentAccumulator],
    run: Callable,
    batch: dict[str, torch.Tensor],
    target: Callable[[Any], torch.Tensor],
    hooks: list[str],
    positions,
    rows: slice,
    keep: torch.Tensor,
) -> None:
    """One forward pass of ``batch``: adds its activations at every hook to ``accs`` (created at
    the first batch), and the Jacobians of the rows ``keep`` of the read-out."""
    probes: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    with torch.enable_grad():
        y = target(run(batch, [(h, _probe(h, positions, rows, probes)) for h in hooks]))
        _check_pass(hooks, probes, y)
        for h in hooks:
            act = probes[h][0]
            # on a GPU the moments stay there: large-D Jacobians never cross to the host
            if h not in accs:
                accs[h] = MomentAccumulator(act.shape[-1], device=act.device if act.device.type == "cuda" else None)
            accs[h].update(h_batch=act)
        if keep.any():
            deltas = [probes[h][1] for h in hooks]
            for h, jac in zip(hooks, _batch_jacobians(y, deltas, rows, keep)):
                accs[h].update(j_batch=jac)


def _check_pass(hooks: list[str], probes: dict, y) -> None:
    """The forward pass reached every hook, and the read-out ``y`` is (B, K) or (B,) and depends on it."""
    missing = [h for h in hooks if h not in probes]
    if missing:
        raise ValueError(f"the forward pass never reached {missing}.")
    if not isinstance(y, torch.Tensor) or not y.requires_grad:
        raise ValueError(
            "the target does not depend on the model's output (it returned "
            f"{'a constant tensor' if isinstance(y, torch.Tensor) else type(y).__name__}): "
            "compute it from the output passed to it, e.g. lambda out: out[:, -1]."
        )
    if y.ndim > 2:  # flattening (B, T, K) would mix positions into one read-out
        raise ValueError(
            f"the target returned shape {tuple(y.shape)}; it must return (B, K) or (B,), one read-out per "
            "example: select a position, e.g. lambda out: out[:, -1] for the last position's logits."
        )


def _batch_jacobians(
    y: torch.Tensor, deltas: list[torch.Tensor], rows: slice, keep: torch.Tensor
) -> Iterator[torch.Tensor]:
    """The Jacobians (B_keep, K, D) of the read-out ``y`` with respect to each probe in ``deltas``,
    at the rows ``keep``, one hook at a time (each example's is read off the gradient of the sum)."""
    y = y[:, None] if y.ndim == 1 else y.reshape(y.shape[0], -1)
    if y.shape[0] != rows.stop - rows.start:
        raise ValueError(f"target returned {y.shape[0]} rows for a batch of {rows.stop - rows.start} examples.")
    per_output = [
        torch.autograd.grad(y[:, k].sum(), deltas, retain_graph=k + 1 < y.shape[1], allow_unused=True)
        for k in range(y.shape[1])
    ]
    for i, delta in enumerate(deltas):
        grads = [g[i] if g[i] is not None else torch.zeros_like(delta) for g in per_output]
        yield torch.stack(grads, dim=1)[keep.to(delta.device)]


def _hook_core(acc: MomentAccumulator, hook: str, *, rank: int | None, energy: float, eps: float) -> Core:
    """The core of one hook's moments, refused when the read-out never depends on that hook."""
    if not acc.has_relevance:
        raise ValueError(
            f"the target does not depend on the activation at {hook!r} (every Jacobian is zero): "
            "choose a hook before the read-out, or a target computed from the model's output."
        )
    return acc.core(rank=rank, energy=energy, eps=eps)


def _core_metadata(
    model: torch.nn.Module, hook: str, tensors: dict[str, torch.Tensor], positions, sampled: torch.Tensor, seed: int
) -> dict[str, Any]:
    """Where a core of :func:`extract_from_model` comes from (before its energy and rank)."""
    per_example = {"positions": positions} if isinstance(positions, torch.Tensor) else {}
    return {
        "model": _model_name(model),
        "data": _inputs_fingerprint({**tensors, **per_example}),
        "hook": hook,
        "positions": positions if isinstance(positions, str) else "per example",
        "n_examples": len(sampled),
        "n_jacobians": int(sampled.sum()),
        "jacobian_seed": seed,
    }


def _model_name(model: torch.nn.Module) -> str:
    """The name a model was loaded by (Hugging Face's ``name_or_path``, our ``name``), else its class."""
    for owner in (model, getattr(model, "cfg", None), getattr(model, "config", None)):
        for attr in ("name", "model_name", "name_or_path", "_name_or_path"):
            value = getattr(owner, attr, None)
            if isinstance(value, str) and value:
                return value
    return type(model).__name__


def _inputs_fingerprint(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 (16 hex digits) of the inputs, name by name: which data a saved core came from."""
    digest = hashlib.sha256()
    for key in sorted(tensors):
        t = tensors[key].detach().cpu().contiguous()
        digest.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        digest.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.view(torch.int16).numpy().tobytes())
    return digest.hexdigest()[:16]


def _probe(name: str, positions, rows: slice, probes: dict) -> Callable:
    """A hook function that records the activation at each example's position and adds a zero
    vector there whose gradient is the read-out's Jacobian (``probes[name] = (act, delta)``)."""

    def fn(act: torch.Tensor, hook=None) -> torch.Tensor:
        if name in probes:  # a hook point run twice in one pass (a reused module): the first counts
            return act
        if act.ndim != 3:
            raise ValueError(f"the activation at {name!r} has shape {tuple(act.shape)}; expected (batch, pos, D).")
        idx = _positions(positions, rows, act)
        at = torch.arange(act.shape[0], device=act.device)
        delta = torch.zeros(act.shape[0], act.shape[-1], dtype=act.dtype, device=act.device, requires_grad=True)
        probes[name] = (act[at, idx].detach(), delta)
        return act.index_put((at, idx), act[at, idx] + delta)

    return fn


def _positions(positions, rows: slice, act: torch.Tensor) -> torch.Tensor:
    if isinstance(positions, str):
        return torch.full((act.shape[0],), act.shape[1] - 1, device=act.device)
    idx = positions[rows].to(act.device)
    if (idx < 0).any() or (idx >= act.shape[1]).any():
        raise ValueError(f"positions out of range for sequences of length {act.shape[1]}.")
    return idx


def _hooked_runner(model: torch.nn.Module, hook_names: Sequence[str]) -> Callable:
    """``run(batch, fwd_hooks)``: the model's output with each ``(name, fn)`` of ``fwd_hooks``
    applied at its hook point (TransformerLens-style models) or submodule (any ``nn.Module``)."""
    hook_dict = getattr(model, "hook_dict", None)
    if hook_dict is not None and all(h in hook_dict for h in hook_names):

        def run_tl(batch, fwd_hooks):
            args, kwargs = ((batch[""],), {}) if "" in batch else ((), batch)
            return model.run_with_hooks(*args, fwd_hooks=fwd_hooks, **kwargs)

        return run_tl
    names = [n for n, _ in model.named_modules() if n] + list(hook_dict or {})
    for hook_name in hook_names:
        if hook_name not in names:
            near = nearest_names(names, hook_name)
            raise ValueError(f"{type(model).__name__} has no hook point or submodule {hook_name!r}; nearest: {near}.")
    if hook_dict is not None and any(h in hook_dict for h in hook_names):
        raise ValueError("give either hook points or submodule paths, not both, in one call.")

    def run_module(batch, fwd_hooks):
        with CoreHooks(fwd_hooks).on(model):
            return model(batch[""]) if "" in batch else model(**batch)

    return run_module
