"""The modular-addition task and experiment: data, per-snapshot analysis, arms, summaries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corelib import operators
from corelib.engine import load_snapshot
from corelib.experiments import core_inflation, modular_addition, modular_runs
from corelib.interventions import intervention_accuracy
from corelib.models import Transformer, resid_hook
from corelib.results import compute_once
from corelib.tasks.modular import all_pairs, modular_addition_split


def test_pairs_and_split():
    x, y = all_pairs(7)
    assert x.shape == (49, 2) and torch.equal(y[:, 0], x[:, 1])
    assert torch.equal(y[:, 1], (x[:, 0] + x[:, 1]) % 7)
    (xa, ya), (xb, yb) = modular_addition_split(53, 0.5, 42)
    assert len(xa) == 1404 and len(xb) == 1405
    seen = {tuple(r) for r in torch.cat([xa, xb]).tolist()}
    assert len(seen) == 53 * 53  # disjoint and complete
    (xc, _), _ = modular_addition_split(53, 0.5, 42)
    assert torch.equal(xa, xc)  # fixed seed, fixed split
    with pytest.raises(ValueError, match="train_fraction"):
        modular_addition_split(7, 1.0)
    with pytest.raises(ValueError, match="modulus"):
        all_pairs(1)
    with pytest.raises(ValueError, match="permutation must be 'numpy' or 'torch'"):
        modular_addition_split(7, permutation="random")


@pytest.mark.parametrize("permutation", ["numpy", "torch"])
def test_split_is_the_references(permutation):
    """Triples listed a outer / b inner, permuted by the named generator seeded 42, first half train."""
    p = 11
    triples = np.array([[a, b, (a + b) % p] for a in range(p) for b in range(p)])
    if permutation == "numpy":
        perm = np.random.RandomState(42).permutation(len(triples))
    else:
        perm = torch.randperm(len(triples), generator=torch.Generator().manual_seed(42)).numpy()
    train, test = triples[perm[: len(triples) // 2]], triples[perm[len(triples) // 2 :]]
    (x, y), (xt, yt) = modular_addition_split(p, 0.5, 42, permutation)
    np.testing.assert_array_equal(x.numpy(), train[:, :2])
    np.testing.assert_array_equal(y.numpy(), train[:, 1:])
    np.testing.assert_array_equal(xt.numpy(), test[:, :2])
    np.testing.assert_array_equal(yt.numpy(), test[:, 1:])


def _records(test_accs, modes=None):
    modes = modes or [[[1, 2]] * len(a) for a in test_accs]
    return [
        {"epoch": 100 * (i + 1), "models": [{"test_acc": a, "modes": m} for a, m in zip(accs, ms)]}
        for i, (accs, ms) in enumerate(zip(test_accs, modes))
    ]


def test_grokking_epoch_needs_every_model():
    recs = _records([[0.1, 0.2], [0.995, 0.5], [0.99, 0.999], [1.0, 1.0]])
    assert modular_runs.grokking_epoch(recs) == 300
    assert modular_runs.grokking_epoch(recs, threshold=1.0) == 400
    assert modular_runs.grokking_epoch(recs[:2]) is None
    assert modular_runs.model_grokking_epochs(recs) == [200, 300]
    phases = modular_addition.phase_epochs(recs, [200, 300])
    assert phases == {"before": [100, 100], "at": [200, 300], "after": [400, 400]}
    assert modular_addition.phase_epochs(recs, [None, 400])["at"] == [300, 400]


TINY = dict(
    p=11,
    seeds=(1, 2),
    epochs=6,
    long_epochs=8,
    branch_epoch=4,
    batch_size=32,
    d_model=16,
    n_heads=2,
    d_ff=32,
    snapshot_every=2,
    snapshot_every_late=2,
    late_after=4,
    eval_every=2,
    n_jacobians=4,
)


def test_an_analysis_never_trains_and_names_the_call_that_does(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(modular_runs, "train_stack", lambda *a, **k: pytest.fail("an analysis trained"))
    p = modular_runs.ModularParams(**TINY)
    for analysis in (modular_runs.analyse_arm, modular_runs.centroid_spectra, modular_runs.removal_curves):
        with pytest.raises(modular_runs.MissingSnapshots, match=r"has no snapshot .*train_arm\(params, 'wd', 6\)"):
            analysis(p, "wd", 6, progress=False)
        with pytest.raises(FileNotFoundError):  # what a caller catching a missing file expects
            analysis(p, "wd", 6, progress=False)
    assert not list(tmp_path.rglob("snapshot*")) and not list(tmp_path.rglob("analysis_*"))


def test_branch_epoch_must_be_a_snapshot_of_the_first_arm():
    paper = modular_runs.ModularParams()  # snapshots every 100 epochs up to 2000, then every 500
    assert paper.branch_epoch == 900
    modular_runs.ModularParams(branch_epoch=2000)
    modular_runs.ModularParams(branch_epoch=2500)
    for bad in (2100, 950):
        with pytest.raises(ValueError, match=rf"branch_epoch \({bad}\) is not a snapshot.*every 500"):
            modular_runs.ModularParams(branch_epoch=bad)


@pytest.mark.slow  # trains and analyses both arms end to end
def test_arms_analysis_is_complete_cached_and_branches(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(**TINY)
    modular_runs.train_arm(p, "wd", p.epochs, progress=False)
    recs = modular_runs.analyse_arm(p, "wd", p.epochs, progress=False)
    assert [r["epoch"] for r in recs] == [0, 2, 4, 6]
    for r in recs:
        for m in r["models"]:
            assert m["necessary_rank"] is None or m["necessary_rank"] >= m["energy_rank"]
            # the core dimension is the necessary rank (else the energy rank), and the accuracies
            # reported at it agree with the rank scan that chose it
            if m["necessary_rank"] is None:
                assert m["core_dim"] == m["energy_rank"]
            else:
                assert m["core_dim"] == m["necessary_rank"] and m["remove_acc"] <= p.chance_level
            if m["sufficient_rank"] == m["core_dim"]:
                assert m["keep_acc"] >= m["test_acc"] - 0.001
            assert all(1 <= k <= p.p // 2 for k in m["modes"])
            assert len(m["eigenvalues"]) == len(m["operator"])
    # Analysis is cached per snapshot: a second call reads the same records without recomputing.
    monkeypatch.setattr(modular_runs, "analyse_model", lambda *a, **k: pytest.fail("recomputed"))
    assert modular_runs.analyse_arm(p, "wd", p.epochs, progress=False) == recs
    monkeypatch.undo()
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    modular_runs.train_arm(p, "no_wd", p.long_epochs, progress=False)
    branch = modular_runs.analyse_arm(p, "no_wd", p.long_epochs, progress=False)
    assert [r["epoch"] for r in branch] == [4, 6, 8]
    assert branch[0] == next(r for r in recs if r["epoch"] == 4)  # same weights at the branch point
    with pytest.raises(modular_runs.MissingSnapshots, match="trained to epoch 6"):  # branching trained no more of wd
        modular_runs.analyse_arm(p, "wd", p.long_epochs, progress=False)
    modular_runs.train_arm(p, "wd", p.long_epochs, progress=False)
    wd = modular_runs.analyse_arm(p, "wd", p.long_epochs, progress=False)
    assert wd[: len(recs)] == recs  # extending the run kept the earlier snapshots
    full, cut = modular_runs.history(p, "wd"), modular_runs.history(p, "wd", until=p.epochs)
    assert full["epoch"][-1] == p.long_epochs and cut["epoch"][-1] == p.epochs  # a chapter keeps its horizon
    assert all(cut[k] == full[k][: len(cut["epoch"])] for k in full)
    spectra = modular_runs.centroid_spectra(p, "wd", p.epochs, share=0.5, progress=False)
    assert spectra["epoch"].tolist() == [0, 2, 4, 6]
    assert spectra["shares"].shape == (4, len(p.seeds), p.p // 2)
    np.testing.assert_allclose(spectra["shares"].sum(axis=-1), 1.0, atol=1e-12)
    assert np.all(spectra["count"] <= modular_runs.centroid_spectra(p, "wd", p.epochs, progress=False)["count"])
    model = load_snapshot(modular_runs.arm_dir(p, "wd"), 4, "cpu").model(1)  # by hand: model 2 at epoch 4
    x, y = modular_runs.make_data(p)["test"]
    _, cache = model.run_with_cache(x, names_filter=resid_hook(p.n_layers - 1))
    h = cache[resid_hook(p.n_layers - 1)][:, -1].double()
    means = torch.zeros(p.p, h.shape[1], dtype=torch.float64).index_add_(0, y[:, -1], h)
    means /= torch.bincount(y[:, -1], minlength=p.p)[:, None]
    np.testing.assert_allclose(spectra["shares"][2, 1], operators.cycle_spectrum(means.numpy()), atol=1e-9)
    s = core_inflation.inflation_summary(p, wd, branch)
    assert s.start == 4 and s.end == 8
    values = core_inflation.inflation_claim_values(s)
    assert values["inflation.core_dim_grok"] == np.mean([m["core_dim"] for m in branch[0]["models"]])
    assert values["inflation.arm_dim_gap"] == s.wd.core_dim_end - s.no_wd.core_dim_end
    e = modular_addition.emergence_summary(p, recs)
    dims = [np.mean([m["core_dim"] for m in r["models"]]) for r in recs]
    assert e.core_dim_compact == modular_addition.compact_epoch([r["epoch"] for r in recs], dims)
    curves = modular_runs.removal_curves(p, "wd", 6, progress=False)
    assert curves["remove"].shape == curves["keep"].shape == (len(p.seeds), p.d_model)
    assert curves["rank"].tolist() == list(range(1, p.d_model + 1))
    # At the chance level the first crossing read off the curves is the analysis' necessary rank.
    assert modular_runs.first_rank_at_or_below(curves, p.chance_level) == [
        m["necessary_rank"] for m in recs[-1]["models"]
    ]
    for i, m in enumerate(recs[-1]["models"]):  # epoch 6: the analysis' ranks are the curves' first crossings
        assert curves["energy_rank"][i] == m["energy_rank"]
        up = curves["rank"][curves["keep"][i] >= m["test_acc"] - 0.001]
        assert m["sufficient_rank"] == (int(up[0]) if up.size else None)
    monkeypatch.setattr(modular_runs, "ablation_curve", lambda *a, **k: pytest.fail("recomputed"))
    again = modular_runs.removal_curves(p, "wd", 6, progress=False)
    assert all(np.array_equal(again[k], curves[k]) for k in curves)
    monkeypatch.undo()
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    with pytest.raises(ValueError, match=r"epoch 5 is not a snapshot \(every 2 epochs up to epoch 4, then every 2\)"):
        modular_runs.removal_curves(p, "wd", 5, progress=False)
    with pytest.raises(ValueError, match="unknown arm"):
        modular_runs.analyse_arm(p, "sgd", 4, progress=False)


def test_analysis_batched_over_ranks_is_that_of_one_hooked_run_per_rank(monkeypatch):
    """The rank scans read the unembedding of the last block's outputs, many ranks at once; one
    hooked run of the whole model per rank (as the analysis ran them before) gives the same record."""
    p = modular_runs.ModularParams(**TINY)
    torch.manual_seed(0)
    model = Transformer(p.model_config())
    x, y = modular_runs.make_data(p)["train"]  # fitted in a few steps, so the ranks lie inside the scans
    opt = torch.optim.AdamW(model.parameters(), lr=3e-2)
    for _ in range(60):
        loss = torch.nn.functional.cross_entropy(model(x)[:, -1], y[:, -1])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    batched = modular_runs.analyse_model(model, (x, y), p)
    assert batched["test_acc"] > 0.9 and batched["necessary_rank"] > batched["energy_rank"] > 1
    assert 1 < batched["sufficient_rank"] < p.d_model
    whole_model_core = modular_runs.model_core

    def one_run_per_rank(model, data, params):
        h, full, r_energy, _ = whole_model_core(model, data, params)
        hook = resid_hook(params.n_layers - 1)

        def hooked(core, mode):
            return intervention_accuracy(model, *data, hook, core, mode, positions="last", score_positions="last")

        return h, full, r_energy, hooked

    monkeypatch.setattr(modular_runs, "model_core", one_run_per_rank)
    assert modular_runs.analyse_model(model, (x, y), p) == batched


def test_first_rank_at_or_below_reads_the_first_crossing_above_the_energy_rank():
    curves = {
        "rank": np.arange(1, 7),
        "energy_rank": np.array([2, 1, 1]),
        "remove": np.array(
            [
                [0.01, 0.5, 0.04, 0.02, 0.06, 0.01],  # rank 1 is below the energy rank
                [0.9, 0.3, 0.06, 0.04, 0.07, 0.02],  # crosses 0.05 at 4, then bounces
                [0.9, 0.8, 0.7, 0.6, 0.5, 0.4],  # never gets there
            ]
        ),
    }
    assert modular_runs.first_rank_at_or_below(curves, 0.05) == [3, 4, None]
    assert modular_runs.first_rank_at_or_below(curves, 0.5) == [2, 2, 5]
    assert modular_runs.first_rank_at_or_below(curves, 1.0) == [2, 1, 1]
    assert modular_runs.mean_rank([3, 4, 5]) == 4.0
    assert np.isnan(modular_runs.mean_rank([3, 4, None]))
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="level is an accuracy and must lie in"):
            modular_runs.first_rank_at_or_below(curves, bad)


def test_training_collapses_are_episodes_after_the_fit():
    acc = np.array([[0.1, 0.5], [0.95, 0.6], [0.2, 0.95], [0.3, 0.96], [0.97, 0.4], [0.99, 0.97]])
    hist = {"epoch": list(range(11, 17)), "train_acc": acc.tolist()}
    # Seed 0 is fitted at 12, collapses during 13-14; seed 1 is fitted at 13 and collapses at 15.
    # Low accuracy before the first fit (seed 0 at 11, seed 1 at 11-12) is learning, not a collapse.
    assert modular_runs.training_collapses(hist) == [[(13, 14)], [(15, 15)]]
    assert modular_runs.training_collapses(hist, threshold=0.99) == [[], []]  # seed 1 never reaches 0.99
    assert modular_runs.training_collapses({"epoch": [1, 2], "train_acc": [[0.1], [0.2]]}) == [[]]
    acc[-1] = 0.0  # a collapse still going on at the last epoch ends there
    assert modular_runs.training_collapses({"epoch": list(range(6)), "train_acc": acc.tolist()})[0] == [(2, 3), (5, 5)]
    # After epoch 12 (window 13..16, 2 seeds x 4 epochs): episodes (13, 14) and (15, 15); after 13
    # (window 14..16) only (15, 15) begins inside it.
    assert modular_runs.collapse_summary(hist, 12, 16) == modular_runs.CollapseSummary(1.0, 37.5, 2)
    later = modular_runs.collapse_summary(hist, 13, 16)
    assert (later.per_model, later.percent, later.longest) == (0.5, pytest.approx(100 / 6), 1)
    with pytest.raises(ValueError, match="must come after"):
        modular_runs.collapse_summary(hist, 16, 16)
    with pytest.raises(ValueError, match="threshold"):
        modular_runs.training_collapses(hist, threshold=0.0)
    with pytest.raises(ValueError, match="train_acc must be"):
        modular_runs.training_collapses({"epoch": [1, 2, 3], "train_acc": [[1.0], [1.0]]})


def test_inflation_summary_separates_models_that_lost_the_task():
    def rec(epoch, accs, dims):
        return {
            "epoch": epoch,
            "models": [
                {"test_acc": a, "core_dim": d, "necessary_rank": d, "sufficient_rank": 1, "modes": [1] * (d // 4)}
                for a, d in zip(accs, dims)
            ],
        }

    p = modular_runs.ModularParams(**TINY)
    wd = [rec(2, [0.5, 0.5], [4, 4]), rec(4, [1.0, 1.0], [8, 12]), rec(6, [1.0, 0.2], [16, 4])]
    no_wd = [rec(4, [1.0, 1.0], [8, 12]), rec(6, [1.0, 1.0], [8, 8]), rec(8, [1.0, 1.0], [8, 8])]
    s = core_inflation.inflation_summary(p, wd, no_wd)
    assert (s.start, s.end) == (4, 6)  # the last epoch both arms have
    assert s.wd.core_dim_start == 10 and s.wd.core_dim_end == 10  # mean over both models
    assert s.wd.core_dim_end_working == 16 and s.wd.n_working_end == 1  # the collapsed one left out
    assert s.wd.modes_end_working == 4 and s.wd.modes_end == 2.5
    assert s.no_wd.n_working_end == 2 and s.no_wd.core_dim_end_working == 8
    wd[-1]["models"][0]["test_acc"] = 0.1  # no model does the task: the working mean is undefined
    assert np.isnan(core_inflation.inflation_summary(p, wd, no_wd).wd.core_dim_end_working)


def test_compact_epoch_is_where_a_series_first_nears_its_floor():
    epochs = [0, 100, 200, 300, 400, 500]
    assert modular_addition.compact_epoch(epochs, [60, 40, 16, 15, 15.5, 30]) == 200  # 16 is within 10 % of 15
    assert modular_addition.compact_epoch(epochs, [60, 17, 15, 15, 25, 60]) == 200  # later growth does not move it
    assert modular_addition.compact_epoch(epochs, [15] * 6) == 0
    assert modular_addition.compact_epoch(epochs, [float("nan")] * 6) is None
    with pytest.raises(ValueError, match="equal-length"):
        modular_addition.compact_epoch(epochs, [1, 2])


def test_growth_epoch_is_where_a_series_first_covers_a_share_of_its_change():
    epochs = [900, 1000, 1100, 1200, 1300]
    assert core_inflation.growth_epoch(epochs, [10, 12, 16, 30, 20], 0.5) == 1100  # level 15: 16 is the first past it
    assert core_inflation.growth_epoch(epochs, [10, 12, 16, 30, 20], 0.2) == 1000  # level 12, reached exactly
    # overshooting counts; falling back too
    assert core_inflation.growth_epoch(epochs, [10, 12, 14, 30, 20], 1.0) == 1200
    assert core_inflation.growth_epoch(epochs, [40, 30, 20, 14, 10], 0.9) == 1300  # a fall: level 13
    assert core_inflation.growth_epoch(epochs, [12] * 5, 0.5) == 900  # no change: covered at once
    assert core_inflation.growth_epoch(epochs, [10, float("nan"), 16, 30, 20], 0.5) == 1100
    assert core_inflation.growth_epoch(epochs, [10, 12, 16, 30, float("nan")], 0.5) is None
    with pytest.raises(ValueError, match="share must lie in"):
        core_inflation.growth_epoch(epochs, [1] * 5, 0)
    with pytest.raises(ValueError, match="equal-length"):
        core_inflation.growth_epoch(epochs, [1, 2], 0.5)


def test_the_recorded_runs_numbers_the_chapters_glue():
    """The numbers the two modular chapters quote from the recorded paper-profile run, as they
    read on the record kept in the repository (the values their prose was written for)."""
    from corelib.experiments import paper_scale

    recorded = paper_scale.recorded_inflation()
    if recorded is None:
        pytest.skip("no recorded paper-profile run in this checkout")
    inflation = core_inflation._recorded_values(recorded, None)
    assert set(inflation) == set(core_inflation._recorded_values(None, None))
    assert (inflation["rec_wd_core_dim_start"], inflation["rec_wd_core_dim_end"]) == (13, 51)
    assert round(inflation["rec_wd_growth"], 1) == 3.9
    assert (round(inflation["rec_wd_start_below_paper_pct"]), round(inflation["rec_wd_end_below_paper_pct"])) == (
        13,
        15,
    )
    assert (inflation["rec_wd_growth_half_epoch"], inflation["rec_wd_growth_90_epoch"]) == (4500, 8000)
    assert inflation["rec_no_growth_90_after"] == 1000
    assert (round(inflation["rec_wd_gap_start"], 1), round(inflation["rec_wd_gap_end"], 1)) == (4.0, 32.7)
    assert (inflation["rec_modes_max"], inflation["rec_dropout"], inflation["rec_n_test"]) == (26, 0.1, 1405)
    emergence = modular_addition._recorded_emergence_values(recorded, None)
    assert set(emergence) == set(modular_addition._recorded_emergence_values(None, None))
    assert (emergence["rec_grok_epoch"], emergence["rec_model_groks"], emergence["rec_modes_at"]) == (
        800,
        "600, 800, 800",
        "4, 6, 6",
    )
    assert (emergence["rec_core_compact"], emergence["rec_core_settles"], emergence["rec_first_refined"]) == (
        900,
        100,
        1000,
    )
    assert (round(emergence["rec_dim_mean_init"]), emergence["rec_dim_mean_compact"], emergence["rec_energy_pct"]) == (
        43,
        13,
        99,
    )


def test_the_frequency_counts_are_read_at_the_summarys_start_and_end():
    arm = core_inflation.ArmSummary(*([1.0] * 12), n_working_end=2)
    summary = core_inflation.InflationSummary(start=4, end=8, grok_epoch=2, wd=arm, no_wd=arm)
    spectra = {
        "wd": {"epoch": np.array([0, 4, 8]), "count": np.array([[5, 5], [3, 4], [7, 9]])},
        "no_wd": {"epoch": np.array([4, 8]), "count": np.array([[3, 4], [2, 2]])},
    }
    values = core_inflation._frequency_values(modular_runs.ModularParams(p=11), summary, spectra)
    assert (values["wd_frequencies_start"], values["wd_frequencies_end"]) == (3.5, 8.0)
    assert (values["no_frequencies_start"], values["no_frequencies_end"]) == (3.5, 2.0)
    assert (values["frequencies_init"], values["frequencies_max"]) == (5.0, 5)


def test_an_annealed_branch_ramps_the_decay_down_in_a_folder_of_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    abrupt = modular_runs.ModularParams()
    ramp = modular_runs.ModularParams(branch_anneal_epochs=500)
    assert abrupt.stack_config("no_wd", 3000).decay_knots == ()
    cfg = ramp.stack_config("no_wd", 3000)
    assert cfg.decay_knots == ((900, 1.0), (1400, 0.0))
    assert [cfg.decay_at(e, 1)[0] for e in (900, 1150, 1400, 2000)] == [1.0, 0.5, 0.0, 0.0]
    assert ramp.stack_config("wd", 3000).decay_knots == ()  # the run it branches from is unchanged
    assert modular_runs.arm_dir(abrupt, "no_wd").name == "branch_900_wd0"  # the paper's arm keeps its folder
    assert modular_runs.arm_dir(ramp, "no_wd").name == "branch_900_wd0_anneal500"
    assert modular_runs.arm_dir(ramp, "wd") == modular_runs.arm_dir(abrupt, "wd")
    with pytest.raises(ValueError, match="branch_anneal_epochs must be a whole number"):
        modular_runs.ModularParams(branch_anneal_epochs=-1)


def test_the_chapters_glue_numbers_and_status_words_not_sentences():
    """What the chapters quote about the recorded run and the comparison with it: numbers, lists
    of numbers and short status words; the same names whether or not a run is recorded."""
    from corelib import agreement
    from corelib.experiments.paper_scale_records import InflationAgreement

    snapshots = [{"epoch": 100, "models": [{"core_dim": d, "test_acc": 0.9} for d in (13, 14, 15)]}]
    moved = [{"epoch": 100, "models": [{"core_dim": d, "test_acc": 0.9} for d in (13, 14, 16)]}]
    stats = agreement.compare(
        snapshots, moved, agreement.snapshot_groups(snapshots, "wd"), agreement.snapshot_groups(moved, "wd")
    )
    agree = modular_runs.agreement_values(InflationAgreement(True, {"wd": 4, "no_wd": 3}, [], stats))
    assert agree == {
        "rec_same_models": "yes",
        "rec_n_compared": 7,
        "rec_n_differences": 0,
        "rec_n_rank_differences": 0,
        "rec_first_difference": "none",
        "rec_n_quantities": 2,  # core_dim and test_acc at epoch 100
        "rec_n_moved": 1,
        "rec_n_beyond": 0,  # a mean moved by a third of a unit: within one unit
        # the difference's error from both samples' spread: sd 1 and sd 1.53 over three models
        "rec_largest_z": round((1 / 3) / ((1 + np.var([13, 14, 16], ddof=1)) / 3) ** 0.5, 2),
        "seed_errors": agreement.SEED_ERRORS,
    }
    other = modular_runs.agreement_values(InflationAgreement(False, {"wd": 0}, [], None))
    assert other["rec_same_models"] == "no" and other["rec_n_compared"] == 0
    differences = [
        "wd epoch 0.models[0].r2_heldout: recorded -11.5758, re-derived -11.5759",
        "wd epoch 100.models[2].core_dim: recorded 39, re-derived 38",
        "wd epoch 100.models[2].energy_rank: recorded 39, re-derived 38",
        "no_wd epoch 1000.models[1].eigenvalues[40][1]: recorded -0.56, re-derived -0.57",
        "no_wd epoch 1000.models[1].modes: 5 recorded entries, 6 re-derived",
    ]
    differ = modular_runs.agreement_values(InflationAgreement(True, {"wd": 2}, differences, None))
    assert (differ["rec_n_differences"], differ["rec_n_rank_differences"]) == (5, 3)
    assert differ["rec_first_difference"].startswith("wd epoch 0.models[0].r2_heldout")
    assert set(modular_runs.agreement_values(None).values()) == {"n/a", agreement.SEED_ERRORS}
    assert modular_runs.settings_list(modular_runs.ModularParams()) == "none"
    assert (
        modular_runs.settings_list(modular_runs.ModularParams(long_epochs=1200)) == "long_epochs: 1200 (paper: 20000)"
    )
    assert modular_runs.settings_list(modular_runs.ModularParams(long_epochs=1200), ignore=["long_epochs"]) == "none"
    empty = core_inflation._recorded_values(None, None)
    assert all(isinstance(v, float) and np.isnan(v) or v == "n/a" for k, v in empty.items() if k != "seed_errors")
    emergence = modular_addition._recorded_emergence_values(None, None)
    assert {v for k, v in emergence.items() if k != "seed_errors"} == {"n/a"}
    assert core_inflation._overlap([12, 27, 23], [12, 44, 14]) == "overlap"
    assert core_inflation._overlap([40, 50, 45], [30, 35, 33]) == "do not overlap"
    assert core_inflation._overlap([], [1]) == "overlap"


def test_the_removal_test_first_adds_dimensions_after_the_energy_rank():
    def rec(epoch, pairs):
        return {"epoch": epoch, "models": [{"energy_rank": e, "necessary_rank": n} for e, n in pairs]}

    records = [rec(0, [(40, 40), (42, 42)]), rec(100, [(12, None), (14, 14)]), rec(200, [(12, 12), (14, 16)])]
    assert modular_addition.first_refined_epoch(records) == 200  # a missing necessary rank adds nothing
    assert modular_addition.first_refined_epoch(records[:2]) is None


def test_the_threshold_table_is_the_mean_first_crossing_per_arm():
    curves = {
        "wd": {
            "rank": np.arange(1, 5),
            "energy_rank": np.array([1, 2]),
            "remove": np.array([[0.5, 0.2, 0.04, 0.01]] * 2),
        },
        "no_wd": {
            "rank": np.arange(1, 5),
            "energy_rank": np.array([1, 1]),
            "remove": np.array([[0.5, 0.3, 0.2, 0.1]] * 2),
        },
    }
    table = core_inflation.threshold_table(curves, [0.05, 0.2])
    assert table.index.tolist() == [0.05, 0.2] and table.columns.tolist() == ["wd", "no_wd"]
    assert table.loc[0.05, "wd"] == 3.0 and np.isnan(table.loc[0.05, "no_wd"])  # no_wd never gets there
    assert table.loc[0.2, "wd"] == 2.0 and table.loc[0.2, "no_wd"] == 3.0


def test_a_kept_removal_curve_is_read_without_the_weights(tmp_path, monkeypatch):
    # A results folder may keep the curves and not the snapshots they were computed from.
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(**TINY)
    path = modular_runs.analysis_path(p, "wd", 6).with_name("removal_curves_000006.json")
    kept = {"remove": [[0.9, 0.1], [0.8, 0.05]], "keep": [[0.2, 1.0], [0.3, 1.0]], "energy_rank": [1, 2]}
    compute_once(path, lambda: kept)
    assert not list(tmp_path.rglob("snapshot*"))
    curves = modular_runs.removal_curves(p, "wd", 6, progress=False)
    assert curves["remove"].tolist() == kept["remove"] and curves["rank"].tolist() == [1, 2]
    with pytest.raises(modular_runs.MissingSnapshots, match="has no snapshot"):  # not kept: it needs them
        modular_runs.removal_curves(p, "wd", 4, progress=False)


def test_kept_analyses_are_read_without_the_weights(tmp_path, monkeypatch):
    # A results folder may keep an arm's analyses and not the snapshots they were computed from.
    from dataclasses import replace

    from corelib.experiments.modular_records import ModularAnalysis, Snapshot

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(modular_runs, "analyse_model", lambda *a, **k: pytest.fail("an analysis was recomputed"))
    p = modular_runs.ModularParams(**TINY)
    model = ModularAnalysis(
        test_acc=1.0, energy_rank=2, necessary_rank=3, sufficient_rank=2, core_dim=3, keep_acc=1.0,
        remove_acc=0.05, r2=0.9, r2_heldout=0.8, unit_fraction=1.0, modes=(1, 4),
        eigenvalues=((1.0, 0.0),) * 3, singular_values=(3.0, 2.0, 1.0),
    )  # fmt: skip
    kept = {e: Snapshot(e, (model, replace(model, core_dim=e + 2))) for e in (0, 2, 4, 6)}
    for e, snapshot in kept.items():
        compute_once(modular_runs.analysis_path(p, "wd", e), snapshot.to_json)
    assert not list(tmp_path.rglob("snapshot*")) and not list(tmp_path.rglob("progress.json"))
    assert modular_runs.analyse_arm(p, "wd", 6, progress=False) == list(kept.values())
    assert modular_runs.analyse_arm(p, "wd", 4, progress=False) == [kept[0], kept[2], kept[4]]
    # epoch 8 is not kept: it needs the weights, and the refusal names the call that trains them
    with pytest.raises(modular_runs.MissingSnapshots, match=r"has no snapshot .*train_arm\(params, 'wd', 8\)"):
        modular_runs.analyse_arm(p, "wd", 8, progress=False)
    modular_runs.analysis_path(p, "wd", 2).unlink()  # one kept analysis lost: refused, not half read
    with pytest.raises(modular_runs.MissingSnapshots, match=r"train_arm\(params, 'wd', 6\)"):
        modular_runs.analyse_arm(p, "wd", 6, progress=False)
