"""The layer sweep of one language model (subject-verb agreement, Figure 5 and Tables A6-A7).

1. **Jacobians at every layer in one backward pass.** The number margin
   ``f(h) = (are + were) - (is + was)`` at the last token is differentiated with respect to a
   zero perturbation added at the last position of every swept ``blocks.{l}.hook_resid_post``;
   each prompt's margin depends only on its own activations, so the gradient of the summed
   margin holds every prompt's Jacobian. One :class:`corelib.ace.MomentAccumulator` per layer
   gives a rank-1 core and its spectral gap.
2. **Interventions** at the last token (keep / remove / flip, centred on the training mean): the
   AUC of the margin separating plural from singular prompts. The chosen layer has the largest
   flip effect.
3. At the chosen layer: core coordinates of the test prompts and agreement scores under remove
   and flip (paired Wilcoxon tests); :func:`alignment` correlates two models' coordinates.

Each prompt's prefix is computed once (key/value cache); interventions re-run only the last
position and only the layers after the intervened one, which is exact. The steering runs are
:mod:`corelib.experiments.subject_verb_agreement_steering`; the chapter's summary, tables and
glued values :mod:`corelib.experiments.subject_verb_agreement`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from ..ace import Core, MomentAccumulator
from ..interventions import MODES, intervention_hook
from ..lm import Batch, LanguageModel
from ..models import resid_hook
from ..tasks.sva import (
    SVADataset,
)
from .subject_verb_agreement_records import InterventionMargins, LayerCores, LayerSweepAnalysis, StoredCore

if TYPE_CHECKING:
    from .subject_verb_agreement import SVAParams


def auc(scores, positive) -> float:
    """Area under the ROC curve: P(score of a positive > score of a negative), ties count 1/2."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(positive).astype(bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"scores {s.shape} and labels {y.shape} must be 1-D of the same length")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs both positive (plural) and negative (singular) examples")
    ranks = stats.rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def agreement_scores(margins, plural) -> np.ndarray:
    """Prompt-level agreement: the margin signed towards the correct verb (positive = agrees)."""
    return np.where(np.asarray(plural).astype(bool), 1.0, -1.0) * np.asarray(margins, dtype=np.float64)


def alignment(coords_a, coords_b) -> dict:
    """Spearman and Pearson correlation of two models' 1-D core coordinates of the same prompts.

    The coordinates must already share a sign convention (here: larger = more plural).
    """
    a, b = np.ravel(coords_a), np.ravel(coords_b)
    if a.shape != b.shape or a.size < 3:
        raise ValueError(f"need coordinates of the same prompts (>= 3), got {a.shape} and {b.shape}")
    return {"spearman": float(stats.spearmanr(a, b).statistic), "pearson": float(stats.pearsonr(a, b).statistic)}


def sweep_layers(n_layers: int, stride: int) -> list[int]:
    """Layers ``0, stride, 2 stride, ...`` plus the last layer."""
    layers = list(range(0, n_layers, stride))
    return layers if layers[-1] == n_layers - 1 else layers + [n_layers - 1]


def all_layer_jacobians(
    lm: LanguageModel, batch: Batch, layers: list[int], cache=None, *, one_pass: bool = True
) -> tuple[dict, dict, torch.Tensor]:
    """Last-token activations and margin Jacobians at ``layers``.

    Returns ``(acts, jacs, margin)``: ``acts[l]`` and ``jacs[l]`` are (N, D) tensors (the
    Jacobian of prompt i's margin with respect to its last-token residual after layer ``l``),
    ``margin`` is (N,). With ``one_pass`` every layer's Jacobian comes from one backward pass;
    otherwise from one forward and backward pass per layer (for the benchmark and the test).
    ``cache`` is the prompts' prefix cache (:meth:`LanguageModel.prefix_cache`) or None.
    """

    def run(selected):
        deltas, acts = {}, {}

        def make(layer):
            def fn(act, hook=None):
                delta = torch.zeros_like(act[:, -1], requires_grad=True)
                deltas[layer], acts[layer] = delta, act[:, -1].detach()
                return torch.cat([act[:, :-1], (act[:, -1] + delta)[:, None]], dim=1)

            return fn

        with torch.enable_grad():
            margin = lm.last_token(batch, cache, fwd_hooks=[(resid_hook(l), make(l)) for l in selected])
            grads = torch.autograd.grad(margin.sum(), [deltas[l] for l in selected])
        return acts, dict(zip(selected, grads)), margin.detach()

    if one_pass:
        return run(list(layers))
    acts, jacs, margin = {}, {}, None
    for layer in layers:
        a, j, margin = run([layer])
        acts.update(a)
        jacs.update(j)
    return acts, jacs, margin


def _batches(lm: LanguageModel, prompts: list[str], size: int):
    """Yield ``(indices, batch, prefix cache)`` over prompts grouped by token length (less
    padding: the prefix forward is the dominant cost)."""
    order = np.argsort([len(lm.encode(p)) for p in prompts], kind="stable")
    for i in range(0, len(order), size):
        idx = order[i : i + size]
        batch = lm.tokenize([prompts[j] for j in idx])
        yield idx, batch, lm.prefix_cache(batch)


def prefix_batches(lm: LanguageModel, prompts: list[str], *, batch_size: int = 200, progress: bool = True) -> list:
    """The batches of ``prompts`` with their prefix caches, computed once to be reused.

    The prefix forward pass is the dominant cost of the interventions; a second
    :func:`intervened_margins` on the same prompts (e.g. for the modes left out of the sweep)
    reuses these instead of recomputing them. The caches are small: two vectors per layer,
    key-value head and prefix position.
    """
    return list(
        tqdm(
            _batches(lm, prompts, batch_size),
            total=-(-len(prompts) // batch_size),
            desc=f"{lm.name}: prefixes",
            disable=not progress,
            leave=False,
        )
    )


def layer_cores(
    lm: LanguageModel,
    prompts: list[str],
    layers: list[int],
    *,
    batch_size: int = 200,
    eps: float = 1e-8,
    progress: bool = True,
) -> LayerCores:
    """Rank-1 cores of the margin at ``layers`` from activations and Jacobians on ``prompts``
    (read as a mapping ``layer -> core``)."""
    acc = {layer: MomentAccumulator(lm.d_model) for layer in layers}
    for _, batch, cache in tqdm(
        _batches(lm, prompts, batch_size),
        desc=f"{lm.name}: Jacobians",
        total=-(-len(prompts) // batch_size),
        disable=not progress,
        leave=False,
    ):
        acts, jacs, _ = all_layer_jacobians(lm, batch, layers, cache)
        for layer in layers:
            acc[layer].update(acts[layer].cpu().double().numpy(), jacs[layer].cpu().double().numpy())
    return LayerCores(tuple(layers), tuple(acc[layer].core(rank=1, eps=eps) for layer in layers))


@torch.no_grad()
def intervened_margins(
    lm: LanguageModel,
    prompts: list[str],
    cores: Mapping[int, Core],
    modes_at: Mapping[int, tuple[str, ...]],
    *,
    batch_size: int = 200,
    batches: list | None = None,
    progress: bool = True,
) -> InterventionMargins:
    """Test-prompt margins: clean, and under each ``mode`` of ``modes_at[layer]`` at that layer,
    with the clean activations at every layer of ``cores``; the interventions are centred (on
    each core's training mean) at the last token only. ``batches`` are the prompts'
    :func:`prefix_batches` if already computed.
    """
    if batches is None:
        batches = _batches(lm, prompts, batch_size)
    elif sum(len(idx) for idx, _, _ in batches) != len(prompts):
        raise ValueError(
            f"batches hold {sum(len(idx) for idx, _, _ in batches)} prompts, not the "
            f"{len(prompts)} given: pass prefix_batches() of the same prompts"
        )
    out: dict = {"baseline": [], "acts": {layer: [] for layer in cores}}
    jobs = [(layer, mode) for layer, modes in modes_at.items() for mode in modes]
    for key in jobs:
        out[key] = []
    order = []
    for idx, batch, cache in tqdm(
        batches,
        total=-(-len(prompts) // batch_size),
        desc=f"{lm.name}: interventions",
        disable=not progress,
        leave=False,
    ):
        order.append(idx)
        names = [resid_hook(layer) for layer in cores]
        store = {}

        def grab(act, hook, store=store):
            store[hook.name] = act.detach()
            return act

        out["baseline"].append(lm.last_token(batch, cache, fwd_hooks=[(n, grab) for n in names]))
        for layer in cores:
            out["acts"][layer].append(store[resid_hook(layer)][:, -1].cpu().double())
        for layer, mode in jobs:
            # Only the layers after the intervention run, from the clean residual stream there.
            hook = intervention_hook(cores[layer], mode, centered=True, positions="last")
            out[(layer, mode)].append(
                lm.last_token(
                    batch,
                    cache,
                    fwd_hooks=[(resid_hook(layer), hook)],
                    start_at_layer=layer + 1,
                    resid=store[resid_hook(layer)],
                )
            )
    inverse = np.argsort(np.concatenate(order))  # back to the order of ``prompts``
    return InterventionMargins(
        baseline=torch.cat(out["baseline"]).cpu().double().numpy()[inverse],
        acts={layer: torch.cat(v).numpy()[inverse] for layer, v in out["acts"].items()},
        intervened={key: torch.cat(out[key]).cpu().double().numpy()[inverse] for key in jobs},
    )


def analyse_model(lm: LanguageModel, ds: SVADataset, params: SVAParams, *, progress: bool = True) -> LayerSweepAnalysis:
    """Layer sweep, chosen layer, coordinates and prompt-level scores of one model (stored as
    ``analysis.json`` in its :meth:`~LayerSweepAnalysis.to_json` form)."""
    train_prompts, _ = ds.split("train")
    test_prompts, plural = ds.split("test")
    sweep = _layer_sweep(lm, train_prompts, test_prompts, plural, params, progress)
    acts, margins = _chosen_layer_margins(lm, test_prompts, sweep, params, progress)
    return _analysis(lm, sweep, acts, margins, plural)


@dataclass(frozen=True)
class _LayerSweep:
    """The sweep over layers: each layer's core, the test margins under each sweep mode, the AUCs
    (``auc[mode][i]`` at ``layers[i]``), and the layer where flipping moves the AUC most."""

    layers: list[int]
    cores: LayerCores
    batches: list
    margins: InterventionMargins
    baseline: float
    auc: dict[str, list[float]]
    chosen: int


def _layer_sweep(lm, train_prompts, test_prompts, plural, params: SVAParams, progress: bool) -> _LayerSweep:
    layers = sweep_layers(lm.n_layers, params.layer_stride)
    cores = layer_cores(lm, train_prompts, layers, batch_size=params.batch_size, eps=params.eps, progress=progress)
    test_batches = prefix_batches(lm, test_prompts, batch_size=params.batch_size, progress=progress)
    m = intervened_margins(
        lm,
        test_prompts,
        cores,
        {layer: params.sweep_modes for layer in layers},
        batch_size=params.batch_size,
        batches=test_batches,
        progress=progress,
    )
    baseline = auc(m.baseline, plural)
    sweep = {mode: [auc(m.intervened[(layer, mode)], plural) for layer in layers] for mode in params.sweep_modes}
    effect = [baseline - a for a in sweep["flip"]]
    chosen = layers[int(np.argmax(effect))]
    return _LayerSweep(layers, cores, test_batches, m, baseline, sweep, chosen)


def _chosen_layer_margins(
    lm, test_prompts, sweep: _LayerSweep, params: SVAParams, progress: bool
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The clean activations at the chosen layer, (N, D), and the margins clean (``baseline``) and
    under every mode there, each (N,) (modes the sweep left out are computed here)."""
    m, chosen = sweep.margins, sweep.chosen
    missing = tuple(mode for mode in MODES if mode not in params.sweep_modes)
    if missing:
        m = m.merged(
            intervened_margins(
                lm,
                test_prompts,
                {chosen: sweep.cores[chosen]},
                {chosen: missing},
                batch_size=params.batch_size,
                batches=sweep.batches,
                progress=progress,
            )
        )
    return m.acts[chosen], {"baseline": m.baseline, **{mode: m.intervened[(chosen, mode)] for mode in MODES}}


def _analysis(
    lm: LanguageModel, sweep: _LayerSweep, acts: np.ndarray, margins: dict[str, np.ndarray], plural: np.ndarray
) -> LayerSweepAnalysis:
    core, layers = sweep.cores[sweep.chosen], sweep.layers
    coords = core.coords(acts)[:, 0]
    sign = 1.0 if np.corrcoef(coords, margins["baseline"])[0, 1] >= 0 else -1.0
    scores = {k: agreement_scores(v, plural) for k, v in margins.items()}
    wilcoxon = {mode: float(stats.wilcoxon(scores["baseline"], scores[mode]).pvalue) for mode in ("remove", "flip")}
    return LayerSweepAnalysis(
        model=lm.name,
        n_layers=lm.n_layers,
        d_model=lm.d_model,
        n_params=int(sum(t.numel() for t in lm.hf.parameters())),
        layers=tuple(layers),
        depth=tuple((layer + 1) / lm.n_layers for layer in layers),
        baseline_auc=sweep.baseline,
        sweep_auc={mode: tuple(v) for mode, v in sweep.auc.items()},
        spectral_gap_by_layer=tuple(sweep.cores[layer].spectral_gap for layer in layers),
        chosen_layer=sweep.chosen,
        rank=core.rank,
        spectral_gap=core.spectral_gap,
        singular_values=tuple(core.singular_values[:10].tolist()),
        auc={"baseline": sweep.baseline, **{mode: auc(margins[mode], plural) for mode in MODES}},
        coords=tuple((sign * coords).tolist()),
        margins={k: tuple(v.tolist()) for k, v in margins.items()},
        scores={k: tuple(v.tolist()) for k, v in scores.items()},
        wilcoxon_p=wilcoxon,
        plural=tuple(plural.astype(int).tolist()),
        core=StoredCore(
            basis=tuple((sign * core.basis[:, 0]).tolist()),
            mean=tuple(core.mean.tolist()),
            singular_values=tuple(core.singular_values.tolist()),
        ),
    )


def model_facts(lm: LanguageModel) -> dict[str, int]:
    """What the chapter says of a model beyond the sweep's layers and width: its vocabulary size
    (the rows of its input embedding)."""
    return {"vocab_size": int(lm.hf.get_input_embeddings().num_embeddings)}


def core_of(analysis: LayerSweepAnalysis | Mapping) -> Core:
    """The chosen layer's core of an analysis (typed, or its stored JSON form)."""
    stored = analysis["core"]
    return (stored if isinstance(stored, StoredCore) else StoredCore.from_json(stored)).core()
