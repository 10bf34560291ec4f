"""Subject-verb agreement in pretrained language models (Figure 5, Tables A5-A7, Figure 6).

For each model:

1. **Jacobians at every layer in one backward pass.** The number margin
   ``f(h) = (are + were) - (is + was)`` at the last token is differentiated with respect to a
   zero perturbation added at the last position of every swept ``blocks.{l}.hook_resid_post``;
   each prompt's margin depends only on its own activations, so the gradient of the summed
   margin holds every prompt's Jacobian. One :class:`corelib.ace.MomentAccumulator` per layer
   gives a rank-1 core and its spectral gap.
2. **Interventions** at the last token (keep / remove / flip, centred on the training mean): the
   AUC of the margin separating plural from singular prompts. The chosen layer has the largest
   flip effect.
3. At the chosen layer: core coordinates of the test prompts, agreement scores under remove and
   flip (paired Wilcoxon tests), and adaptive steering during generation.

Across models: Spearman and Pearson correlations of the core coordinates of the same prompts.
Each prompt's prefix is computed once (key/value cache); interventions re-run only the last
position and only the layers after the intervened one, which is exact. Steps 1-2 and the
coordinates of step 3 are :mod:`corelib.experiments.subject_verb_agreement_layers`, the steering
:mod:`corelib.experiments.subject_verb_agreement_steering`; this module holds the chapter's
settings, its summary, tables and glued values.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from .._checks import check_seed, check_settings
from ..interventions import MODES
from ..lm import TINY_MODEL, LanguageModel, load_model
from ..results import compute_once, run_dir
from ..steering import SteeringConfig
from ..tasks.sva import (
    AGREEMENT_READOUT,
    FLIP_DEMO_PROMPTS,
    SVADataset,
    make_dataset,
    vocabulary,
)
from .subject_verb_agreement_layers import (
    agreement_scores,
    alignment,
    all_layer_jacobians,
    analyse_model,
    auc,
    intervened_margins,
    layer_cores,
    model_facts,
    prefix_batches,
    sweep_layers,
)
from .subject_verb_agreement_records import LayerSweepAnalysis
from .subject_verb_agreement_steering import (
    CONTROL_PROMPTS,
    GATE_GRID,
    STEERING_PROMPTS,
    ControlSummary,
    control_summary,
    flip_demo,
    gate_table,
    number_word_counterparts,
    steering_run,
)
from .subject_verb_agreement_steering_records import SteeringRun

if TYPE_CHECKING:
    import pandas

__all__ = [
    "SVASummary",
    "ModelAnalysis",
    "AlignmentPair",
    "SVAParams",
    "agreement_scores",
    "alignment",
    "all_layer_jacobians",
    "analyse_model",
    "auc",
    "claim_values",
    "flip_demo",
    "flip_demo_table",
    "model_facts",
    "sampling_table",
    "number_word_counterparts",
    "paper_deviations",
    "PAPER_MODELS",
    "spectral_gap_paper",
    "ControlSummary",
    "control_summary",
    "gate_table",
    "intervened_margins",
    "prefix_batches",
    "layer_cores",
    "run",
    "sweep_layers",
    "tables",
]


@dataclass(frozen=True)
class SVAParams:
    """All settings of the chapter; defaults are the paper's (every layer, 1 200 prompts)."""

    models: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")
    n_per_number: int = 600
    dataset_seed: int = 0
    layer_stride: int = 1  # sweep every layer_stride-th layer (the last one always)
    sweep_modes: tuple[str, ...] = ("keep", "remove", "flip")
    batch_size: int = 200
    eps: float = 1e-8
    steering_prompts: tuple[str, ...] = STEERING_PROMPTS
    control_prompts: tuple[str, ...] = CONTROL_PROMPTS
    max_new_tokens: int = 50
    control_new_tokens: int = 20
    n_display: int = 3  # sampled continuations shown (Figure 6)
    n_samples: int = 3  # sampled continuations per steering prompt (the paper: "several")
    # The paper gates without giving a threshold; the reference code does not gate (gate = 0).
    gate: float = 0.2
    gate_grid: tuple[float, ...] = GATE_GRID  # gates also measured, for the gate table
    probe: float = 0.2  # the reference code's probe strength, buffer and cap
    epsilon: float = 1.0
    cap: float | None = 50.0
    temperature: float = 1.0
    top_k: int = 50
    generation_seed: int = 0

    def __post_init__(self):
        for name in ("models", "sweep_modes", "steering_prompts", "control_prompts", "gate_grid"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.models:
            raise ValueError("models is empty: name at least one model (see corelib.lm.available_models())")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"models lists a model twice: {list(self.models)}")
        bad = [m for m in self.sweep_modes if m not in MODES]
        if bad or "flip" not in self.sweep_modes:
            raise ValueError(
                f"sweep_modes must be among {MODES} and include 'flip' (the layer is "
                f"chosen by the flip effect), got {list(self.sweep_modes)}"
            )
        if int(self.layer_stride) != self.layer_stride or self.layer_stride < 1:
            raise ValueError(f"layer_stride must be a positive integer, got {self.layer_stride}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {self.batch_size}")
        object.__setattr__(self, "gate_grid", tuple(sorted({float(g) for g in self.gate_grid})))
        for g in (self.gate, *self.gate_grid):
            SteeringConfig(gate=g)  # a clear error for a gate outside [0, 1]

        check_settings(
            "SVAParams",
            integers={
                k: getattr(self, k)
                for k in ("n_per_number", "batch_size", "max_new_tokens", "control_new_tokens", "n_display", "top_k")
            },
            positive={"temperature": self.temperature, "probe": self.probe, "eps": self.eps},
            non_negative={"epsilon": self.epsilon, "n_samples": self.n_samples},
        )
        if self.cap is not None:
            check_settings("SVAParams", positive={"cap": self.cap})
        for name in ("dataset_seed", "generation_seed"):
            check_seed("SVAParams", name, getattr(self, name))
        if not all(isinstance(m, str) and m for m in self.models):
            raise ValueError(f"SVAParams: models must be model names (strings), got {list(self.models)}.")

    @classmethod
    def from_namespace(cls, namespace: dict) -> SVAParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    @property
    def steering(self) -> SteeringConfig:
        return self.steering_at(self.gate)

    def steering_at(self, gate: float) -> SteeringConfig:
        """The steering settings with the gate threshold ``gate``."""
        return SteeringConfig(gate=gate, probe=self.probe, epsilon=self.epsilon, cap=self.cap)

    @property
    def gates(self) -> tuple[float, ...]:
        """The measured gates: ``gate_grid`` and ``gate``, ascending."""
        return tuple(sorted({*self.gate_grid, float(self.gate)}))

    def sweep_part(self) -> dict:
        """The parameters that determine one model's layer sweep (its run-folder key)."""
        keys = ("n_per_number", "dataset_seed", "layer_stride", "sweep_modes", "eps")
        return {k: getattr(self, k) for k in keys}

    def steering_part(self) -> dict:
        keys = (
            "steering_prompts",
            "control_prompts",
            "max_new_tokens",
            "control_new_tokens",
            "n_display",
            "n_samples",
            "gate",
            "gate_grid",
            "probe",
            "epsilon",
            "cap",
            "temperature",
            "top_k",
            "generation_seed",
        )
        return {k: getattr(self, k) for k in keys}


# --------------------------------------------------------------------------- the chapter


@dataclass(frozen=True)
class ModelAnalysis:
    """One language model of the chapter: its layer sweep, the chosen layer's core and its
    interventions on the held-out prompts, and its steering run.

    Attributes:
        model, n_layers, d_model, n_params, vocab_size: the model's name and size.
        layers: the swept layers (0-based); ``depth``: each as a share of the depth, (layer + 1) / n_layers.
        baseline_auc: the AUC of the clean agreement margin for the number (plural: positive).
        sweep_auc: per mode (keep, remove, flip), the margin's AUC with each swept layer's core intervened on.
        spectral_gap_by_layer: per swept layer, the core's spectral gap.
        chosen_layer: the layer whose core the chapter keeps (0-based); ``rank``: its rank.
        spectral_gap: its spectral gap; ``singular_values``: its first 10 balanced singular values.
        auc: the margin's AUC unmodified (``baseline``) and per mode at the chosen layer.
        coords: per test prompt, the core coordinate (signed to rise with the margin).
        margins, scores: per intervention (``baseline`` and each mode), per test prompt, the
            margin and the agreement score (the margin signed by the prompt's number).
        wilcoxon_p: per mode (remove, flip), the p-value of the paired Wilcoxon test of the
            scores against the baseline's.
        plural: per test prompt, the number (1: plural).
        core: the chosen core's first direction (``basis``), ``mean`` and ``singular_values``, as stored.
        steering: the steering run (:func:`steering_run`), with its inversion counts.
    """

    model: str
    n_layers: int
    d_model: int
    n_params: int
    vocab_size: int
    layers: list[int]
    depth: list[float]
    baseline_auc: float
    sweep_auc: dict[str, list[float]]
    spectral_gap_by_layer: list[float]
    chosen_layer: int
    rank: int
    spectral_gap: float
    singular_values: list[float]
    auc: dict[str, float]
    coords: list[float]
    margins: dict[str, list[float]]
    scores: dict[str, list[float]]
    wilcoxon_p: dict[str, float]
    plural: list[int]
    core: dict
    steering: SteeringRun

    @classmethod
    def from_json(cls, stored: dict) -> ModelAnalysis:
        """The stored analysis, model facts and steering of one model, as :func:`run` gathers them."""
        return cls(**{f.name: stored[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class AlignmentPair:
    """Two models' core coordinates of the same test prompts, correlated (:func:`alignment`)."""

    models: tuple[str, str]
    spearman: float
    pearson: float


@dataclass(frozen=True)
class SVASummary:
    """What :func:`run` returns.

    Attributes:
        params: the chapter's parameters.
        n_prompts, n_test: the prompts of the data set, and the held-out half.
        models: one :class:`ModelAnalysis` per model, in the order of ``params.models``.
        pairs: one :class:`AlignmentPair` per pair of models.
        fisher_p: per mode (remove, flip), the models' Wilcoxon p-values combined by Fisher's method.
    """

    params: SVAParams
    n_prompts: int
    n_test: int
    models: list[ModelAnalysis]
    pairs: list[AlignmentPair]
    fisher_p: dict[str, float]


def load_agreement_model(name: str) -> LanguageModel:
    """The language model ``name`` with the agreement read-out; the built-in tiny model also
    takes the task's words for its tokenizer."""
    return load_model(name, readout=AGREEMENT_READOUT, vocabulary=vocabulary() if name == TINY_MODEL else None)


def run(params: SVAParams | None = None, *, progress: bool = True) -> SVASummary:
    """Analyse (or reuse) every model, align their cores, steer; return the saved summary.

    Each model's sweep and its steering are stored in their own run folders (keyed by the model
    and the parameters that matter), so changing a steering setting does not redo the sweep.
    """
    params = params or SVAParams()
    ds = make_dataset(params.n_per_number, params.dataset_seed)
    models = []
    for name in params.models:
        sweep_dir = run_dir("sva", {"model": name, **params.sweep_part()})
        steer_dir = run_dir("sva_steering", {"model": name, **params.sweep_part(), **params.steering_part()})
        analysis_path, steering_path = sweep_dir / "analysis.json", steer_dir / "steering.json"
        loaded = []  # the model, loaded at most once and only if something is computed

        def lm(name: str = name, loaded: list = loaded) -> LanguageModel:
            if not loaded:
                loaded.append(load_agreement_model(name))
            return loaded[0]

        sweep = LayerSweepAnalysis.from_json(
            compute_once(analysis_path, lambda: analyse_model(lm(), ds, params, progress=progress).to_json())
        )
        # stored beside the sweep (not in it), so sweeps stored before it was recorded stay valid
        facts = compute_once(sweep_dir / "model.json", lambda: model_facts(lm()))
        steering = SteeringRun.from_json(
            compute_once(
                steering_path, lambda sweep=sweep: steering_run(lm(), sweep, params, progress=progress).to_json()
            )
        )
        models.append({**sweep.to_json(), **facts, "steering": steering})
        loaded.clear()
    pairs = [
        AlignmentPair(models=(a["model"], b["model"]), **alignment(a["coords"], b["coords"]))
        for a, b in itertools.combinations(models, 2)
    ]
    return SVASummary(
        params=params,
        n_prompts=len(ds),
        n_test=len(ds.test),
        models=[ModelAnalysis.from_json(m) for m in models],
        pairs=pairs,
        fisher_p=_fisher(models),
    )


def _fisher(models: list[dict]) -> dict:
    """Per-mode p-values of the paired Wilcoxon tests combined over models (Fisher's method)."""
    return {
        mode: float(stats.combine_pvalues([max(m["wilcoxon_p"][mode], 1e-300) for m in models], method="fisher").pvalue)
        for mode in ("remove", "flip")
    }


def tables(summary: SVASummary) -> dict[str, pandas.DataFrame]:
    """Tables A5 (core alignment), A6 (core size and location) and A7 (ablation AUCs)."""
    import pandas as pd

    a5 = pd.DataFrame(
        [[p.spearman, p.pearson] for p in summary.pairs],
        index=[" × ".join(p.models) for p in summary.pairs],
        columns=["Spearman's ρ", "Pearson's r (CCA 1-D)"],
    ).round(3)
    a6 = pd.DataFrame(
        [
            [
                f"{m.n_params / 1e6:.0f} M",
                m.n_layers,
                m.d_model,
                m.rank,
                f"{m.spectral_gap:.3g}",
                f"{spectral_gap_paper(m.spectral_gap):.3g}",
                m.chosen_layer + 1,
            ]
            for m in summary.models
        ],
        index=[m.model for m in summary.models],
        columns=[
            "Parameters",
            "Layers",
            "d_model",
            "d_core",
            "Spectral gap (σ1/σ2)²",
            "(σ1/σ2)⁴, the paper's convention",
            "Core location (layer)",
        ],
    )
    a7 = pd.DataFrame(
        [[m.auc[k] for k in ("baseline", "keep", "remove", "flip")] for m in summary.models],
        index=[m.model for m in summary.models],
        columns=["Baseline", "Core-only", "Core-removed", "Core-flipped"],
    ).round(3)
    return {"A5": a5, "A6": a6, "A7": a7}


def sampling_table(summary: SVASummary):
    """Per model: inversion rates of the agreement verbs and of the other number words, greedy and
    sampled, steered and (sampled) unsteered."""
    import pandas as pd

    rows = []
    for m in summary.models:
        s = m.steering
        for what, greedy, sampled in (
            ("verbs", s.inversion, s.sampled_inversion),
            ("other number words", s.other_words.greedy, s.other_words.sampled),
        ):
            rows.append(
                {
                    "model": m.model,
                    "words": what,
                    "greedy: decisions": greedy.decisions,
                    "greedy: inverted": greedy.rate,
                    "sampled: decisions": sampled.steered.decisions,
                    "sampled: inverted": sampled.steered.rate,
                    "sampled, unsteered: inverted": sampled.unsteered.rate,
                }
            )
    return pd.DataFrame(rows).set_index(["model", "words"]).round(3)


def flip_demo_table(summary: SVASummary):
    """Per model and demonstration prompt: P(is), P(are), P(was), P(were), unmodified and flipped."""
    import pandas as pd

    rows = [
        {
            "model": m.model,
            "prompt": r.prompt,
            **{f"P({v}) {k}": r[k][v] for v in ("is", "are", "was", "were") for k in ("baseline", "flip")},
        }
        for m in summary.models
        for r in m.steering.flip_demo
    ]
    return pd.DataFrame(rows).set_index(["model", "prompt"]).round(3)


PAPER_MODELS = ("gpt2", "gpt2-medium", "gpt2-large", "meta-llama/Llama-3.1-8B", "google/gemma-2-9b", "Qwen/Qwen2.5-32B")
"""The paper's six language models (hub names); they cannot be loaded offline here."""


def paper_deviations(params: SVAParams) -> dict[str, str]:
    """Settings of ``params`` that differ from the paper's (:func:`corelib.claims.deviations`), the
    paper's six models included; batch size and display settings change nothing measured."""
    from ..claims import deviations

    paper = SVAParams(models=PAPER_MODELS)
    return deviations(
        params,
        paper,
        ignore=("batch_size", "n_display", "gate_grid", "steering_prompts", "control_prompts", "control_new_tokens"),
    )


def spectral_gap_paper(gap: float) -> float:
    """The paper's Table A6 convention, ``(s1/s2)^4``, from :attr:`corelib.ace.Core.spectral_gap`
    ``(s1/s2)^2``: its code squares the singular values before taking their ratio squared."""
    return gap**2


def claim_values(summary: SVASummary) -> dict:
    """The measured values of the paper's agreement claims (ids of :data:`corelib.claims.CLAIMS`),
    as ``{model or pair: value}``; the alignment claims are empty with a single model."""
    models = {m.model: m for m in summary.models}
    pairs = {" × ".join(p.models): p for p in summary.pairs}
    steer = {k: m.steering for k, m in models.items()}
    demo = {k: next(r for r in s.flip_demo if r.prompt == FLIP_DEMO_PROMPTS[0]) for k, s in steer.items()}
    return {
        "sva.rank": {k: m.rank for k, m in models.items()},
        "sva.spectral_gap": {k: spectral_gap_paper(m.spectral_gap) for k, m in models.items()},
        "sva.auc_baseline": {k: m.auc["baseline"] for k, m in models.items()},
        "sva.auc_keep": {k: m.auc["keep"] for k, m in models.items()},
        "sva.auc_remove": {k: m.auc["remove"] for k, m in models.items()},
        "sva.auc_flip": {k: m.auc["flip"] for k, m in models.items()},
        "sva.pearson": {k: p.pearson for k, p in pairs.items()},
        "sva.spearman": {k: p.spearman for k, p in pairs.items()},
        "sva.key_is_base": {k: d.baseline["is"] for k, d in demo.items()},
        "sva.key_is_flip": {k: d.flip["is"] for k, d in demo.items()},
        "sva.key_are_base": {k: d.baseline["are"] for k, d in demo.items()},
        "sva.key_are_flip": {k: d.flip["are"] for k, d in demo.items()},
        "sva.steering_rate": {k: s.sampled_inversion.steered.rate for k, s in steer.items()},
        "sva.steering_other_words": {k: s.other_words.sampled.steered.rate for k, s in steer.items()},
        "sva.steering_untouched": {
            k: c.decision_free_unchanged / c.decision_free
            for k, c in ((k, control_summary(s)) for k, s in steer.items())
            if c.decision_free
        },
    }


# --------------------------------------------------------------------------- what the chapter quotes


def example_prompts(ds: SVADataset, n: int = 8) -> pandas.DataFrame:
    """The first ``n`` prompts of the data set, with the head noun's number and the template."""
    import pandas as pd

    return pd.DataFrame(
        {
            "prompt": ds.prompts[:n],
            "head": np.where(ds.plural[:n] == 1, "plural", "singular"),
            "template": ds.template[:n],
        }
    )


def gate_frame(summary: SVASummary) -> pandas.DataFrame:
    """:func:`gate_table` of every model, indexed by (model, gate)."""
    import pandas as pd

    frames = {m.model: gate_table(m.steering) for m in summary.models}
    return pd.concat(frames, names=["model", "gate"])


def steering_table(summary: SVASummary) -> pandas.DataFrame:
    """Per model: agreement decisions of the greedy steered continuations and how many steering
    inverted, and what steering did to the control prompts."""
    import pandas as pd

    rows = []
    for m in summary.models:
        steering, inversion = m.steering, m.steering.inversion
        rows.append(
            {
                "model": m.model,
                "decisions": inversion.decisions,
                "inverted": inversion.inverted,
                "inversion rate": inversion.rate,
                "clean-verb decisions": inversion.clean_verb_decisions,
                "clean-verb rate": inversion.rate_clean_verbs,
                "decisions not steered": inversion.ungated_decisions,
                "steered steps": inversion.steered_steps,
                "controls": steering.n_control,
                "controls unchanged": steering.control_unchanged,
                "control steered steps": steering.control_steered_steps,
            }
        )
    return pd.DataFrame(rows).set_index("model")


def control_table(summary: SVASummary) -> pandas.DataFrame:
    """:func:`control_summary` rows of every model."""
    import pandas as pd

    return pd.concat({m.model: control_summary(m.steering).table for m in summary.models})


def _nan_min(values) -> float:
    values = [v for v in values if v is not None]
    return min(values) if values else float("nan")


def _nan_max(values) -> float:
    values = [v for v in values if v is not None]
    return max(values) if values else float("nan")


def _steering_values(params: SVAParams, summary: SVASummary) -> dict[str, object]:
    import pandas as pd

    models = summary.models
    controls = [control_summary(m.steering) for m in models]
    changed = pd.concat([c.table.loc[~c.table["unchanged"].astype(bool)] for c in controls], ignore_index=True)
    return {
        "gate_value": params.gate,
        "cap_value": params.cap,
        "probe_value": params.probe,
        "epsilon_value": params.epsilon,
        "n_steer": len(params.steering_prompts),
        "n_control": len(params.control_prompts),
        "sampled_inv_min": _nan_min(m.steering.sampled_inversion.steered.rate for m in models),
        "sampled_inv_max": _nan_max(m.steering.sampled_inversion.steered.rate for m in models),
        "unsteered_inv_max": _nan_max(m.steering.sampled_inversion.unsteered.rate for m in models),
        "other_inv_max": _nan_max(m.steering.other_words.sampled.steered.rate for m in models),
        "grid_inv_max": _nan_max(float(v) for m in models for v in gate_table(m.steering)["inversion rate"].dropna()),
        "gate_grid_text": ", ".join(f"{g:g}" for g in params.gates),
        "inv_min": _nan_min(m.steering.inversion.rate for m in models),
        "inv_max": _nan_max(m.steering.inversion.rate for m in models),
        "decisions_total": int(sum(m.steering.inversion.decisions for m in models)),
        "strict_min": _nan_min(m.steering.inversion.rate_clean_verbs for m in models),
        "free_total": sum(c.decision_free for c in controls),
        "free_unchanged": sum(c.decision_free_unchanged for c in controls),
        "control_changed": len(changed),
        "control_changed_verbs": int(changed["verbs in base text"].astype(bool).sum()),
        "temperature_value": params.temperature,
        "top_k_value": params.top_k,
        "n_samples_value": params.n_samples,
        "other_words_text": ", ".join(models[0].steering.other_words.words),
    }


def _example_values(summary: SVASummary, ds: SVADataset) -> dict[str, object]:
    """A singular held-out prompt, its margin unmodified and with the first model's core flipped."""
    prompts, plural = ds.split("test")
    example = next(i for i, is_plural in enumerate(plural) if not is_plural)
    first = summary.models[0]
    return {
        "ex_prompt": prompts[example],
        "ex_model": first.model,
        "ex_base": first.margins["baseline"][example],
        "ex_flip": first.margins["flip"][example],
    }


def _thousands(n: int) -> str:
    """``49152`` -> ``"49 152"``: digits grouped by three, as the book writes large counts."""
    return f"{n:,}".replace(",", " ")


def _model_values(summary: SVASummary) -> dict[str, object]:
    """The models' sizes, each a list in the order of ``model_list``."""
    models = summary.models
    return {
        "vocab_sizes": ", ".join(_thousands(m.vocab_size) for m in models),
        "layer_counts": ", ".join(str(m.n_layers) for m in models),
        "widths": ", ".join(str(m.d_model) for m in models),
        "params_millions": ", ".join(f"{m.n_params / 1e6:.0f}" for m in models),
    }


def _flip_demo_values(summary: SVASummary) -> dict[str, float]:
    """The paper's single prompt flipped in our models: the least factor by which P(is) falls, and
    the range of P(are) after the flip."""
    demo = [next(r for r in m.steering.flip_demo if r.prompt == FLIP_DEMO_PROMPTS[0]) for m in summary.models]
    return {
        "key_is_fall_min": min(d.baseline["is"] / d.flip["is"] if d.flip["is"] else np.inf for d in demo),
        "key_are_flip_min": min(d.flip["are"] for d in demo),
        "key_are_flip_max": max(d.flip["are"] for d in demo),
    }


def glue_values(params: SVAParams, summary: SVASummary, ds: SVADataset) -> dict[str, object]:
    """Every value the subject-verb agreement chapter's prose quotes, by glue name."""
    from ..claims import claim

    models, pairs = summary.models, summary.pairs
    return {
        "n_prompts": len(ds),
        "n_half": len(ds.test),
        "model_list": ", ".join(m.model for m in models),
        "base_min": min(m.auc["baseline"] for m in models),
        "base_max": max(m.auc["baseline"] for m in models),
        "keep_min": min(m.auc["keep"] for m in models),
        "remove_max": max(m.auc["remove"] for m in models),
        "flip_max": max(m.auc["flip"] for m in models),
        "gap_min": min(m.spectral_gap for m in models),
        "depth_min": min((m.chosen_layer + 1) / m.n_layers for m in models),
        "layer_stride": params.layer_stride,
        "sweep_modes_text": ", ".join(params.sweep_modes),
        "p_remove": summary.fisher_p["remove"],
        "p_flip": summary.fisher_p["flip"],
        "pearson_min": min((pair.pearson for pair in pairs), default=float("nan")),
        "spearman_min": min((pair.spearman for pair in pairs), default=float("nan")),
        **{
            f"paper_{key}": f"{claim(f'sva.key_{key}').value:g}"
            for key in ("is_base", "is_flip", "are_base", "are_flip")
        },
        **_model_values(summary),
        **_flip_demo_values(summary),
        **_example_values(summary, ds),
        **_steering_values(params, summary),
    }
