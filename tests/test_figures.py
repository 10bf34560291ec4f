"""Every figure function of ``corelib.plots`` draws without any two texts overlapping.

Each ``figure_*`` in ``corelib.plots.__all__`` is called on small inputs built here (synthetic
results with the shape the chapters pass, or the chapter's own fast computations), drawn with
Agg, and the window extents of all drawn texts are compared: titles, axis labels, tick labels,
panel letters, legend entries, annotations. Two texts whose boxes overlap by more than
``TOLERANCE_PX`` in both directions fail the test, which names them. A new figure function
without inputs here fails too.
"""

from __future__ import annotations

import dataclasses
import itertools
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from corelib import plots  # noqa: E402

TOLERANCE_PX = 1.0
RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------- inputs


def _markov_summary(n_models: int = 3):
    from corelib.experiments.markov_chain import MarkovParams, MarkovSummary

    tensors = ["embed.weight", "blocks.0.attn.in_proj_weight", "blocks.0.ff.0.weight", "unembed.weight"]
    history = {"loss": [1.0], "train_acc": [0.7], "test_acc": [0.7]}
    models = [
        {
            "seed": i,
            "accuracy": {"full": 0.7, "keep": 0.69, "remove": 0.3 + 0.01 * i},
            "rank": 3,
            "singular_values": [3.0, 2.0, 1.0],
            "eigenvalues": [[0.5, 0.2], [0.5, -0.2], [0.9, 0.0]],
            "spectrum_error": 0.1,
            "r2": 0.5,
            "history": history,
        }
        for i in range(n_models)
    ]
    pairs = [
        {
            "pair": [i, j],
            "weight_cosine": 0.01,
            "weight_cosine_by_tensor": {t: RNG.uniform(-0.1, 0.1) for t in tensors},
            "overlap": 0.98,
            "angles": [1.0, 2.0, 3.0],
            "cca": [0.99, 0.98, 0.97],
        }
        for i, j in itertools.combinations(range(n_models), 2)
    ]
    params = dataclasses.asdict(MarkovParams(seeds=tuple(range(n_models))))
    return MarkovSummary.from_json(
        {
            "params": params,
            "models": models,
            "pairs": pairs,
            "bayes_accuracy": 0.75,
            "chance_accuracy": 0.25,
            "oracle_r2": 0.6,
            "chain_eigenvalues": [[0.5, 0.25], [0.5, -0.25], [0.5, 0.0]],
        }
    )


def _sva_summary() -> SimpleNamespace:
    models = []
    for name, n_layers in (("smollm2-135m", 30), ("gemma3-270m", 18)):
        layers = np.arange(0, n_layers, 3)
        depth = (layers + 1) / n_layers
        coords = RNG.standard_normal(200)
        models.append(
            {
                "model": name,
                "depth": depth.tolist(),
                "baseline_auc": 0.97,
                "sweep_auc": {
                    "keep": (0.5 + 0.45 * depth).tolist(),
                    "remove": (0.9 - 0.4 * depth).tolist(),
                    "flip": (0.9 - 0.8 * depth).tolist(),
                },
                "coords": coords.tolist(),
                "margins": {"baseline": (2 * coords + RNG.standard_normal(200)).tolist()},
                "scores": {
                    mode: (RNG.standard_normal(200) + shift).tolist()
                    for mode, shift in (("baseline", 2.0), ("remove", 0.5), ("flip", -1.5))
                },
            }
        )
    # the parts of an SVASummary the figure reads
    return SimpleNamespace(models=[SimpleNamespace(**m) for m in models], fisher_p={"remove": 1.2e-30, "flip": 3.4e-80})


def _own_model_summary() -> SimpleNamespace:
    layers = list(range(0, 30, 3)) + [29]
    depth = (np.asarray(layers) + 1) / 30
    coords = RNG.standard_normal(300)
    tense = {
        "layers": layers,
        "n_layers": 30,
        "chosen_layer": 27,
        "baseline_auc": 0.89,
        "sweep_auc": {
            "keep": (0.9 - 0.2 * depth).tolist(),
            "remove": (0.9 - 0.35 * depth**4).tolist(),
            "flip": (0.9 - 0.6 * depth**4).tolist(),
        },
        "singular_values": np.geomspace(1.0, 1e-4, 20).tolist(),
        "spectral_gap": 18.2,
        "coords": coords.tolist(),
        "margins": (2 * coords + RNG.standard_normal(300)).tolist(),
        "past": (coords > 0).astype(int).tolist(),
    }
    names = ("ACE core", "mean difference", "probe", "top PC")
    agreement = [
        {
            "model": name,
            "layer": n_layers - 1,
            "n_layers": n_layers,
            "layers": list(range(0, n_layers, 3)) + [n_layers - 1],
            "sweep": {
                key: (RNG.uniform(0, 1, len(range(0, n_layers, 3)) + 1)).tolist()
                for key in ("probe_read", "probe_remove", "probe_flip", "ace_remove", "ace_flip")
            },
            "baseline_auc": 0.93,
            "directions": {
                d: {"angle_to_ace": 20.0 * k, "read_auc": 0.96, "remove": 0.3 + 0.2 * k, "flip": 0.1 + 0.25 * k}
                for k, d in enumerate(names)
            },
        }
        for name, n_layers in (("smollm2-135m", 30), ("gemma3-270m", 18))
    ]
    # the parts of an OwnModelSummary the figures read (tense, and per model its sweep and directions)
    return SimpleNamespace(
        tense=SimpleNamespace(**tense),
        agreement=[
            SimpleNamespace(
                **{
                    **m,
                    "sweep": SimpleNamespace(**m["sweep"]),
                    "directions": {d: SimpleNamespace(**v) for d, v in m["directions"].items()},
                }
            )
            for m in agreement
        ],
    )


def _modular_model(epoch: int, p: int, i: int) -> dict:
    grokked = epoch >= 400 + 100 * i
    angles = 2 * np.pi * np.array([3, 7]) / p
    eig = np.r_[np.exp(1j * angles), np.exp(-1j * angles)] * (1.0 if grokked else 0.6)
    return {
        "test_acc": 1.0 if grokked else 0.05,
        "keep_acc": 0.99 if grokked else 0.05,
        "remove_acc": 0.02,
        "core_dim": 8 if grokked else 30,
        "necessary_rank": 8 if grokked else 30,
        "sufficient_rank": 4,
        "energy_rank": 6,
        "modes": [3, 7] if grokked else [],
        "eigenvalues": np.c_[eig.real, eig.imag].tolist(),
        "operator": RNG.standard_normal((6, 6)).tolist(),
        "unit_fraction": 1.0 if grokked else 0.0,
        "r2": 0.99,
        "r2_heldout": 0.9,
        "singular_values": np.geomspace(10.0, 0.01, 16).tolist(),
    }


def _modular_records(p: int = 53, epochs=range(0, 2001, 100)) -> list:
    from corelib.experiments.modular_records import Snapshot

    return [Snapshot.from_json({"epoch": e, "models": [_modular_model(e, p, i) for i in range(3)]}) for e in epochs]


def _modular_history(until: int = 2000) -> dict:
    epochs = np.arange(1, until + 1)
    return {
        "epoch": epochs.tolist(),
        "test_acc": [[min(1.0, e / (500 + 100 * i)) for i in range(3)] if e % 10 == 0 else None for e in epochs],
        "train_acc": np.ones((until, 3)).tolist(),
        "loss": np.exp(-np.outer(epochs, [1, 1.1, 1.2]) / 300).tolist(),
    }


def _emergence_inputs() -> tuple:
    records = _modular_records()
    phases = {"before": [200, 300, 300], "at": [400, 500, 600], "after": [2000, 2000, 2000]}
    by_epoch = {r["epoch"]: r for r in records}
    from corelib.experiments.modular_addition import EmergenceSummary

    per_phase = {k: [0, 0, 0] for k in phases}
    summary = EmergenceSummary(
        grok_epoch=600,
        model_grok_epochs=[400, 500, 600],
        phases=phases,
        post_grok_keep_ratio_min=None,
        post_grok_remove_max=None,
        unit_fraction=dict.fromkeys(phases, 0.5),
        modes=per_phase,
        core_dim=per_phase,
        eigenvalues={
            k: [by_epoch[e]["models"][i]["eigenvalues"] for i, e in enumerate(es)] for k, es in phases.items()
        },
        core_dim_compact=None,
        first_refined_epoch=None,
        final={},
    )
    return (records, _modular_history(), summary), {"p": 53}


def _inflation_inputs(name: str) -> tuple[tuple, dict]:
    arms = {
        "wd": _modular_records(epochs=range(900, 4001, 100)),
        "no_wd": _modular_records(epochs=range(900, 4001, 100)),
    }
    if name == "figure_inflation":
        return (arms,), {"p": 53, "branch_epoch": 900}
    if name == "figure_spikes":
        return ({"wd": _modular_history(4000), "no_wd": _modular_history(4000)},), {"branch_epoch": 900}
    if name == "figure_removal":
        ranks = np.arange(1, 129)
        curve = {"rank": ranks, "remove": np.array([np.exp(-ranks / (5 + i)) + 0.01 for i in range(3)])}
        return ({"wd": curve, "no_wd": curve}, {"wd": [8, 9, 10], "no_wd": [8, None, 12]}), {
            "chance": 2 / 53,
            "loose_level": 0.1,
            "epoch": 4000,
        }
    epochs = np.arange(900, 4001, 100)
    shares = RNG.dirichlet(np.ones(26), size=(len(epochs), 3))
    spectrum = {"epoch": epochs, "shares": shares, "count": RNG.integers(3, 10, size=(len(epochs), 3))}
    return ({"wd": spectrum, "no_wd": spectrum},), {"share": 0.9, "branch_epoch": 900}


def _sweeps_summary():
    from corelib.experiments.grokking_sweeps import SweepsParams, SweepsSummary
    from corelib.tasks.sweeps import bootstrap_fit, grok_time_constants, power_law_constants, summarise
    from corelib.theory import grok_time

    params = SweepsParams(n_seeds=3, n_boot=20)
    rows_w = [
        {
            "weight_decay": w,
            "p": 53,
            "seed": s,
            "t_mem": 100.0,
            "t_gen": 100 + 2000 / w * (1 + 0.1 * s),
            "delay": 2000 / w * (1 + 0.1 * s),
        }
        for w in params.omegas
        for s in range(3)
    ]
    rows_p = [
        {"weight_decay": 1.0, "p": q, "seed": s, "t_mem": 100.0, "delay": float(grok_time(q, 2770, 23)) * (1 + 0.1 * s)}
        for q in params.moduli
        for s in range(3)
    ]
    table_w, table_p = pd.DataFrame(rows_w), pd.DataFrame(rows_p)
    table_p["t_gen"] = table_p["t_mem"] + table_p["delay"]
    return SweepsSummary(
        params=params,
        table_omega=table_w,
        table_p=table_p,
        summary_omega=summarise(table_w, "weight_decay"),
        summary_p=summarise(table_p, "p"),
        fit_omega=bootstrap_fit(table_w, "weight_decay", power_law_constants, n_boot=20),
        fit_p=bootstrap_fit(table_p, "p", grok_time_constants, n_boot=20),
        paper={"omega_exponent": -1.02, "Omega": 2770.0, "p_crit": 23.0},
    )


def _ace_method_inputs() -> dict:
    from corelib.experiments import ace_method

    params = ace_method.AceMethodParams(sim_steps=(300, 1000), sim_repeats=2, pca_samples=500)
    lti = ace_method.lti_comparison(params)
    return {"lti": lti, "simulation": ace_method.from_simulation(lti), "decoy": ace_method.decoy_comparison(params)}


def _theory_inputs() -> dict:
    from corelib.experiments import grokking_theory as theory

    params = theory.TheoryParams(p_check_max=120, p_plot_max=120)
    delays = theory.grokking_delays(params)
    return {
        "norms": theory.norm_identity(params),
        "amplitudes": theory.amplitudes(params),
        "margins": theory.margins(params),
        "delays": delays,
        "fits": theory.sweep_fits(delays),
    }


def _question_inputs() -> tuple[tuple, dict]:
    """Three runs of three models over a long horizon, and a control's sufficient ranks."""
    rng = np.random.default_rng(5)
    epochs = np.array([0, *range(100, 2001, 100), *range(2500, 20001, 500)])
    grow = np.linspace(10, 50, len(epochs))[:, None]
    curves = {
        label: (epochs, np.round(grow * scale + rng.normal(0, 3, (len(epochs), 3))).clip(1))
        for label, scale in (("dropout 0", 0.5), ("dropout 0.1", 0.9), ("recorded", 1.0))
    }
    sufficient = rng.integers(5, 20, size=(3, 3, 3))
    return (curves, sufficient, (0.001, 0.01, 0.05), (900, 2000, 20000)), {"paper": {900: 15, 20000: 60}}


def _inputs(name: str) -> tuple[tuple, dict]:
    """Positional and keyword arguments for ``plots.<name>``."""
    if name == "figure_markov":
        return (_markov_summary(),), {}
    if name == "figure_sva":
        return (_sva_summary(),), {}
    if name in ("figure_tense", "figure_directions"):
        return (_own_model_summary(),), {}
    if name in ("figure_emergence", "figure_inflation_questions"):
        return _emergence_inputs() if name == "figure_emergence" else _question_inputs()
    if name in ("figure_inflation", "figure_spikes", "figure_removal", "figure_frequencies"):
        return _inflation_inputs(name)
    if name == "figure_sweeps":
        return (_sweeps_summary(),), {}
    if name == "figure_recorded_sweeps":  # a record reads back as a summary with its params
        return (_sweeps_summary(),), {}
    if name == "figure_recorded_inflation":
        (arms,), where = _inflation_inputs("figure_inflation")
        from corelib.experiments.paper_scale_records import RecordedInflation

        stand_in = RecordedInflation(SimpleNamespace(**where), arms, {}, None, {}, "a recorded run")
        return (stand_in,), {}
    if name == "figure_clock":
        return (_clock_inputs(),), {}
    if name == "figure_window":
        return (_clock_inputs().window_curves,), {}
    if name == "figure_message":
        return ("No paper-scale run is recorded.",), {}
    if name in ("figure_spectra", "figure_from_data", "figure_pca"):
        results = _ace_method_inputs()
        if name == "figure_spectra":
            return (results["lti"],), {"tolerance": 1e-8}
        return ((results["simulation"] if name == "figure_from_data" else results["decoy"]),), {}
    theory = {
        "figure_psi": "norms",
        "figure_amplitudes": "amplitudes",
        "figure_margin": "margins",
        "figure_delay": "delays",
        "figure_theory_sweeps": "fits",
    }
    if name in theory:
        return (_theory_inputs()[theory[name]],), {}
    raise LookupError(f"no test inputs for plots.{name}: add them to tests/test_figures.py")


def _clock_inputs() -> SimpleNamespace:
    """A clock summary of two runs on one curve of tau, and five window arms, as inflation_clock.run gives them."""
    from corelib.experiments import inflation_clock

    rng = np.random.default_rng(0)

    def run(lr, wd, epochs):
        records = []
        for e in epochs:
            d = 15 + 45 * (1 - np.exp(-lr * wd * 3 * e / 20))
            models = [
                {
                    "core_dim": d + rng.normal(),
                    "necessary_rank": d,
                    "sufficient_rank": 12,
                    "modes": [1] * int(d // 3),
                    "test_acc": 1.0,
                }
                for _ in range(3)
            ]
            records.append({"epoch": int(e), "models": models})
        return {"lr": lr, "wd": wd, "steps": 3, "records": records}

    params = inflation_clock.ClockParams()
    runs = {
        "recorded paper run": run(1e-3, 1.0, np.arange(0, 20001, 500)),
        "lr 0.003, wd 2": run(3e-3, 2.0, np.arange(0, 3401, 85)),
    }
    epochs = np.arange(0, 3401, 85)
    window = {
        arm: inflation_clock.WindowCurve(
            epochs=epochs,
            branch=None if arm == "kept" else 170 * (1 + k),
            core_dim=15 + k + rng.normal(size=(len(epochs), 3)),
            modes=5 + k + rng.normal(size=(len(epochs), 3)),
            test_acc=np.clip(1 - rng.random((len(epochs), 3)) / 50, 0, 1),
        )
        for k, arm in enumerate(inflation_clock.WINDOW_ARMS)
    }
    return SimpleNamespace(  # the parts of a ClockChapter the figures read
        curves={m: inflation_clock.curves(params, runs, m) for m in inflation_clock.METRICS},
        clock=inflation_clock.clock_summary(params, runs),
        window_curves=window,
    )


# --------------------------------------------------------------------------- the check


def drawn_texts(fig: plt.Figure) -> list[tuple[str, object]]:
    """(text, window extent) of every visible, non-empty text the figure draws.

    The texts are those whose ``draw`` the figure calls, so a tick label outside the view, or a
    text of an invisible axis (a twin's shared x axis), is not one.
    """
    drawn: dict[int, Text] = {}
    original = Text.draw

    def record(self, renderer):
        if self.get_visible() and self.get_text().strip():
            drawn[id(self)] = self
        return original(self, renderer)

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = original
    renderer = fig.canvas.get_renderer()
    return [(repr(text.get_text()), text.get_window_extent(renderer)) for text in drawn.values()]


def overlaps(fig: plt.Figure, tolerance: float = TOLERANCE_PX) -> list[str]:
    """Every pair of drawn texts whose boxes overlap by more than ``tolerance`` pixels both ways."""
    found = []
    for (name_a, a), (name_b, b) in itertools.combinations(drawn_texts(fig), 2):
        dx = min(a.x1, b.x1) - max(a.x0, b.x0)
        dy = min(a.y1, b.y1) - max(a.y0, b.y0)
        if dx > tolerance and dy > tolerance:
            found.append(f"{name_a} overlaps {name_b} by {dx:.0f} x {dy:.0f} px")
    return found


FIGURES = sorted(name for name in plots.__all__ if name.startswith("figure_"))


@pytest.mark.parametrize("name", FIGURES)
def test_no_text_overlaps_another(name):
    args, kwargs = _inputs(name)
    fig = getattr(plots, name)(*args, **kwargs)
    try:
        assert isinstance(fig, plt.Figure)
        assert not overlaps(fig), "\n".join(overlaps(fig))
    finally:
        plt.close(fig)


def test_the_check_finds_a_title_drawn_over_another():
    fig, ax = plt.subplots()
    ax.set_title("a centred title that is long")
    ax.set_title("C  a left title that is long", loc="left")
    try:
        assert overlaps(fig)
    finally:
        plt.close(fig)
