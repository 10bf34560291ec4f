"""The directions practitioners use, beside the ACE core, on the agreement task (own-model chapter, part 2).

At the layer with the largest flip effect of the ACE core (the agreement chapter's rule), four
directions are fitted on the training half of the agreement prompts: the difference of the class
means (a steering vector), a logistic-regression probe (:func:`fit_probe`), the top principal
component of the activations, and the ACE rank-1 core. On the test half each gets its angle to
the ACE core, how well it reads the label (AUC of the projection), how much of the margin's
variance the projection explains (R²), and the AUC of the margin when the direction is kept,
removed or flipped (:func:`evaluate_direction`); :func:`agreement_analysis` is one model's record
(the typed records are in :mod:`corelib.experiments.own_model_records`). The chapter's order of
the directions is :data:`corelib.experiments.own_model.DIRECTIONS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import expit

from ..ace import Core, MomentAccumulator
from ..compare import principal_angles
from ..interventions import MODES
from ..lm import LanguageModel
from ..tasks import sva
from .own_model_records import AgreementAnalysis, DirectionMeasures, LayerSweep, ProbeGridRow, RunInfo
from .subject_verb_agreement_layers import (
    all_layer_jacobians,
    auc,
    intervened_margins,
    prefix_batches,
    sweep_layers,
)

if TYPE_CHECKING:
    from .own_model import OwnModelParams


def run_info(lm, train: list, test: list, layers: list[int]) -> RunInfo:
    """What a summary says about its model and data: name, size, prompts, layers swept."""
    return RunInfo(
        model=lm.name,
        n_layers=lm.n_layers,
        d_model=lm.d_model,
        n_train=len(train),
        n_test=len(test),
        layers=tuple(int(layer) for layer in layers),
    )


def angle_deg(u, v) -> float:
    """Angle in degrees between the lines spanned by ``u`` and ``v``: 0 to 90, blind to their signs."""
    a, b = (np.asarray(x, dtype=np.float64).ravel() for x in (u, v))
    if a.shape != b.shape or not (np.linalg.norm(a) > 0 and np.linalg.norm(b) > 0):
        raise ValueError(f"need two non-zero vectors of one length, got shapes {a.shape} and {b.shape}")
    return float(principal_angles((a / np.linalg.norm(a))[:, None], (b / np.linalg.norm(b))[:, None])[0])


def _check_labelled(acts, labels) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(acts, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"need activations (N, D) and N labels, got {x.shape} and {y.shape}")
    if y.all() or not y.any():
        raise ValueError("need examples of both classes")
    return x, y


def mean_difference(acts, labels) -> np.ndarray:
    """Unit vector along ``mean(positives) - mean(negatives)``: the steering vector of the label."""
    x, y = _check_labelled(acts, labels)
    d = x[y].mean(0) - x[~y].mean(0)
    return d / np.linalg.norm(d)


def top_principal_component(acts) -> np.ndarray:
    """Unit vector of largest variance of the activations (the first right singular vector of
    the centred activations); its sign is arbitrary (see :func:`orient`)."""
    x = np.asarray(acts, dtype=np.float64)
    return np.linalg.svd(x - x.mean(0), full_matrices=False)[2][0]


def orient(direction, acts, labels) -> np.ndarray:
    """``direction`` with the sign that gives the positive class the larger mean projection."""
    x, y = _check_labelled(acts, labels)
    d = np.asarray(direction, dtype=np.float64)
    z = x @ d
    return d if z[y].mean() >= z[~y].mean() else -d


@dataclass(frozen=True)
class Probe:
    """A logistic-regression probe: ``logit(h) = weights @ (h - mean) + bias`` (activation units)."""

    weights: np.ndarray
    bias: float
    mean: np.ndarray
    l2: float
    n_iter: int

    @property
    def direction(self) -> np.ndarray:
        """The unit vector the probe reads."""
        return self.weights / np.linalg.norm(self.weights)

    def logits(self, acts) -> np.ndarray:
        """The probe's logit of each activation (positive: the positive class)."""
        return (np.asarray(acts, dtype=np.float64) - self.mean) @ self.weights + self.bias


def _probe_loss(theta: np.ndarray, z: np.ndarray, signs: np.ndarray, l2: float) -> float:
    """Mean log-loss of ``z @ w + b`` for labels ``signs`` (+-1) plus ``l2 / 2 |w|^2`` (not on ``b``)."""
    w, b = theta[:-1], theta[-1]
    return float(np.logaddexp(0.0, -signs * (z @ w + b)).mean() + 0.5 * l2 * w @ w)


def fit_probe(acts, labels, l2: float = 1e-2, *, tol: float = 1e-10, max_iter: int = 200) -> Probe:
    """Logistic regression of ``labels`` on ``acts`` with an L2 penalty, by Newton's method in float64.

    The activations are centred on their mean and divided by their root mean square ``s`` (one
    number, so ``l2`` does not depend on the activations' scale); the probe minimises
    ``mean_i log(1 + exp(-y_i (w @ (h_i - mu) / s + b))) + l2 / 2 |w|^2`` with ``y_i = +-1``.
    The loss is strictly convex for ``l2 > 0``; each Newton step is halved until the loss
    decreases, and the iteration stops when the largest gradient entry is below ``tol``.
    """
    x, y = _check_labelled(acts, labels)
    if l2 <= 0:
        raise ValueError(f"l2 must be positive (a separable training set has no unpenalised optimum), got {l2}")
    mean = x.mean(0)
    scale = float(np.sqrt(np.mean((x - mean) ** 2))) or 1.0
    z = np.c_[(x - mean) / scale, np.ones(len(x))]
    signs, n, d = np.where(y, 1.0, -1.0), len(x), x.shape[1]
    penalty = np.r_[np.full(d, l2), 0.0]
    theta = np.zeros(d + 1)
    loss = _probe_loss(theta, z[:, :-1], signs, l2)
    n_iter = 0
    while True:
        p = expit(z @ theta)
        grad = z.T @ (p - y) / n + penalty * theta
        if np.abs(grad).max() < tol:
            break
        if n_iter == max_iter:
            raise RuntimeError(
                f"the probe did not converge in {max_iter} Newton steps (largest gradient {np.abs(grad).max():.2e})"
            )
        hess = (z.T * (p * (1 - p))) @ z / n + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        t = 1.0  # halve the step until the loss does not increase
        new = _probe_loss(theta - step, z[:, :-1], signs, l2)
        while new > loss and t > 1e-10:
            t /= 2
            new = _probe_loss(theta - t * step, z[:, :-1], signs, l2)
        theta, loss, n_iter = theta - t * step, new, n_iter + 1
    return Probe(weights=theta[:-1] / scale, bias=float(theta[-1]), mean=mean, l2=float(l2), n_iter=n_iter)


def direction_core(direction, mean, name: str = "") -> Core:
    """A rank-1 :class:`corelib.ace.Core` along ``direction`` centred on ``mean``, so a direction is
    kept, removed or flipped exactly as an ACE core is (its one singular value is a placeholder)."""
    d = np.asarray(direction, dtype=np.float64)
    return Core(d[:, None] / np.linalg.norm(d), np.ones(1), np.asarray(mean, dtype=np.float64), {"direction": name})


def r_squared(x, y) -> float:
    """R² of the least-squares line of ``y`` on ``x`` (with intercept): the squared correlation."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.std() == 0 or y.std() == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1] ** 2)


def resolve_layer(layer: int, n_layers: int) -> int:
    """``layer`` as an index in ``range(n_layers)``; negative values count from the end."""
    if not -n_layers <= int(layer) < n_layers:
        raise ValueError(f"layer {layer} does not exist in a model with {n_layers} layers")
    return int(layer) % n_layers


def choose_layer(layers: Sequence[int], baseline: float, flip_aucs: Sequence[float]) -> int:
    """The layer whose flipped core lowers the AUC most (the agreement chapter's rule)."""
    if len(layers) != len(flip_aucs) or not layers:
        raise ValueError(f"need one flip AUC per layer, got {len(flip_aucs)} for {len(layers)} layers")
    return int(layers[int(np.argmax([baseline - a for a in flip_aucs]))])


def train_pass(
    lm: LanguageModel, prompts: list[str], layers: list[int], *, batch_size: int = 100, eps: float = 1e-8
) -> tuple[dict[int, np.ndarray], dict[int, Core]]:
    """Last-token activations (N, D) and the margin's rank-1 ACE core at every layer of ``layers``,
    from one backward pass per batch (prefix caches; the prompts' order is kept)."""
    acc = {layer: MomentAccumulator(lm.d_model) for layer in layers}
    acts: dict[int, list] = {layer: [] for layer in layers}
    order = []
    for idx, batch, cache in prefix_batches(lm, prompts, batch_size=batch_size, progress=False):
        a, j, _ = all_layer_jacobians(lm, batch, layers, cache)
        order.append(idx)
        for layer in layers:
            h = a[layer].cpu().double().numpy()
            acc[layer].update(h, j[layer].cpu().double().numpy())
            acts[layer].append(h)
    inverse = np.argsort(np.concatenate(order))
    return (
        {layer: np.concatenate(v)[inverse] for layer, v in acts.items()},
        {layer: acc[layer].core(rank=1, eps=eps) for layer in layers},
    )


def evaluate_direction(
    lm: LanguageModel,
    prompts: list[str],
    labels: np.ndarray,
    layer: int,
    core: Core,
    *,
    batches: list,
    batch_size: int = 100,
    modes: Sequence[str] = MODES,
    progress: bool = False,
) -> DirectionMeasures:
    """The direction of the rank-1 ``core`` on held-out prompts: AUC of its projection for the
    label, R² of the clean margin on the projection, and the margin's AUC with it kept,
    removed and flipped (centred on the core's mean, last token only; None for a mode not in
    ``modes``). Its angle to the ACE core is the caller's to set (None here)."""
    m = intervened_margins(
        lm, prompts, {layer: core}, {layer: tuple(modes)}, batch_size=batch_size, batches=batches, progress=progress
    )
    z = core.coords(m.acts[layer])[:, 0]
    return DirectionMeasures(
        read_auc=auc(z, labels),
        r2=r_squared(z, m.baseline),
        **{mode: auc(m[(layer, mode)], labels) if mode in modes else None for mode in MODES},
        coords=tuple(z.tolist()),
        baseline=tuple(m.baseline.tolist()),
        angle_to_ace=None,
    )


def _directions(acts: np.ndarray, labels: np.ndarray, ace: Core, probe: Probe) -> dict[str, np.ndarray]:
    """The four directions of :data:`corelib.experiments.own_model.DIRECTIONS` at one layer, from
    the training activations (the probe is already fitted there), each oriented towards the
    positive class."""
    raw = {
        "ACE core": ace.basis[:, 0],
        "mean difference": mean_difference(acts, labels),
        "probe": probe.direction,
        "top PC": top_principal_component(acts),
    }
    return {name: orient(d, acts, labels) for name, d in raw.items()}


def layer_sweep(
    lm: LanguageModel,
    prompts: list[str],
    labels: np.ndarray,
    cores: dict[int, Core],
    probe_cores: dict[int, Core],
    *,
    batches: list,
    progress: bool = True,
) -> tuple[LayerSweep, dict[int, np.ndarray]]:
    """At every layer of ``cores``: the AUC of the margin with the ACE core removed and flipped, how
    well the probe's direction reads the label, the AUC with it removed and flipped, and its angle
    to the core (:class:`LayerSweep`); and by layer the test prompts' last-token activations (N, D)."""
    modes = {layer: ("remove", "flip") for layer in cores}
    ace = intervened_margins(lm, prompts, cores, modes, batches=batches, progress=progress)
    probe = intervened_margins(lm, prompts, probe_cores, modes, batches=batches, progress=progress)
    layers = list(cores)
    sweep = LayerSweep(
        baseline=auc(ace.baseline, labels),
        ace_remove=tuple(auc(ace[(layer, "remove")], labels) for layer in layers),
        ace_flip=tuple(auc(ace[(layer, "flip")], labels) for layer in layers),
        probe_read=tuple(auc(probe_cores[layer].coords(probe.acts[layer])[:, 0], labels) for layer in layers),
        probe_remove=tuple(auc(probe[(layer, "remove")], labels) for layer in layers),
        probe_flip=tuple(auc(probe[(layer, "flip")], labels) for layer in layers),
        probe_angle=tuple(angle_deg(probe_cores[layer].basis, cores[layer].basis) for layer in layers),
    )
    return sweep, dict(probe.acts)


def agreement_analysis(lm: LanguageModel, params: OwnModelParams, *, progress: bool = True) -> AgreementAnalysis:
    """One model on the agreement task: the ACE core and a probe at every swept layer, the chosen
    layer, and there the four directions and their measures."""
    ds = sva.make_dataset(params.n_per_number, params.dataset_seed)
    train, y_train = ds.split("train")
    test, y_test = ds.split("test")
    fixed = params.agreement_layer is not None
    layers = (
        [resolve_layer(params.agreement_layer, lm.n_layers)]
        if fixed
        else sweep_layers(lm.n_layers, params.layer_stride)
    )
    acts, cores = train_pass(lm, train, layers, batch_size=params.batch_size, eps=params.eps)
    probes = {layer: fit_probe(acts[layer], y_train, params.probe_l2) for layer in layers}
    probe_cores = {
        layer: direction_core(orient(probes[layer].direction, acts[layer], y_train), acts[layer].mean(0), "probe")
        for layer in layers
    }
    batches = prefix_batches(lm, test, batch_size=params.batch_size, progress=progress)
    sweep, test_acts = layer_sweep(lm, test, y_test, cores, probe_cores, batches=batches, progress=progress)
    layer = layers[0] if fixed else choose_layer(layers, sweep.baseline, sweep.ace_flip)
    directions = _directions(acts[layer], y_train, cores[layer], probes[layer])
    mean = acts[layer].mean(0)
    measured = {
        name: replace(
            evaluate_direction(lm, test, y_test, layer, direction_core(d, mean, name), batches=batches),
            angle_to_ace=angle_deg(d, directions["ACE core"]),
        )
        for name, d in directions.items()
    }
    probe_accuracy = float(np.mean((probes[layer].logits(test_acts[layer]) > 0) == y_test.astype(bool)))
    return AgreementAnalysis(
        **run_info(lm, train, test, layers).as_fields(),
        sweep=sweep,
        spectral_gap_by_layer=tuple(cores[layer].spectral_gap for layer in layers),
        layer=layer,
        layer_chosen=not fixed,
        baseline_auc=sweep.baseline,
        spectral_gap=cores[layer].spectral_gap,
        directions=measured,
        probe_accuracy=probe_accuracy,
        probe_iterations=probes[layer].n_iter,
        probe_grid=_probe_grid(lm, test, y_test, layer, acts[layer], y_train, directions, params, batches),
        plural=tuple(y_test.astype(int).tolist()),
    )


def _probe_grid(lm, test, y_test, layer, acts, y_train, directions, params, batches) -> tuple[ProbeGridRow, ...]:
    """The probe at every penalty of ``params.probe_l2_grid``: its angles to the ACE core and to the
    mean difference, how well it reads the label, and the AUC with it removed and flipped."""
    rows = []
    for l2 in params.probe_l2_grid:
        d = orient(fit_probe(acts, y_train, l2).direction, acts, y_train)
        core = direction_core(d, acts.mean(0), f"probe l2={l2:g}")
        got = evaluate_direction(lm, test, y_test, layer, core, batches=batches, modes=("remove", "flip"))
        rows.append(
            ProbeGridRow(
                l2=l2,
                angle_to_ace=angle_deg(d, directions["ACE core"]),
                angle_to_mean_difference=angle_deg(d, directions["mean difference"]),
                read_auc=got.read_auc,
                r2=got.r2,
                remove=got.remove,
                flip=got.flip,
            )
        )
    return tuple(rows)
