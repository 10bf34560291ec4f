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
position and only the layers after the intervened one, which is exact.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

from .._checks import check_seed, check_settings
from ..ace import Core, MomentAccumulator
from ..interventions import MODES, intervention_hook
from ..lm import TINY_MODEL, Batch, LanguageModel, load_model
from ..models import resid_hook
from ..results import compute_once, run_dir
from ..steering import Generation, SteeringConfig, generate_batch, inversion_stats, word_inversion_stats
from ..tasks.sva import (
    AGREEMENT_READOUT,
    AGREEMENT_VERBS,
    FLIP_DEMO_PROMPTS,
    NUMBER_WORD_PAIRS,
    SVADataset,
    make_dataset,
    vocabulary,
)

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

STEERING_PROMPTS = (
    # the reference code's demonstration prompts (the paper's Figure 6 shows two), then ours
    "As a new field of research, artificial intelligence",
    "We hold these truths to be self-evident:",
    "Scientific research",
    "The keys to the cabinet",
    "The author of the books",
    "The children in the garden",
    "The man with the two dogs",
    "The teachers of the student",
    "The women near the door",
    "The mouse behind the boxes",
    "The results of the experiment",
    "The pilot of the planes",
    "My friends from school",
    "The list of names",
)
CONTROL_PROMPTS = (
    "1, 2, 3, 4, 5,",
    "Monday, Tuesday, Wednesday,",
    "January, February, March,",
    "a, b, c, d, e,",
    "10, 20, 30, 40,",
    "red, orange, yellow, green,",
    "2, 4, 6, 8,",
    "one, two, three, four,",
    "Mercury, Venus, Earth, Mars,",
    "apple, banana, cherry,",
    "Paris, London, Berlin,",
    "import numpy as np\nimport",
)
GATE_GRID = (0.1, 0.2, 0.3, 0.5)


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


# --------------------------------------------------------------------------- metrics


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


# --------------------------------------------------------------------------- passes


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
) -> dict[int, Core]:
    """Rank-1 cores of the margin at ``layers`` from activations and Jacobians on ``prompts``."""
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
    return {layer: acc[layer].core(rank=1, eps=eps) for layer in layers}


@torch.no_grad()
def intervened_margins(
    lm: LanguageModel,
    prompts: list[str],
    cores: dict[int, Core],
    modes_at: dict[int, tuple[str, ...]],
    *,
    batch_size: int = 200,
    batches: list | None = None,
    progress: bool = True,
) -> dict:
    """Test-prompt margins: clean, and under each ``mode`` of ``modes_at[layer]`` at that layer.

    Returns ``{"baseline": (N,), "acts": {layer: (N, D)}, (layer, mode): (N,)}``; the
    interventions are centred (on each core's training mean) at the last token only.
    ``batches`` are the prompts' :func:`prefix_batches` if already computed.
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
    result = {k: torch.cat(v).cpu().double().numpy()[inverse] for k, v in out.items() if k != "acts"}
    result["acts"] = {layer: torch.cat(v).numpy()[inverse] for layer, v in out["acts"].items()}
    return result


# --------------------------------------------------------------------------- one model


def analyse_model(lm: LanguageModel, ds: SVADataset, params: SVAParams, *, progress: bool = True) -> dict:
    """Layer sweep, chosen layer, coordinates, prompt-level scores and steering of one model."""
    train_prompts, _ = ds.split("train")
    test_prompts, plural = ds.split("test")
    sweep = _layer_sweep(lm, train_prompts, test_prompts, plural, params, progress)
    margins = _chosen_layer_margins(lm, test_prompts, sweep, params, progress)
    return _analysis(lm, sweep, margins, plural)


@dataclass(frozen=True)
class _LayerSweep:
    """The sweep over layers: each layer's core, the test margins under each sweep mode, the AUCs
    (``auc[mode][i]`` at ``layers[i]``), and the layer where flipping moves the AUC most."""

    layers: list[int]
    cores: dict[int, Core]
    batches: list
    margins: dict
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
    baseline = auc(m["baseline"], plural)
    sweep = {mode: [auc(m[(layer, mode)], plural) for layer in layers] for mode in params.sweep_modes}
    effect = [baseline - a for a in sweep["flip"]]
    chosen = layers[int(np.argmax(effect))]
    return _LayerSweep(layers, cores, test_batches, m, baseline, sweep, chosen)


def _chosen_layer_margins(lm, test_prompts, sweep: _LayerSweep, params: SVAParams, progress: bool) -> dict:
    """The baseline margins and those under every mode at the chosen layer (modes the sweep left
    out are computed here)."""
    m, chosen = dict(sweep.margins), sweep.chosen
    missing = tuple(mode for mode in MODES if mode not in params.sweep_modes)
    if missing:
        m.update(
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
    return {"acts": m["acts"][chosen], "baseline": m["baseline"], **{mode: m[(chosen, mode)] for mode in MODES}}


def _analysis(lm: LanguageModel, sweep: _LayerSweep, margins: dict, plural: np.ndarray) -> dict:
    core, layers = sweep.cores[sweep.chosen], sweep.layers
    acts = margins.pop("acts")
    coords = core.coords(acts)[:, 0]
    sign = 1.0 if np.corrcoef(coords, margins["baseline"])[0, 1] >= 0 else -1.0
    scores = {k: agreement_scores(v, plural) for k, v in margins.items()}
    wilcoxon = {mode: float(stats.wilcoxon(scores["baseline"], scores[mode]).pvalue) for mode in ("remove", "flip")}
    return {
        "model": lm.name,
        "n_layers": lm.n_layers,
        "d_model": lm.d_model,
        "n_params": int(sum(t.numel() for t in lm.hf.parameters())),
        "layers": layers,
        "depth": [(layer + 1) / lm.n_layers for layer in layers],
        "baseline_auc": sweep.baseline,
        "sweep_auc": sweep.auc,
        "spectral_gap_by_layer": [sweep.cores[layer].spectral_gap for layer in layers],
        "chosen_layer": sweep.chosen,
        "rank": core.rank,
        "spectral_gap": core.spectral_gap,
        "singular_values": core.singular_values[:10].tolist(),
        "auc": {"baseline": sweep.baseline, **{mode: auc(margins[mode], plural) for mode in MODES}},
        "coords": (sign * coords).tolist(),
        "margins": {k: v.tolist() for k, v in margins.items()},
        "scores": {k: v.tolist() for k, v in scores.items()},
        "wilcoxon_p": wilcoxon,
        "plural": plural.astype(int).tolist(),
        "core": {
            "basis": (sign * core.basis[:, 0]).tolist(),
            "mean": core.mean.tolist(),
            "singular_values": core.singular_values.tolist(),
        },
    }


def model_facts(lm: LanguageModel) -> dict[str, int]:
    """What the chapter says of a model beyond the sweep's layers and width: its vocabulary size
    (the rows of its input embedding)."""
    return {"vocab_size": int(lm.hf.get_input_embeddings().num_embeddings)}


def core_of(analysis: dict) -> Core:
    """The chosen layer's core of a saved analysis."""
    c = analysis["core"]
    return Core(np.asarray(c["basis"])[:, None], np.asarray(c["singular_values"]), np.asarray(c["mean"]))


def number_word_counterparts(lm: LanguageModel) -> dict[int, int]:
    """Token id -> counterpart id for the pairs of :data:`corelib.tasks.sva.NUMBER_WORD_PAIRS`
    that are single tokens of ``lm`` (a pair with a multi-token form is left out)."""
    out = {}
    for singular, plural in NUMBER_WORD_PAIRS:
        try:
            a, b = lm.single_token(singular), lm.single_token(plural)
        except ValueError:
            continue
        out[a], out[b] = b, a
    return out


@torch.no_grad()
def flip_demo(lm: LanguageModel, core: Core, layer: int, prompts=FLIP_DEMO_PROMPTS) -> list[dict]:
    """The four verbs' probabilities at the end of each prompt, unmodified and with the core flipped.

    Probabilities are over the whole vocabulary (softmax of the last token's logits); the flip
    is the centred reflection at the core's layer, last token only.
    """
    ids = lm.readout_ids
    rows = []
    hook = intervention_hook(core, "flip", centered=True, positions="last")
    for prompt in prompts:
        batch = lm.tokenize([prompt])
        row = {"prompt": prompt}
        for name, hooks in (("baseline", []), ("flip", [(resid_hook(layer), hook)])):
            logits = lm.run_with_hooks(batch.input_ids, batch.attention_mask, fwd_hooks=hooks)[0, -1]
            probs = torch.softmax(logits.cpu().double(), -1)
            row[name] = {verb.strip(): float(probs[i]) for verb, i in ids.items()}
        rows.append(row)
    return rows


def steering_run(lm: LanguageModel, analysis: dict, params: SVAParams, *, progress: bool = True) -> dict:
    """Base and steered generations of the steering and control prompts, at every gate.

    Greedy continuations of the steering and control prompts are generated unsteered (once) and
    steered at every gate of ``params.gates``; every steering prompt is also continued ``n_samples``
    times by sampling (temperature, top-k), unsteered and steered at ``params.gate``, each sample with
    its own seed. All run as one batch (:func:`corelib.steering.generate_batch`; the requests of
    a prompt and seed share a row until their gates disagree). The pairs of ``params.gate`` are stored
    under ``greedy``, ``sampled`` and ``control``; the steered texts of every gate under
    ``gate_sweep``. Inversion rates (:func:`corelib.steering.inversion_stats`) are given for the
    greedy and the sampled generations, with the unsteered samples' rate (what sampling alone
    does) beside them; ``other_words`` does the same for number-marked words other than the four
    verbs; ``flip_demo`` holds :func:`flip_demo`.
    """
    core, layer = core_of(analysis), analysis["chosen_layer"]
    plan = _SteeringPlan.of(params)
    requests = plan.requests(params)
    gens = generate_batch(
        lm,
        [r.prompt for r in requests],
        classes=AGREEMENT_VERBS,
        core=core,
        layer=layer,
        configs=[r.config for r in requests],
        max_new_tokens=[r.new_tokens for r in requests],
        greedy=[r.greedy for r in requests],
        temperature=params.temperature,
        top_k=params.top_k,
        seed=[r.seed for r in requests],
        progress=progress,
    )
    out = plan.arrange(gens, params)
    out |= _inversions(lm, out, plan.sampled(gens, params))
    out["flip_demo"] = flip_demo(lm, core, layer)
    return out


class _Request(NamedTuple):
    """One generation of :func:`steering_run`: prompt, steering (None: plain), length, decoding, seed."""

    prompt: str
    config: SteeringConfig | None
    new_tokens: int
    greedy: bool
    seed: int


@dataclass(frozen=True)
class _SteeringPlan:
    """The generations of :func:`steering_run`, in the order of the batch: the greedy steering and
    control prompts unsteered, then steered at each gate, then the samples unsteered and steered."""

    greedy_jobs: list[tuple[str, str, int]]  # (prompt, "greedy" | "control", new tokens)
    samples: list[tuple[str, int]]  # (steering prompt, seed)

    @classmethod
    def of(cls, params: SVAParams) -> _SteeringPlan:
        jobs = [(q, "greedy", params.max_new_tokens) for q in params.steering_prompts]
        jobs += [(q, "control", params.control_new_tokens) for q in params.control_prompts]
        samples = [(q, params.generation_seed + k) for q in params.steering_prompts for k in range(params.n_samples)]
        return cls(jobs, samples)

    def requests(self, params: SVAParams) -> list[_Request]:
        seed = params.generation_seed
        out = [_Request(q, None, n, True, seed) for q, _, n in self.greedy_jobs]
        out += [_Request(q, params.steering_at(g), n, True, seed) for g in params.gates for q, _, n in self.greedy_jobs]
        out += [
            _Request(q, cfg, params.max_new_tokens, False, s)
            for cfg in (None, params.steering)
            for q, s in self.samples
        ]
        return out

    def sampled(self, gens: list[Generation], params: SVAParams) -> tuple[list[Generation], list[Generation]]:
        """The sampled generations: unsteered, and steered at ``params.gate``."""
        tail = gens[len(self.greedy_jobs) * (len(params.gates) + 1) :]
        return tail[: len(self.samples)], tail[len(self.samples) :]

    def arrange(self, gens: list[Generation], params: SVAParams) -> dict:
        """The generations as :func:`steering_run` stores them (see there)."""
        n = len(self.greedy_jobs)
        base_s, steered_s = self.sampled(gens, params)
        dicts = [g.to_dict() for g in gens]
        base, by_gate = dicts[:n], {g: dicts[n * (k + 1) : n * (k + 2)] for k, g in enumerate(params.gates)}
        out = {
            "gate": float(params.gate),
            "greedy": [],
            "control": [],
            "sampled": [
                {"base": b.to_dict(), "steered": s.to_dict(), "seed": seed}
                for b, s, (_, seed) in zip(base_s, steered_s, self.samples)
            ],
            "gate_sweep": {str(g): {"greedy": [], "control": []} for g in params.gates},
        }
        for k, (_, kind, _) in enumerate(self.greedy_jobs):
            out[kind].append({"base": base[k], "steered": by_gate[float(params.gate)][k]})
            for g in params.gates:
                out["gate_sweep"][str(g)][kind].append(by_gate[g][k])
        return out


def _inversions(lm: LanguageModel, out: dict, sampled: tuple[list[Generation], list[Generation]]) -> dict:
    """Inversion rates of the verbs and of other number-marked words, and what steering did to the controls."""
    base_s, steered_s = sampled
    counterpart = number_word_counterparts(lm)
    greedy_steered = [Generation(**g["steered"]) for g in out["greedy"]]
    control_steered = [Generation(**g["steered"]) for g in out["control"]]
    return {
        "inversion": inversion_stats(greedy_steered, AGREEMENT_VERBS),
        "sampled_inversion": {
            "steered": inversion_stats(steered_s, AGREEMENT_VERBS),
            "unsteered": inversion_stats(base_s, AGREEMENT_VERBS),
        },
        "other_words": {
            "words": sorted(lm.tokenizer.decode([i]) for i in counterpart),
            "greedy": word_inversion_stats(greedy_steered, counterpart),
            "sampled": {
                "steered": word_inversion_stats(steered_s, counterpart),
                "unsteered": word_inversion_stats(base_s, counterpart),
            },
        },
        "control_unchanged": sum(g["base"]["tokens"] == g["steered"]["tokens"] for g in out["control"]),
        "control_steered_steps": inversion_stats(control_steered, AGREEMENT_VERBS)["steered_steps"],
        "n_control": len(out["control"]),
    }


def gate_table(steering: dict) -> pandas.DataFrame:
    """Per gate threshold: agreement decisions and inversions on the steering prompts, and the
    control continuations left unchanged (:func:`control_summary`). Whether a row meets the
    steering criteria is the claims' question (:func:`corelib.plots.meets_steering_criteria`).

    One row per gate of the grid, indexed by ``gate`` (ascending), with the columns
    ``decisions``, ``inverted``, ``inversion rate`` (missing, NaN or None, without a decision), ``clean-verb rate``,
    ``decisions not steered``, ``steered steps``, ``decision-free controls``,
    ``decision-free unchanged``, ``controls`` and ``controls unchanged`` (counts and shares).
    """
    import pandas as pd

    rows = [_gate_row(float(gate), steered, steering["control"]) for gate, steered in steering["gate_sweep"].items()]
    return pd.DataFrame(rows).set_index("gate").sort_index()


def _gate_row(gate: float, steered: dict, control_pairs: list[dict]) -> dict:
    """One row of :func:`gate_table`: the greedy and control continuations steered at ``gate``."""
    inv = inversion_stats([Generation(**g) for g in steered["greedy"]], AGREEMENT_VERBS)
    pairs = [{"base": pair["base"], "steered": s} for pair, s in zip(control_pairs, steered["control"])]
    ctl = control_summary({"control": pairs})
    return {
        "gate": gate,
        "decisions": inv["decisions"],
        "inverted": inv["inverted"],
        "inversion rate": inv["rate"],
        "clean-verb rate": inv["rate_clean_verbs"],
        "decisions not steered": inv["ungated_decisions"],
        "steered steps": inv["steered_steps"],
        "decision-free controls": ctl.decision_free,
        "decision-free unchanged": ctl.decision_free_unchanged,
        "controls": ctl.n,
        "controls unchanged": ctl.unchanged,
    }


@dataclass(frozen=True, eq=False)  # a DataFrame has no single truth value: compare the fields
class ControlSummary:
    """What steering did to the control continuations (:func:`control_summary`).

    Attributes:
        n: control prompts.
        decision_free: those whose unsteered text writes none of the four verbs.
        decision_free_unchanged: of those, the ones steering left unchanged.
        unchanged: all controls left unchanged.
        table: one row per control, in the order of the prompts, with the columns ``prompt``,
            ``unchanged`` (bool), ``verbs in base text`` (bool), ``first steered step`` (the
            0-based step of the first steered token) and ``base text up to it``; the last two are
            missing (NaN) when steering never acted.
    """

    n: int
    decision_free: int
    decision_free_unchanged: int
    unchanged: int
    table: pandas.DataFrame


def control_summary(steering: dict) -> ControlSummary:
    """What steering did to the control continuations.

    A control continuation has *no agreement decision* when its unsteered (base) text contains
    none of the four verbs; those must come out unchanged. For every changed continuation, the
    first steered step and the base text up to it (the token the gate reacted to).
    """
    rows, free, free_same = [], 0, 0
    for pair in steering["control"]:
        base, steered = pair["base"], pair["steered"]
        same = base["tokens"] == steered["tokens"]
        decision_free = all(v is None for v in base["verb"])
        free += decision_free
        free_same += decision_free and same
        first = next((k for k, g in enumerate(steered["gated"]) if g), None)
        rows.append(
            {
                "prompt": base["prompt"],
                "unchanged": same,
                "verbs in base text": not decision_free,
                "first steered step": first,
                "base text up to it": None if first is None else "".join(base["pieces"][: first + 1]),
            }
        )
    import pandas as pd

    columns = ["prompt", "unchanged", "verbs in base text", "first steered step", "base text up to it"]
    return ControlSummary(
        n=len(rows),
        decision_free=free,
        decision_free_unchanged=free_same,
        unchanged=sum(r["unchanged"] for r in rows),
        table=pd.DataFrame(rows, columns=columns),
    )


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
        steering: the steering run as :func:`steering_run` stores it, with its inversion counts.
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
    steering: dict

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

        analysis = compute_once(analysis_path, lambda: analyse_model(lm(), ds, params, progress=progress))
        # stored beside the sweep (not in it), so sweeps stored before it was recorded stay valid
        analysis.update(compute_once(sweep_dir / "model.json", lambda: model_facts(lm())))
        analysis["steering"] = compute_once(
            steering_path, lambda analysis=analysis: steering_run(lm(), analysis, params, progress=progress)
        )
        models.append(analysis)
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
            ("verbs", s["inversion"], s["sampled_inversion"]),
            ("other number words", s["other_words"]["greedy"], s["other_words"]["sampled"]),
        ):
            rows.append(
                {
                    "model": m.model,
                    "words": what,
                    "greedy: decisions": greedy["decisions"],
                    "greedy: inverted": greedy["rate"],
                    "sampled: decisions": sampled["steered"]["decisions"],
                    "sampled: inverted": sampled["steered"]["rate"],
                    "sampled, unsteered: inverted": sampled["unsteered"]["rate"],
                }
            )
    return pd.DataFrame(rows).set_index(["model", "words"]).round(3)


def flip_demo_table(summary: SVASummary):
    """Per model and demonstration prompt: P(is), P(are), P(was), P(were), unmodified and flipped."""
    import pandas as pd

    rows = [
        {
            "model": m.model,
            "prompt": r["prompt"],
            **{f"P({v}) {k}": r[k][v] for v in ("is", "are", "was", "were") for k in ("baseline", "flip")},
        }
        for m in summary.models
        for r in m.steering["flip_demo"]
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
    demo = {k: next(r for r in s["flip_demo"] if r["prompt"] == FLIP_DEMO_PROMPTS[0]) for k, s in steer.items()}
    return {
        "sva.rank": {k: m.rank for k, m in models.items()},
        "sva.spectral_gap": {k: spectral_gap_paper(m.spectral_gap) for k, m in models.items()},
        "sva.auc_baseline": {k: m.auc["baseline"] for k, m in models.items()},
        "sva.auc_keep": {k: m.auc["keep"] for k, m in models.items()},
        "sva.auc_remove": {k: m.auc["remove"] for k, m in models.items()},
        "sva.auc_flip": {k: m.auc["flip"] for k, m in models.items()},
        "sva.pearson": {k: p.pearson for k, p in pairs.items()},
        "sva.spearman": {k: p.spearman for k, p in pairs.items()},
        "sva.key_is_base": {k: d["baseline"]["is"] for k, d in demo.items()},
        "sva.key_is_flip": {k: d["flip"]["is"] for k, d in demo.items()},
        "sva.key_are_base": {k: d["baseline"]["are"] for k, d in demo.items()},
        "sva.key_are_flip": {k: d["flip"]["are"] for k, d in demo.items()},
        "sva.steering_rate": {k: s["sampled_inversion"]["steered"]["rate"] for k, s in steer.items()},
        "sva.steering_other_words": {k: s["other_words"]["sampled"]["steered"]["rate"] for k, s in steer.items()},
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
        steering, inversion = m.steering, m.steering["inversion"]
        rows.append(
            {
                "model": m.model,
                "decisions": inversion["decisions"],
                "inverted": inversion["inverted"],
                "inversion rate": inversion["rate"],
                "clean-verb decisions": inversion["clean_verb_decisions"],
                "clean-verb rate": inversion["rate_clean_verbs"],
                "decisions not steered": inversion["ungated_decisions"],
                "steered steps": inversion["steered_steps"],
                "controls": steering["n_control"],
                "controls unchanged": steering["control_unchanged"],
                "control steered steps": steering["control_steered_steps"],
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
        "sampled_inv_min": _nan_min(m.steering["sampled_inversion"]["steered"]["rate"] for m in models),
        "sampled_inv_max": _nan_max(m.steering["sampled_inversion"]["steered"]["rate"] for m in models),
        "unsteered_inv_max": _nan_max(m.steering["sampled_inversion"]["unsteered"]["rate"] for m in models),
        "other_inv_max": _nan_max(m.steering["other_words"]["sampled"]["steered"]["rate"] for m in models),
        "grid_inv_max": _nan_max(float(v) for m in models for v in gate_table(m.steering)["inversion rate"].dropna()),
        "gate_grid_text": ", ".join(f"{g:g}" for g in params.gates),
        "inv_min": _nan_min(m.steering["inversion"]["rate"] for m in models),
        "inv_max": _nan_max(m.steering["inversion"]["rate"] for m in models),
        "decisions_total": int(sum(m.steering["inversion"]["decisions"] for m in models)),
        "strict_min": _nan_min(m.steering["inversion"]["rate_clean_verbs"] for m in models),
        "free_total": sum(c.decision_free for c in controls),
        "free_unchanged": sum(c.decision_free_unchanged for c in controls),
        "control_changed": len(changed),
        "control_changed_verbs": int(changed["verbs in base text"].astype(bool).sum()),
        "temperature_value": params.temperature,
        "top_k_value": params.top_k,
        "n_samples_value": params.n_samples,
        "other_words_text": ", ".join(models[0].steering["other_words"]["words"]),
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
    demo = [next(r for r in m.steering["flip_demo"] if r["prompt"] == FLIP_DEMO_PROMPTS[0]) for m in summary.models]
    return {
        "key_is_fall_min": min(d["baseline"]["is"] / d["flip"]["is"] if d["flip"]["is"] else np.inf for d in demo),
        "key_are_flip_min": min(d["flip"]["are"] for d in demo),
        "key_are_flip_max": max(d["flip"]["are"] for d in demo),
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
