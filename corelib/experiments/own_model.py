"""ACE on your own model: a new task in a few lines, and ACE beside the directions practitioners use.

1. **Tense** (a task the paper does not study). A time cue fixes whether the next verb should be
   past or present (:mod:`corelib.tasks.tense`); the read-out is ``(was + were) - (is + are)`` at
   the last token. :func:`tense_cores` is the whole of ACE on it: one
   :func:`corelib.ace.extract_from_model` call with a hook per layer returns a rank-1 core per
   layer. Each core is tested on held-out prompts by the interventions of the agreement chapter
   (keep / remove / flip at the last token, centred on the training mean); the layer with the
   largest flip effect is kept, saved with :meth:`corelib.ace.Core.save` and read back.
2. **Directions on the agreement task** (:mod:`corelib.experiments.own_model_directions`: the
   agreement chapter's prompts and read-out), at the
   layer with the largest flip effect of the ACE core (the agreement chapter's rule): the
   difference of the class means (a steering vector), a logistic-regression probe, the top
   principal component of the activations and the ACE rank-1 core, all fitted on the training
   half. On the test half each gets its angle to the ACE core, how well it reads the label (AUC
   of the projection), how much of the margin's variance the projection explains (R²), and the
   AUC of the margin when the direction is kept, removed or flipped.

:func:`padded_inputs` is the one helper the chapter's last section needs to run ACE on a plain
Hugging Face model by module path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .._checks import check_seed, check_settings
from ..ace import Core, extract_from_model
from ..interventions import MODES
from ..lm import TINY_MODEL, LanguageModel, load_model
from ..results import compute_once, results_root, run_dir
from ..targets import logit_difference
from ..tasks import tense
from .own_model_directions import (
    Probe,
    agreement_analysis,
    angle_deg,
    choose_layer,
    direction_core,
    evaluate_direction,
    fit_probe,
    layer_sweep,
    mean_difference,
    orient,
    r_squared,
    resolve_layer,
    run_info,
    top_principal_component,
    train_pass,
)
from .own_model_records import (
    AgreementAnalysis,
    DirectionMeasures,
    FlipExample,
    LayerSweep,
    ProbeGridRow,
    RunInfo,
    TenseAnalysis,
)
from .subject_verb_agreement import load_agreement_model
from .subject_verb_agreement_layers import (
    auc,
    intervened_margins,
    prefix_batches,
    sweep_layers,
)
from .subject_verb_agreement_records import LayerCores
from .subject_verb_agreement_steering import flip_demo

if TYPE_CHECKING:
    import pandas

__all__ = [
    "OwnModelSummary",
    "TenseAnalysis",
    "AgreementAnalysis",
    "DirectionMeasures",
    "ProbeGridRow",
    "LayerSweep",
    "FlipExample",
    "RunInfo",
    "DIRECTIONS",
    "OwnModelParams",
    "Probe",
    "agreement_analysis",
    "angle_deg",
    "choose_layer",
    "direction_core",
    "directions_table",
    "evaluate_direction",
    "finding_values",
    "fit_probe",
    "glue_values",
    "layer_sweep",
    "mean_difference",
    "orient",
    "padded_inputs",
    "probe_table",
    "r_squared",
    "removal_share",
    "resolve_layer",
    "run",
    "tense_analysis",
    "tense_core_path",
    "tense_cores",
    "tense_examples_table",
    "tense_prompt_frame",
    "top_principal_component",
    "train_pass",
]

DIRECTIONS = ("ACE core", "mean difference", "probe", "top PC")
"""The directions compared on the agreement task, in the order the chapter shows them."""


@dataclass(frozen=True)
class OwnModelParams:
    """All settings of the chapter; the defaults are the book's (the paper has no such experiment)."""

    tense_model: str = "smollm2-135m"
    n_phrases: int = 150  # tense: noun phrases, each after a past and a present cue
    tense_seed: int = 0
    models: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")  # the agreement comparison
    n_per_number: int = 150  # agreement prompts per number (the agreement chapter: 600)
    dataset_seed: int = 0
    layer_stride: int = 3  # sweep every layer_stride-th layer and the last
    agreement_layer: int | None = None  # None: the largest flip effect; else a layer (negative from the end)
    probe_l2: float = 1e-2  # the probe's L2 penalty (features scaled to unit RMS)
    probe_l2_grid: tuple[float, ...] = (1e2, 1.0, 1e-2, 1e-4)  # penalties of the probe table
    n_examples: int = 4  # tense prompts whose verb probabilities are shown
    batch_size: int = 100
    eps: float = 1e-8

    def __post_init__(self):
        object.__setattr__(self, "models", tuple(self.models))
        object.__setattr__(self, "probe_l2_grid", tuple(float(x) for x in self.probe_l2_grid))
        if not self.models or len(set(self.models)) != len(self.models):
            raise ValueError(f"models must name at least one model, each once, got {list(self.models)}")
        if int(self.layer_stride) != self.layer_stride or self.layer_stride < 1:
            raise ValueError(f"layer_stride must be a positive integer, got {self.layer_stride}")
        if min(self.probe_l2, *self.probe_l2_grid) <= 0:
            raise ValueError(
                "OwnModelParams: probe_l2 and probe_l2_grid must be positive penalties: without one a separable "
                f"training set has no optimum; got {self.probe_l2!r} and {list(self.probe_l2_grid)}."
            )
        if self.batch_size < 1 or self.n_examples < 1:
            raise ValueError(f"batch_size and n_examples must be positive, got {self.batch_size}, {self.n_examples}")
        # two prompts per phrase or number at least, so that both halves of each split hold some
        check_settings(
            "OwnModelParams",
            integers={"n_phrases": self.n_phrases, "n_per_number": self.n_per_number},
            positive={"eps": self.eps},
        )
        if min(self.n_phrases, self.n_per_number) < 2:
            raise ValueError(
                "OwnModelParams: n_phrases and n_per_number must be at least 2 (each split has two halves), "
                f"got {self.n_phrases} and {self.n_per_number}."
            )
        if self.agreement_layer is not None and int(self.agreement_layer) != self.agreement_layer:
            raise ValueError(f"agreement_layer must be None or a layer index, got {self.agreement_layer!r}.")

        for name in ("tense_seed", "dataset_seed"):
            check_seed("OwnModelParams", name, getattr(self, name))
        if not all(isinstance(m, str) and m for m in (self.tense_model, *self.models)):
            raise ValueError(
                f"OwnModelParams: tense_model and models must be model names (strings), got {self.tense_model!r} "
                f"and {list(self.models)}."
            )

    @classmethod
    def from_namespace(cls, namespace: dict) -> OwnModelParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    def tense_part(self) -> dict:
        """The parameters that determine the tense analysis (its run-folder key)."""
        keys = ("tense_model", "n_phrases", "tense_seed", "layer_stride", "n_examples", "eps")
        return {k: getattr(self, k) for k in keys}

    def agreement_part(self) -> dict:
        """The parameters that determine one model's comparison of directions (with its name)."""
        keys = ("n_per_number", "dataset_seed", "layer_stride", "agreement_layer", "probe_l2", "probe_l2_grid", "eps")
        return {k: getattr(self, k) for k in keys}


# --------------------------------------------------------------------------- 1. tense


def tense_cores(
    lm: LanguageModel,
    prompts: list[str],
    layers: list[int],
    *,
    eps: float = 1e-8,
) -> LayerCores:
    """A rank-1 core of the tense margin per layer, from one ACE call (a mapping layer -> core)."""
    batch = lm.tokenize(prompts)  # left-padded: every prompt ends last
    ids, mask = batch.input_ids, batch.attention_mask
    inputs = {"input_ids": ids, "attention_mask": mask}
    # the read-out f(h): (was + were) - (is + are) at the last position
    f = logit_difference(lm, [" was", " were"], [" is", " are"])
    # one hook per layer: the residual stream after it
    hooks = [f"blocks.{layer}.hook_resid_post" for layer in layers]
    cores = extract_from_model(lm, hooks, inputs, f, rank=1, eps=eps)
    return LayerCores(tuple(layers), tuple(cores[hook] for hook in hooks))


def tense_core_path(params: OwnModelParams) -> Path:
    """The folder (under the results folder) where :func:`run` saves the tense core."""
    return run_dir("own_model_tense", params.tense_part()) / "core"


def tense_analysis(lm: LanguageModel, params: OwnModelParams, *, progress: bool = True) -> TenseAnalysis:
    """Tense cores at the swept layers, their interventions on the held-out prompts, the chosen
    layer's core saved to :func:`tense_core_path` and the verb probabilities of a few prompts
    with the core flipped, computed with the core read back from disk."""
    ds = tense.make_dataset(params.n_phrases, params.tense_seed)
    train, _ = ds.split("train")
    test, past = ds.split("test")
    layers = sweep_layers(lm.n_layers, params.layer_stride)
    cores = tense_cores(lm, train, layers, eps=params.eps)
    batches = prefix_batches(lm, test, batch_size=params.batch_size, progress=progress)
    modes_at = {layer: MODES for layer in layers}
    m = intervened_margins(lm, test, cores, modes_at, batch_size=params.batch_size, batches=batches, progress=progress)
    baseline = auc(m.baseline, past)
    sweep = {mode: [auc(m[(layer, mode)], past) for layer in layers] for mode in MODES}
    chosen = choose_layer(layers, baseline, sweep["flip"])
    core = cores[chosen]
    core.save(tense_core_path(params))
    loaded = Core.load(tense_core_path(params))
    coords = orient(core.basis[:, 0], m.acts[chosen], past) @ (m.acts[chosen] - core.mean).T
    return TenseAnalysis(
        **run_info(lm, train, test, layers).as_fields(),
        baseline_auc=baseline,
        sweep_auc={mode: tuple(aucs) for mode, aucs in sweep.items()},
        spectral_gap_by_layer=tuple(cores[layer].spectral_gap for layer in layers),
        chosen_layer=chosen,
        singular_values=tuple(core.singular_values[:20].tolist()),
        energy_share=float(core.singular_values[0] ** 2 / np.sum(core.singular_values**2)),
        spectral_gap=core.spectral_gap,
        auc={"baseline": baseline, **{mode: sweep[mode][layers.index(chosen)] for mode in MODES}},
        coords=tuple(coords.tolist()),
        margins=tuple(m.baseline.tolist()),
        past=tuple(past.astype(int).tolist()),
        core_folder=str(tense_core_path(params).relative_to(results_root())),
        core_metadata=core.metadata,
        examples=tuple(flip_demo(lm, loaded, chosen, test[: params.n_examples])),
    )


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class OwnModelSummary:
    """What :func:`run` returns: the parameters, the tense analysis and one agreement analysis per model."""

    params: OwnModelParams
    tense: TenseAnalysis
    agreement: tuple[AgreementAnalysis, ...]


# --------------------------------------------------------------------------- the chapter


def _tense_model(name: str) -> LanguageModel:
    """The language model ``name`` with the tense read-out (the tiny model with the task's words)."""
    words = tense.vocabulary() if name == TINY_MODEL else None
    return load_model(name, readout=tense.TENSE_READOUT, vocabulary=words)


def run(params: OwnModelParams | None = None, *, progress: bool = True) -> OwnModelSummary:
    """The tense analysis and every model's comparison of directions, each computed once and
    stored in its run folder (keyed by the parameters that matter); returns the summary."""
    params = params or OwnModelParams()
    tense_dir = tense_core_path(params).parent
    tense_summary = compute_once(
        tense_dir / "tense.json",
        lambda: tense_analysis(_tense_model(params.tense_model), params, progress=progress).to_json(),
    )
    agreement = []
    for name in params.models:
        folder = run_dir("own_model_directions", {"model": name, **params.agreement_part()})
        agreement.append(
            compute_once(
                folder / "directions.json",
                lambda name=name: agreement_analysis(load_agreement_model(name), params, progress=progress).to_json(),
            )
        )
    return OwnModelSummary(
        params=params,
        tense=TenseAnalysis.from_json(tense_summary),
        agreement=tuple(AgreementAnalysis.from_json(a) for a in agreement),
    )


def padded_inputs(tokenizer: Any, prompts: Sequence[str], *, bos: bool = True) -> dict[str, torch.Tensor]:
    """Keyword inputs of a Hugging Face causal LM for ``prompts``: left-padded ``input_ids``, the
    ``attention_mask`` and ``position_ids`` that count real tokens only, so every prompt ends at
    the last position and padding changes nothing. ``bos`` puts the tokenizer's BOS token (if it
    has one) before every prompt."""
    if isinstance(prompts, str) or not prompts:
        raise TypeError("prompts must be a non-empty list of strings")
    start = [tokenizer.bos_token_id] if bos and tokenizer.bos_token_id is not None else []
    encoded = [start + tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    length = max(map(len, encoded))
    ids = torch.full((len(encoded), length), int(pad), dtype=torch.long)
    mask = torch.zeros((len(encoded), length), dtype=torch.long)
    for i, e in enumerate(encoded):
        ids[i, length - len(e) :] = torch.tensor(e, dtype=torch.long)
        mask[i, length - len(e) :] = 1
    return {"input_ids": ids, "attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}


# --------------------------------------------------------------------------- what the chapter shows


def directions_table(summary: OwnModelSummary) -> pandas.DataFrame:
    """Per model and direction: the layer (1-based, of the model's layers), angle to the ACE core,
    AUC of the projection, R² of the margin, the margin's AUC with the direction kept, removed and
    flipped, and the removal's effect as a share of the ACE core's (:func:`removal_share`)."""
    import pandas as pd

    rows = [
        {
            "model": m.model,
            "direction": name,
            "layer": f"{m.layer + 1} of {m.n_layers}",
            "angle to ACE (°)": d.angle_to_ace,
            "reads the label (AUC)": d.read_auc,
            "margin R²": d.r2,
            "kept": d.keep,
            "removed": d.remove,
            "flipped": d.flip,
            "removal effect (of ACE's)": removal_share(m, name),
        }
        for m in summary.agreement
        for name, d in m.directions.items()
    ]
    return pd.DataFrame(rows).set_index(["model", "direction"]).round({"angle to ACE (°)": 1}).round(3)


def probe_table(summary: OwnModelSummary) -> pandas.DataFrame:
    """Per model and penalty: the probe's angles to the ACE core and the mean difference, how well
    it reads the label, and the AUC with it removed and flipped."""
    import pandas as pd

    rows = [
        {
            "model": m.model,
            "L2 penalty": f"{r.l2:g}",
            "angle to ACE (°)": r.angle_to_ace,
            "angle to mean difference (°)": r.angle_to_mean_difference,
            "reads the label (AUC)": r.read_auc,
            "removed": r.remove,
            "flipped": r.flip,
        }
        for m in summary.agreement
        for r in m.probe_grid
    ]
    angles = {"angle to ACE (°)": 1, "angle to mean difference (°)": 1}
    return pd.DataFrame(rows).set_index(["model", "L2 penalty"]).round(3).round(angles)


def tense_examples_table(summary: OwnModelSummary) -> pandas.DataFrame:
    """The verb probabilities of a few held-out tense prompts, unmodified and with the core flipped."""
    import pandas as pd

    verbs = ("was", "were", "is", "are")
    rows = [
        {"prompt": r.prompt, **{f"P({v}) {k}": getattr(r, k)[v] for k in ("baseline", "flip") for v in verbs}}
        for r in summary.tense.examples
    ]
    return pd.DataFrame(rows).set_index("prompt").round(3)


def tense_prompt_frame(ds: tense.TenseDataset, n: int = 6) -> pandas.DataFrame:
    """The first ``n`` prompts of a tense data set with their tense and the head noun's number."""
    import pandas as pd

    return pd.DataFrame(
        {
            "prompt": ds.prompts[:n],
            "tense": np.where(ds.past[:n] == 1, "past", "present"),
            "head": np.where(ds.plural[:n] == 1, "plural", "singular"),
        }
    )


def removal_share(model: AgreementAnalysis, name: str) -> float:
    """How much removing direction ``name`` lowers the AUC, as a share of what removing the ACE core
    does: ``(baseline - removed) / (baseline - removed ACE core)`` (NaN if the core's removal
    changes the AUC by less than 0.01)."""
    base, measured = model.baseline_auc, model.directions
    core_effect = base - measured["ACE core"].remove
    return (base - measured[name].remove) / core_effect if core_effect >= 0.01 else float("nan")


def _grid_values(summary: OwnModelSummary) -> dict[str, float]:
    """The probe table's extremes over the models: the strongest penalty's angle to the mean
    difference and removal AUC, the weakest penalty's reading AUC and removal AUC."""
    strong = [max(m.probe_grid, key=lambda r: r.l2) for m in summary.agreement]
    weak = [min(m.probe_grid, key=lambda r: r.l2) for m in summary.agreement]
    return {
        "grid_strong_l2": strong[0].l2,
        "grid_strong_angle_md": max(r.angle_to_mean_difference for r in strong),
        "grid_strong_remove_min": min(r.remove for r in strong),
        "grid_strong_remove_max": max(r.remove for r in strong),
        "grid_weak_l2": weak[0].l2,
        "grid_weak_read_min": min(r.read_auc for r in weak),
        "grid_weak_remove_min": min(r.remove for r in weak),
        "grid_weak_remove_max": max(r.remove for r in weak),
    }


def _example_values(summary: OwnModelSummary) -> dict[str, object]:
    """The first tense example: its prompt and P(was), P(is), unmodified and with the core flipped."""
    ex = summary.tense.examples[0]
    return {
        "ex_prompt": ex.prompt,
        "ex_was_base": ex.baseline["was"],
        "ex_was_flip": ex.flip["was"],
        "ex_is_base": ex.baseline["is"],
        "ex_is_flip": ex.flip["is"],
    }


EARLY_DEPTH = 0.75
"""Layers up to this share of the depth are the "early" layers whose interventions the chapter quotes."""


def _early(summary: OwnModelSummary) -> list[tuple[AgreementAnalysis, LayerSweep, int]]:
    """(model, its sweep, index in the sweep) of every swept layer in the first :data:`EARLY_DEPTH`
    of a model's depth."""
    return [
        (m, m.sweep, k)
        for m in summary.agreement
        for k, layer in enumerate(m.layers)
        if (layer + 1) / m.n_layers <= EARLY_DEPTH
    ]


def _sweep_values(summary: OwnModelSummary) -> dict[str, float]:
    """The layer sweeps' extremes: the probe's worst reading AUC at any layer, and the least AUC left
    by removing or flipping the probe's direction or flipping the ACE core at an early layer."""
    early = _early(summary)

    def least(key: str) -> float:
        return min((getattr(sweep, key)[k] for _, sweep, k in early), default=float("nan"))

    return {
        "early_depth": EARLY_DEPTH,
        "sweep_probe_read_min": min(min(m.sweep.probe_read) for m in summary.agreement),
        "early_probe_remove_min": least("probe_remove"),
        "early_probe_flip_min": least("probe_flip"),
        "early_ace_flip_min": least("ace_flip"),
    }


def _by_direction(summary: OwnModelSummary, name: str, key: str) -> list[float]:
    return [getattr(m.directions[name], key) for m in summary.agreement]


_DIRECTION_GLUE = {
    "ACE core": {
        "angle_to_ace": ("ace_angle_to_ace_min", "ace_angle_to_ace_max"),
        "read_auc": ("ace_read_auc_min", "ace_read_auc_max"),
        "r2": ("ace_r2_min", "ace_r2_max"),
        "keep": ("ace_keep_min", "ace_keep_max"),
        "remove": ("ace_remove_min", "ace_remove_max"),
        "flip": ("ace_flip_min", "ace_flip_max"),
        "share": ("ace_share_min", "ace_share_max"),
    },
    "mean difference": {
        "angle_to_ace": ("md_angle_to_ace_min", "md_angle_to_ace_max"),
        "read_auc": ("md_read_auc_min", "md_read_auc_max"),
        "r2": ("md_r2_min", "md_r2_max"),
        "keep": ("md_keep_min", "md_keep_max"),
        "remove": ("md_remove_min", "md_remove_max"),
        "flip": ("md_flip_min", "md_flip_max"),
        "share": ("md_share_min", "md_share_max"),
    },
    "probe": {
        "angle_to_ace": ("probe_angle_to_ace_min", "probe_angle_to_ace_max"),
        "read_auc": ("probe_read_auc_min", "probe_read_auc_max"),
        "r2": ("probe_r2_min", "probe_r2_max"),
        "keep": ("probe_keep_min", "probe_keep_max"),
        "remove": ("probe_remove_min", "probe_remove_max"),
        "flip": ("probe_flip_min", "probe_flip_max"),
        "share": ("probe_share_min", "probe_share_max"),
    },
    "top PC": {
        "angle_to_ace": ("pc_angle_to_ace_min", "pc_angle_to_ace_max"),
        "read_auc": ("pc_read_auc_min", "pc_read_auc_max"),
        "r2": ("pc_r2_min", "pc_r2_max"),
        "keep": ("pc_keep_min", "pc_keep_max"),
        "remove": ("pc_remove_min", "pc_remove_max"),
        "flip": ("pc_flip_min", "pc_flip_max"),
        "share": ("pc_share_min", "pc_share_max"),
    },
}
"""Per direction of :data:`DIRECTIONS` and per measure (:func:`_by_direction`, and ``share``:
:func:`removal_share`), the glue names of its least and largest value over the models."""


def glue_values(summary: OwnModelSummary) -> dict[str, object]:
    """Every value the chapter's prose quotes, by glue name: numbers, and the names of the tense
    model, of the saved core's folder and of the first example prompt. A measure of the
    directions over the models is glued as its least and largest value (:data:`_DIRECTION_GLUE`)."""
    t, models = summary.tense, summary.agreement
    values: dict[str, object] = {
        "tense_model": t.model,
        "tense_n_train": t.n_train,
        "tense_n_test": t.n_test,
        "tense_n_swept": len(t.layers),
        "tense_n_layers": t.n_layers,
        "tense_layer": t.chosen_layer + 1,
        "tense_gap": t.spectral_gap,
        "tense_share": t.energy_share,
        "tense_base": t.auc["baseline"],
        "tense_keep": t.auc["keep"],
        "tense_remove": t.auc["remove"],
        "tense_flip": t.auc["flip"],
        "tense_core_folder": t.core_folder,
        "dir_n_models": len(models),
        "dir_n_train": models[0].n_train,
        "dir_n_test": models[0].n_test,
        "dir_base_min": min(m.baseline_auc for m in models),
        "dir_base_max": max(m.baseline_auc for m in models),
        "probe_acc_min": min(m.probe_accuracy for m in models),
        "probe_l2": summary.params.probe_l2,
    }
    for name, measures in _DIRECTION_GLUE.items():
        for measure, (least, largest) in measures.items():
            if measure == "share":
                measured = [removal_share(m, name) for m in models]
            else:
                measured = _by_direction(summary, name, measure)
            values[least], values[largest] = min(measured), max(measured)
    return {**values, **_grid_values(summary), **_example_values(summary), **_sweep_values(summary)}


def finding_values(summary: OwnModelSummary) -> dict[str, object]:
    """The values of the chapter's findings (ids ``own.*`` of :data:`corelib.claims.FINDINGS`), for
    :func:`corelib.claims.record`: one number, or one per model (``{model: value}``), each the
    quantity the finding's test reads."""
    t, models = summary.tense, summary.agreement
    others = [name for name in DIRECTIONS if name != "ACE core"]

    def per_model(value) -> dict[str, float]:
        return {m.model: float(value(m)) for m in models}

    def gap_to_others(m: AgreementAnalysis, mode: str) -> float:
        """How much lower the AUC is with the ACE core intervened on than with any other direction."""
        d = m.directions
        return min(getattr(d[name], mode) for name in others) - getattr(d["ACE core"], mode)

    early = _early(summary)
    strong = {m.model: max(m.probe_grid, key=lambda r: r.l2) for m in models}
    weak = {m.model: min(m.probe_grid, key=lambda r: r.l2) for m in models}
    return {
        "own.tense_flip_inverts": t.auc["flip"],
        "own.tense_keep_loses": t.auc["baseline"] - t.auc["keep"],
        "own.tense_remove_leaves": t.auc["remove"] - 0.5,
        "own.ace_keep_sufficient": per_model(lambda m: m.directions["ACE core"].keep - m.baseline_auc),
        "own.ace_remove_largest": per_model(lambda m: gap_to_others(m, "remove")),
        "own.ace_flip_largest": per_model(lambda m: gap_to_others(m, "flip")),
        "own.md_closest": per_model(
            lambda m: (
                min(m.directions[n].angle_to_ace for n in ("probe", "top PC"))
                - m.directions["mean difference"].angle_to_ace
            )
        ),
        "own.probe_reads_best": per_model(
            lambda m: m.directions["probe"].read_auc - max(m.directions[n].read_auc for n in DIRECTIONS if n != "probe")
        ),
        "own.probe_remove_share": per_model(lambda m: removal_share(m, "probe")),
        "own.pc_remove_share": per_model(lambda m: removal_share(m, "top PC")),
        "own.probe_reads_everywhere": per_model(lambda m: min(m.sweep.probe_read)),
        # the least over the early layers of every model (none swept: not measured)
        "own.early_flips_small": min(
            (min(sweep.probe_flip[k], sweep.ace_flip[k]) - m.baseline_auc for m, sweep, k in early),
            default=[],
        ),
        "own.strong_probe_is_md": {name: r.angle_to_mean_difference for name, r in strong.items()},
        "own.weak_probe_not_used_more": {name: weak[name].remove - strong[name].remove for name in weak},
    }
