"""The paper's Markov-chain experiment (Figure 1, Tables A1-A3), end to end.

Three one-block transformers trained from different seeds on the same chain; for each, ACE on the
block output (target = logits), core-only / core-removed accuracy, and a linear operator fitted in
core coordinates. Across models: weight cosines, projector overlaps, principal angles and CCA.

:func:`run` trains (or reuses) the models together on the engine, analyses them and saves the
summary in a run folder keyed by the parameters. Plots read only what :func:`run` returns.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .. import ace, compare, operators
from .._checks import check_memory, check_seed, check_seeds, check_settings, is_whole
from ..engine import SequenceData, StackConfig, load_snapshot, snapshot_epochs, train_stack
from ..interventions import accuracy, intervention_accuracy
from ..masks import MASK_GENERATOR
from ..models import MODEL_REVISION, Transformer, TransformerConfig, default_device, resid_hook
from ..results import StoreError, load_json, run_dir, run_lock, save_json, save_tensors
from ..tasks import markov
from ..typed_records import ItemAccess, check_keys
from .markov_chain_records import (
    COMPLEX,
    FIX,
    LIST,
    OBJECT,
    REAL,
    SHARE,
    Accuracies,
    MarkovModel,
    MarkovModelAnalysis,
    ModelPair,
    Spec,
    TrainingHistory,
    check_format,
    complex_from_json,
    complex_to_json,
    read_fields,
)

if TYPE_CHECKING:
    import pandas

__all__ = [
    "MarkovParams",
    "MarkovSummary",
    "MarkovModel",
    "MarkovModelAnalysis",
    "ModelPair",
    "Accuracies",
    "TrainingHistory",
    "run",
    "run_folder",
    "RankSensitivity",
    "rank_sensitivity",
    "rank_values",
    "rank_table",
    "make_data",
    "analyse_model",
    "compare_models",
    "tables",
    "claim_values",
    "glue_values",
]


@dataclass(frozen=True)
class MarkovParams:
    """All settings of the experiment; defaults are the paper's."""

    alpha: float = 0.75
    beta: float = 0.25
    n_states: int = 4
    n_train: int = 3000
    n_test: int = 3000
    seq_len: int = 32
    train_seed: int = 0
    test_seed: int = 999
    seeds: tuple[int, ...] = (0, 100, 200)
    epochs: int = 40
    batch_size: int = 64
    lr: float = 1e-3  # the reference code used 1e-4
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    n_jacobians: int = 128
    energy: float = 0.999
    jacobian_seed: int = 0

    def __post_init__(self):
        # the chapter compares every pair of models: two seeds at least
        object.__setattr__(self, "seeds", check_seeds("MarkovParams", self.seeds, at_least=2))
        check_settings(
            "MarkovParams",
            integers={k: getattr(self, k) for k in ("n_train", "n_test", "batch_size", "n_jacobians")},
            epochs={"epochs": self.epochs},
            rates={"lr": self.lr},
            fractions={"energy": self.energy},
            non_negative={"alpha": self.alpha, "beta": self.beta, "dropout": self.dropout},
        )
        if not is_whole(self.n_states) or self.n_states < 2:
            raise ValueError(f"MarkovParams: n_states must be a whole number of at least 2 (a chain with somewhere "
                             f"to go), got {self.n_states!r}.")  # fmt: skip
        check_memory("MarkovParams", "n_states", self.n_states, 8.0 * self.n_states**2, "its transition matrix")
        for name in ("train_seed", "test_seed", "jacobian_seed"):
            check_seed("MarkovParams", name, getattr(self, name))
        if self.n_jacobians > self.n_test * (self.seq_len - 1):
            raise ValueError(
                f"MarkovParams: n_jacobians = {self.n_jacobians} exceeds the {self.n_test * (self.seq_len - 1)} test "
                f"positions (n_test x (seq_len - 1)) it samples from; choose at most that many."
            )
        if not self.dropout < 1:
            raise ValueError(f"MarkovParams: dropout must be below 1 (1 drops everything), got {self.dropout!r}.")
        markov.transition_matrix(self.alpha, self.beta, self.n_states)  # alpha + beta = 1, with its message
        rows = self.model_config().n_ctx  # inputs are seq_len - 1 tokens long
        if not 2 < self.seq_len <= rows + 1:
            raise ValueError(
                f"seq_len must lie in [3, {rows + 1}] (the models' position table has {rows} rows), got {self.seq_len}."
            )

    @classmethod
    def from_namespace(cls, namespace: dict) -> MarkovParams:
        """Build from a notebook's variables (e.g. ``globals()`` after the parameters cell)."""
        return cls(**{f.name: namespace[f.name] for f in fields(cls) if f.name in namespace})

    @property
    def chain(self) -> np.ndarray:
        return markov.transition_matrix(self.alpha, self.beta, self.n_states)

    def model_config(self) -> TransformerConfig:
        return TransformerConfig(
            vocab_size=self.n_states,
            d_model=self.d_model,
            n_heads=self.n_heads,
            d_ff=self.d_ff,
            n_layers=1,
            dropout=self.dropout,
            norm="post",
        )

    def train_config(self) -> StackConfig:
        """AdamW on the loss over every position, without weight decay; the state saved every epoch."""
        return StackConfig(
            epochs=self.epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            weight_decay=0.0,
            loss_positions="all",
            snapshot_every=self.epochs or 1,
            checkpoint_every=1,
        )


# --------------------------------------------------------------------------- results


_SUMMARY_SPECS: dict[str, Spec] = {
    "params": OBJECT,
    "bayes_accuracy": SHARE,
    "chance_accuracy": SHARE,
    "oracle_r2": REAL,
    "chain_eigenvalues": COMPLEX,
    "models": LIST,
    "pairs": LIST,
}


@dataclass(frozen=True)
class MarkovSummary(ItemAccess):
    """What :func:`run` computes and stores (``summary.json``, :meth:`to_json`): the chain's
    reference values, each model and each pair.

    Attributes:
        params: the parameters of the run.
        bayes_accuracy: the accuracy of always predicting the likeliest next state, in [0, 1].
        chance_accuracy: the accuracy of guessing the stationary distribution's likeliest state, in [0, 1].
        oracle_r2: the R² of the best linear predictor of the next state's one-hot vector.
        chain_eigenvalues: the chain's non-trivial eigenvalues (complex), shape (n_states - 1,).
        models: one :class:`MarkovModel` per seed, in the order of ``params.seeds``.
        pairs: one :class:`ModelPair` per pair of models.
    """

    params: MarkovParams
    bayes_accuracy: float
    chance_accuracy: float
    oracle_r2: float
    chain_eigenvalues: tuple[complex, ...]
    models: tuple[MarkovModel, ...]
    pairs: tuple[ModelPair, ...]

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> MarkovSummary:
        """The summary from its stored JSON (:meth:`to_json`), in any format this version reads
        (:data:`~corelib.experiments.markov_chain_records.MARKOV_FORMAT`); refuses unknown or
        missing keys and values of the wrong type, naming the field."""
        check_format(stored, "Markov summary")
        read_fields(stored, "Markov summary", {**_SUMMARY_SPECS, "format": REAL}, optional=("format",))
        # every setting may be absent (a setting added since falls back to its default)
        settings = [f.name for f in fields(MarkovParams)]
        check_keys(stored["params"], "Markov summary's params", (), settings, fix=FIX)
        params = {k: tuple(v) if isinstance(v, list) else v for k, v in stored["params"].items()}
        return cls(
            params=MarkovParams(**params),
            bayes_accuracy=stored["bayes_accuracy"],
            chance_accuracy=stored["chance_accuracy"],
            oracle_r2=stored["oracle_r2"],
            chain_eigenvalues=complex_from_json(stored["chain_eigenvalues"]),
            models=tuple(MarkovModel.from_json(m) for m in stored["models"]),
            pairs=tuple(ModelPair.from_json(p) for p in stored["pairs"]),
        )

    def to_json(self) -> dict[str, Any]:
        """The stored form (format 1): plain JSON types, complex numbers as ``[re, im]``."""
        return {
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self.params).items()},
            "bayes_accuracy": self.bayes_accuracy,
            "chance_accuracy": self.chance_accuracy,
            "oracle_r2": self.oracle_r2,
            "chain_eigenvalues": complex_to_json(self.chain_eigenvalues),
            "models": [m.to_json() for m in self.models],
            "pairs": [p.to_json() for p in self.pairs],
        }


def make_data(params: MarkovParams) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Train and test (inputs, targets): inputs are tokens 0..L-2, targets tokens 1..L-1."""
    out = {}
    for split, n, seed in (("train", params.n_train, params.train_seed), ("test", params.n_test, params.test_seed)):
        seq = torch.from_numpy(markov.sample_sequences(params.chain, n, params.seq_len, seed))
        out[split] = (seq[:, :-1], seq[:, 1:])
    return out


@torch.no_grad()
def block_output(model: Transformer, inputs: torch.Tensor, layer: int = 0) -> torch.Tensor:
    """Activations at the output of block ``layer``, (batch, pos, D), via ``run_with_cache``."""
    name = resid_hook(layer)
    device = next(model.parameters()).device
    _, cache = model.run_with_cache(inputs.to(device), names_filter=name)
    return cache[name]


def analyse_model(
    model: Transformer, test: tuple[torch.Tensor, torch.Tensor], params: MarkovParams
) -> MarkovModelAnalysis:
    """ACE, ablations and core dynamics of one trained model on the test set."""
    x, y = test
    layer = model.cfg.n_layers - 1
    h = block_output(model, x, layer)  # (n, T, D)
    flat = h.reshape(-1, h.shape[-1])
    jac = ace.jacobians(model.readout(layer), flat, n_samples=params.n_jacobians, seed=params.jacobian_seed)
    core = ace.extract(flat.cpu().double(), jac, energy=params.energy)
    acc = Accuracies(
        full=accuracy(model, x, y),
        **{mode: intervention_accuracy(model, x, y, resid_hook(layer), core, mode) for mode in ("keep", "remove")},
    )
    z = core.coords(flat.cpu().double().numpy()).reshape(h.shape[0], h.shape[1], core.rank)
    a, eig, r2 = operators.fit_dynamics(z[:, :-1].reshape(-1, core.rank), z[:, 1:].reshape(-1, core.rank))
    return MarkovModelAnalysis(
        accuracy=acc, core=core, coords=z.reshape(-1, core.rank), operator=a, eigenvalues=eig, r2=r2
    )


def compare_models(models: list[Transformer], analyses: list[MarkovModelAnalysis]) -> list[ModelPair]:
    """Pairwise weight cosine, projector overlap, principal angles and CCA of core coordinates."""
    pairs = []
    for i, j in itertools.combinations(range(len(models)), 2):
        qi, qj = analyses[i].core.basis, analyses[j].core.basis
        pairs.append(
            ModelPair(
                models=(i, j),
                weight_cosine=compare.weight_cosine(models[i], models[j]),
                weight_cosine_by_tensor=compare.weight_cosines_by_tensor(models[i], models[j]),
                overlap=compare.projector_overlap(qi, qj),
                angles=tuple(compare.principal_angles(qi, qj).tolist()),
                cca=tuple(compare.cca(analyses[i].coords, analyses[j].coords).tolist()),
            )
        )
    return pairs


def _summary(
    params: MarkovParams,
    analyses: list[MarkovModelAnalysis],
    pairs: list[ModelPair],
    histories: list[TrainingHistory],
) -> MarkovSummary:
    t = params.chain
    target = markov.chain_eigenvalues(t)
    return MarkovSummary(
        params=params,
        bayes_accuracy=markov.bayes_accuracy(t),
        chance_accuracy=markov.chance_accuracy(t),
        oracle_r2=markov.oracle_r2(t),
        chain_eigenvalues=tuple(complex(v) for v in target),
        models=tuple(a.summarised(s, h, target) for s, a, h in zip(params.seeds, analyses, histories)),
        pairs=tuple(pairs),
    )


def run_folder(p: MarkovParams) -> Path:
    """The results folder of a run with parameters ``p`` (created with its ``params.json``)."""
    ident = {**asdict(p), "model": MODEL_REVISION, "sampler": "RandomState", "trainer": "engine"}
    return run_dir("markov", {**ident, "masks": MASK_GENERATOR} if p.dropout else ident)


def run(p: MarkovParams | None = None, *, progress: bool = True) -> MarkovSummary:
    """Train (or reuse) the models, analyse them, and return the summary saved in the run folder.

    A second process asking for the same run waits for the first and reuses its summary.
    """
    p = p or MarkovParams()
    folder = run_folder(p)
    summary_path = folder / "summary.json"
    with run_lock(folder, "the Markov experiment"):
        if not summary_path.exists():
            save_json(summary_path, _compute(p, folder, progress).to_json())
    return MarkovSummary.from_json(load_json(summary_path))


def _compute(p: MarkovParams, folder, progress: bool) -> MarkovSummary:
    data = make_data(p)
    device = default_device()
    train, test = (SequenceData(*data[k]) for k in ("train", "test"))
    stack, hist = train_stack(
        p.model_config(), p.train_config(), p.seeds, train, test, folder / "train", device=device, progress=progress
    )
    models = [stack.model(i) for i in range(len(p.seeds))]
    histories = [
        TrainingHistory(*(tuple(row[i] for row in hist[k]) for k in ("loss", "train_acc", "test_acc")))
        for i in range(len(p.seeds))
    ]
    analyses = [analyse_model(m, data["test"], p) for m in tqdm(models, desc="Markov models", disable=not progress)]
    save_tensors(
        folder / "cores.safetensors",
        {
            **{f"basis_{s}": torch.from_numpy(a.core.basis) for s, a in zip(p.seeds, analyses)},
            **{f"operator_{s}": torch.from_numpy(np.asarray(a.operator)) for s, a in zip(p.seeds, analyses)},
        },
    )
    return _summary(p, analyses, compare_models(models, analyses), histories)


def _fmt_complex(v: complex) -> str:
    return f"{v.real:.2f}" if abs(v.imag) < 5e-3 else f"{v.real:.2f} {'+' if v.imag >= 0 else '-'} {abs(v.imag):.2f}i"


def _names(summary: MarkovSummary) -> list[str]:
    return [f"M{i + 1}" for i in range(len(summary.models))]


def ablation_table(summary: MarkovSummary) -> pandas.DataFrame:
    """Table A1: per model (rows M1, M2, ...), the accuracy of the full, core-only and
    core-removed model, rounded to 3 decimals."""
    import pandas as pd

    rows = [[m.accuracy.full, m.accuracy.keep, m.accuracy.remove] for m in summary.models]
    return pd.DataFrame(rows, index=_names(summary), columns=["Full model", "Core-only", "Core-removed"]).round(3)


def geometry_table(summary: MarkovSummary) -> pandas.DataFrame:
    """Table A2: per pair of models (rows "M1–M2", ...), projector overlap, principal angles in
    degrees and canonical correlations, as text."""
    import pandas as pd

    names = _names(summary)
    rows = [
        [f"{p.overlap:.3f}", str([round(a) for a in p.angles]), str([round(c, 3) for c in p.cca])]
        for p in summary.pairs
    ]
    index = [f"{names[p.models[0]]}–{names[p.models[1]]}" for p in summary.pairs]
    return pd.DataFrame(rows, index=index, columns=["Proj. overlap", "Principal angles (°)", "CCA"])


def spectrum_table(summary: MarkovSummary) -> pandas.DataFrame:
    """Table A3: the chain's non-trivial eigenvalues (rows λ1, λ2, ...) beside those of each
    model's core operator (columns "Core 1", ...), as text."""
    import pandas as pd

    n_eig = len(summary.chain_eigenvalues)
    cols = {"Markov chain": [_fmt_complex(v) for v in summary.chain_eigenvalues]}
    for i, m in enumerate(summary.models):
        ev = [_fmt_complex(v) for v in m.eigenvalues][:n_eig]
        cols[f"Core {i + 1}"] = ev + [""] * (n_eig - len(ev))
    return pd.DataFrame(cols, index=[f"λ{k + 1}" for k in range(n_eig)])


def tables(summary: MarkovSummary) -> dict[str, pandas.DataFrame]:
    """Tables A1 (:func:`ablation_table`), A2 (:func:`geometry_table`) and A3 (:func:`spectrum_table`)."""
    return {"A1": ablation_table(summary), "A2": geometry_table(summary), "A3": spectrum_table(summary)}


def claim_values(summary: MarkovSummary) -> dict:
    """The measured values of the paper's Markov claims (ids of :data:`corelib.claims.CLAIMS`)."""
    models, pairs = summary.models, summary.pairs
    return {
        "markov.accuracy": [m.accuracy.full for m in models],
        "markov.keep_accuracy": [m.accuracy.keep for m in models],
        "markov.remove_accuracy": [m.accuracy.remove for m in models],
        "markov.rank": [m.rank for m in models],
        "markov.weight_cosine": [abs(p.weight_cosine) for p in pairs],
        "markov.overlap": [p.overlap for p in pairs],
        "markov.angles": [a for p in pairs for a in p.angles],
        "markov.cca_top2": [c for p in pairs for c in p.cca[:2]],
        "markov.cca_third": [p.cca[2] for p in pairs if len(p.cca) > 2],
        "markov.cca_mean": [float(np.mean(p.cca)) for p in pairs],
        "markov.spectrum_error": [float("nan") if m.spectrum_error is None else m.spectrum_error for m in models],
        "markov.r2_ratio": [m.r2 / summary.oracle_r2 for m in models],
    }


def glue_values(summary: MarkovSummary) -> dict[str, object]:
    """Every value the Markov chapter's prose quotes, by glue name."""
    models, pairs, settings = summary.models, summary.pairs, summary.params
    errors = [m.spectrum_error for m in models]
    return {
        "epochs": settings.epochs,
        "batch_size": settings.batch_size,
        "dropout": settings.dropout,
        "energy_pct": f"{100 * settings.energy:g}",
        "bayes": summary.bayes_accuracy,
        "chance": summary.chance_accuracy,
        "n_models": len(models),
        "ranks": ", ".join(str(m.rank) for m in models),
        "acc_min": min(m.accuracy.full for m in models),
        "acc_max": max(m.accuracy.full for m in models),
        "keep_min": min(m.accuracy.keep for m in models),
        "remove_max": max(m.accuracy.remove for m in models),
        "wcos_max": max(abs(pair.weight_cosine) for pair in pairs),
        "overlap_min": min(pair.overlap for pair in pairs),
        "overlap_max": max(pair.overlap for pair in pairs),
        # E ||Q1^T Q2||_F^2 = r1 r2 / D for random subspaces: sqrt(r1 r2) / D once normalised
        "overlap_chance": float(
            np.mean([np.sqrt(models[i].rank * models[j].rank) / settings.d_model for i, j in (p.models for p in pairs)])
        ),
        "angle_min": min(min(pair.angles) for pair in pairs),
        "angle_max": max(max(pair.angles) for pair in pairs),
        "cca2_min": min(min(pair.cca[:2]) for pair in pairs),
        "cca_mean_min": min(float(np.mean(pair.cca)) for pair in pairs),
        "spec_err_max": max(errors) if None not in errors else float("nan"),
        "r2_ratio_min": min(m.r2 / summary.oracle_r2 for m in models),
        "oracle_r2": summary.oracle_r2,
    }


@dataclass(frozen=True)
class RankSensitivity:
    """How the agreement between the models' cores depends on the rank at which they are cut.

    Attributes:
        ranks: the core ranks compared, (R,).
        energy_share: share of each model's activity-relevance energy in each of its leading
            directions, (models, max rank); the energy rank keeps directions until 0.999 is held.
        cca: canonical correlations of each pair's core coordinates at each rank, largest first,
            (pairs, R, max rank), NaN beyond the rank.
    """

    ranks: tuple[int, ...]
    energy_share: np.ndarray
    cca: np.ndarray


def rank_sensitivity(p: MarkovParams, ranks: tuple[int, ...] | None = None) -> RankSensitivity:
    """The models of a finished run of ``p`` (:func:`run` first), their cores cut at each of
    ``ranks`` (None: the models' largest energy rank r and r + 1) and compared pair by pair with
    canonical correlations. Reads the trained weights; trains nothing."""
    if ranks is None:
        summary = run_folder(p) / "summary.json"
        if not summary.exists():
            raise StoreError(
                f"the Markov run of these parameters has not been analysed; run the chapter first ({summary})."
            )
        r = max(m.rank for m in MarkovSummary.from_json(load_json(summary)).models)
        ranks = (r, r + 1)
    if not ranks or any(int(r) != r or r < 1 or r > p.d_model for r in ranks):
        raise ValueError(f"ranks must be whole numbers in [1, {p.d_model}]; got {ranks}.")
    train = run_folder(p) / "train"
    if p.epochs not in snapshot_epochs(train):
        raise StoreError(f"the Markov run of these parameters has not been trained; run the chapter first ({train}).")
    stack = load_snapshot(train, p.epochs, default_device())
    x = make_data(p)["test"][0]
    top = max(ranks)
    shares, coords = [], []
    for i in range(len(p.seeds)):
        model = stack.model(i)
        flat = block_output(model, x, model.cfg.n_layers - 1).reshape(-1, p.d_model)
        jac = ace.jacobians(model.readout(model.cfg.n_layers - 1), flat, n_samples=p.n_jacobians, seed=p.jacobian_seed)
        hd = flat.detach().cpu().double()
        full = ace.extract(hd, jac, rank=p.d_model)
        energy = full.singular_values**2
        shares.append(energy[:top] / energy.sum())
        coords.append({r: full.truncate(r).coords(hd.numpy()) for r in ranks})
    pairs = list(itertools.combinations(range(len(p.seeds)), 2))
    cca = np.full((len(pairs), len(ranks), top), np.nan)
    for k, (i, j) in enumerate(pairs):
        for m, r in enumerate(ranks):
            cca[k, m, :r] = compare.cca(coords[i][r], coords[j][r])
    return RankSensitivity(tuple(int(r) for r in ranks), np.asarray(shares), cca)


def rank_values(sens: RankSensitivity) -> dict:
    """The finding ``markov.cca_third_rank4``: how far the last canonical correlation of the
    energy-rank cores (the third, at rank 3) moves when one more direction is kept, the largest
    change over pairs. Empty unless ``sens`` compares a rank r with r + 1."""
    if len(sens.ranks) != 2 or sens.ranks[1] != sens.ranks[0] + 1:
        return {}
    last = sens.ranks[0] - 1
    return {"markov.cca_third_rank4": float(np.max(np.abs(sens.cca[:, 1, last] - sens.cca[:, 0, last])))}


def rank_table(sens: RankSensitivity, seeds: Sequence[int]) -> pandas.DataFrame:
    """One row per pair of models: the last canonical correlation at rank r and at r + 1, and the
    new (r + 1)-th one."""
    import pandas as pd

    r = sens.ranks[0]
    pairs = list(itertools.combinations(seeds, 2))
    return pd.DataFrame(
        {
            "models": [f"{a} & {b}" for a, b in pairs],
            f"correlation {r} at rank {r}": sens.cca[:, 0, r - 1].round(4),
            f"correlation {r} at rank {r + 1}": sens.cca[:, 1, r - 1].round(4),
            f"correlation {r + 1} at rank {r + 1}": sens.cca[:, 1, r].round(3),
        }
    ).set_index("models")
