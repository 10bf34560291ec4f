"""The tests of the core-inflation chapter's explanations (corelib.experiments.inflation_questions)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from corelib.experiments import core_inflation_questions as iq
from corelib.experiments import modular_runs
from corelib.results import StoreError

TINY = dict(
    p=11,
    d_model=16,
    n_heads=2,
    d_ff=32,
    epochs=6,
    long_epochs=8,
    branch_epoch=4,
    snapshot_every=2,
    seeds=(0, 1),
    n_jacobians=16,
    eval_every=2,
)


@pytest.fixture
def trained(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    p = modular_runs.ModularParams(**TINY)
    modular_runs.train_arm(p, "wd", p.epochs, progress=False)
    return p


def test_core_sizes_are_the_chapters_analyses_and_a_variant_is_its_own(trained, monkeypatch):
    p = trained
    chapter = modular_runs.analyse_arm(p, "wd", p.epochs, progress=False)
    sizes = iq.core_sizes(p, "wd", [2, 6])
    assert sizes[6] == next(r["models"] for r in chapter if r["epoch"] == 6)  # the same cache, read back
    more = iq.core_sizes(replace(p, n_jacobians=40), "wd", [6])
    assert len(more[6]) == 2 and modular_runs.analysis_path(replace(p, n_jacobians=40), "wd", 6).exists()
    assert modular_runs.analysis_path(p, "wd", 6) != modular_runs.analysis_path(replace(p, n_jacobians=40), "wd", 6)
    monkeypatch.setattr(modular_runs, "train_arm", lambda *a, **k: pytest.fail("an analysis trained"))
    with pytest.raises(StoreError, match="no snapshot of arm 'wd' at epoch 7.*train it first"):
        iq.core_sizes(p, "wd", [7])


def test_the_paper_tolerance_gives_the_chapters_sufficient_rank_and_looser_ones_never_more(trained):
    p = trained
    chapter = iq.core_sizes(p, "wd", [6])[6]
    ranks = iq.sufficient_by_tolerance(p, "wd", 6, [0.001, 0.05, 0.5, 0.999])
    assert ranks.shape == (2, 4)
    for seed, m in enumerate(chapter):
        assert ranks[seed, 0] == (m["sufficient_rank"] if m["sufficient_rank"] is not None else -1)
    valid = np.where(ranks < 0, 10**6, ranks)
    assert np.all(np.diff(valid, axis=1) <= 0)  # a looser test never needs more dimensions
    assert np.all(ranks[:, -1] == 1)  # within 0.999 of any accuracy: one dimension suffices
    with pytest.raises(ValueError, match=r"tolerances must be finite numbers in \[0, 1\)"):
        iq.sufficient_by_tolerance(p, "wd", 6, [float("nan")])


def test_the_seed_interval_is_scipys_t_interval():
    values = [13.0, 15.0, 12.0]
    got = iq.seed_interval(values)
    low, high = stats.t.interval(0.95, 2, loc=np.mean(values), scale=stats.sem(values))
    assert (got.low, got.high, got.n) == pytest.approx((low, high, 3))
    assert got.contains(13.5) and not got.contains(30.0)
    with pytest.raises(ValueError, match="at least two finite values"):
        iq.seed_interval([13.0])


def test_seed_noise_p_is_the_one_sample_t_test_computed_by_hand():
    values, paper = np.array([63.0, 42.0, 48.0]), 60.0
    t = (values.mean() - paper) / (values.std(ddof=1) / np.sqrt(3))
    assert iq.seed_noise_p(values, paper) == pytest.approx(2 * stats.t.sf(abs(t), 2), rel=1e-12)
    assert iq.seed_noise_p([5.0, 5.0, 5.0], 5.0) == 1.0 and np.isnan(iq.seed_noise_p([13.0, 13.0, 13.0], 15.0))
    assert iq.seed_noise_p([10.0, 11.0, 12.0], 11.0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="at least two finite values"):
        iq.seed_noise_p([1.0, float("nan")], 1.0)


def _arm(label="dropout 0", core_end=(30, 20, 22), collapses=(5, 6, 7), suff=None, many=None):
    epochs = (0, 900, 2000, 20000)
    core = np.array([[3, 3, 3], [12, 14, 13], [15, 16, 17], list(core_end)])
    suff = np.array(suff if suff is not None else [[[7, 6, 5]] * 3, [[8, 7, 6]] * 3, [[20, 12, 8]] * 3])
    return iq.ArmQuestions(
        label=label, dropout=0.0, epochs=epochs, core_dim=core, sufficient_rank=core // 2,
        test_acc=np.array([[0.0] * 3, [1.0, 0.2, 0.3], [1.0] * 3, [1.0] * 3]), tolerances=(0.001, 0.01, 0.05),
        tolerance_epochs=(900, 2000, 20000), sufficient_by_tolerance=suff, n_many_jacobians=1000,
        many_jacobians_epoch=20000, core_dim_many_jacobians=np.array(many if many is not None else core_end),
        collapses=np.array(collapses),
    )  # fmt: skip


def test_an_arm_record_reads_back_equal_and_a_damaged_one_is_refused():
    arm = _arm()
    back = iq.ArmQuestions.from_json(json.loads(json.dumps(arm.to_json())))
    for k, v in arm.__dict__.items():
        assert np.array_equal(getattr(back, k), v) if isinstance(v, np.ndarray) else getattr(back, k) == v
    data = arm.to_json()
    with pytest.raises(StoreError, match="version 1: restore it from git"):
        iq.ArmQuestions.from_json({**data, "version": 2})
    with pytest.raises(StoreError, match=r"wrong shape \(collapses\)"):
        iq.ArmQuestions.from_json({**data, "collapses": [1, 2]})
    with pytest.raises(StoreError, match="damaged arm-questions record"):
        iq.ArmQuestions.from_json({k: v for k, v in data.items() if k != "epochs"})
    with pytest.raises(KeyError, match="epoch 5 was not analysed"):
        arm.at(5)


def test_the_findings_are_the_differences_the_chapter_names():
    d0 = _arm(core_end=(32, 17, 21), collapses=(189, 141, 158))
    control = _arm("dropout 0.1", core_end=(60, 40, 50), collapses=(10, 20, 30), many=(60, 41, 50))
    recorded = [{"epoch": 900, "models": [{"core_dim": d} for d in (12, 14, 13)]},
                {"epoch": 20000, "models": [{"core_dim": d} for d in (63, 42, 48)]}]  # fmt: skip
    got = iq.finding_values(recorded, d0, control, {"branch": 15, "end": 60}, 900)
    assert got["inflation.dropout_end_core"] == pytest.approx(70 / 3 - 50)
    assert got["inflation.dropout_spikes"] == pytest.approx(162.666666 - 20, abs=1e-4)
    assert got["inflation.jacobians_count"] == 1
    assert got["inflation.sufficient_loose_stable"] == pytest.approx(np.mean([8, 8, 8]) / np.mean([5, 5, 5]))
    assert got["inflation.end_core_seed_noise"] == pytest.approx(stats.ttest_1samp([63, 42, 48], 60).pvalue)
    assert got["inflation.grok_core_seed_noise"] == pytest.approx(stats.ttest_1samp([12, 14, 13], 15).pvalue)
    values = iq.glue_values(
        recorded, d0, control, {"branch": 15, "end": 60}, 900, grok_threshold=0.99, exercise_epoch=2000
    )
    assert values["q_d0_grokked_branch"] == 1 and values["q_loose_growth"] == pytest.approx(8 / 5)
    assert values["q_d0_core_exercise"] == "15, 16, 17"
    # a seed whose core never reaches the tolerance (-1) is left out of the means, not averaged in
    missing = _arm("dropout 0.1", suff=[[[7, 6, 5], [7, 6, 5], [7, 6, -1]], [[8, 7, 6]] * 3, [[20, 12, 8]] * 3])
    got = iq.finding_values(recorded, d0, missing, {"branch": 15, "end": 60}, 900)
    assert got["inflation.sufficient_loose_stable"] == pytest.approx(8 / 5)
    assert iq.found_mean(np.array([-1, -1])) != iq.found_mean(np.array([-1, -1]))  # NaN when none is found
    assert iq.seed_interval([63, 42, 48]).low == pytest.approx(values["q_end_low"])
    table = iq.question_table({"a": d0, "b": control}, [900, 20000])
    assert table.loc["dropout 0", "models generalising, epoch 900"] == 1
    assert iq.tolerance_table(control).loc["growth, last / first", "0.05"] == pytest.approx(8 / 5)


def test_the_arm_record_of_a_trained_arm_and_its_rederived_sample(trained):
    p = replace(trained, long_epochs=trained.epochs)
    arm = iq.arm_questions(p, "tiny", tolerance_epochs=[4, 6], many_jacobians=48)
    chapter = {r["epoch"]: r["models"] for r in modular_runs.analyse_arm(p, "wd", 6, progress=False)}
    assert arm.epochs == tuple(sorted(chapter)) and arm.core_dim.shape == (len(chapter), 2)
    assert [m["core_dim"] for m in chapter[6]] == arm.core_dim[arm.at(6)].tolist()
    first = arm.sufficient_by_tolerance[:, :, 0]
    assert first.tolist() == [
        [-1 if m["sufficient_rank"] is None else m["sufficient_rank"] for m in chapter[e]] for e in (4, 6)
    ]
    # after the last block the read-out is linear: more Jacobians cannot change the core
    assert np.array_equal(arm.core_dim_many_jacobians, arm.core_dim[-1])
    # a fresh results folder re-derives the snapshot at epoch 2 from scratch, identically here
    record = {"arms": {"dropout0": arm.to_json()}, "provenance": {"params": {"dropout0": dataclasses.asdict(p)}}}
    from acebook.record_questions import verify_questions
    from corelib.results import fresh_results_root

    with fresh_results_root():
        result = verify_questions(record, 2, 1e-9)
    assert result.identical and result.agrees
    with pytest.raises(SystemExit, match="--epochs must be a recorded snapshot"):
        verify_questions(record, 3, 1e-9)


def test_the_glued_values_are_plain_python_numbers_or_text():
    d0, control = _arm(), _arm("dropout 0.1")
    recorded = [{"epoch": e, "models": [{"core_dim": d} for d in (12, 14, 13)]} for e in (900, 20000)]
    values = iq.glue_values(
        recorded, d0, control, {"branch": 15, "end": 60}, 900, grok_threshold=0.99, exercise_epoch=900
    )
    assert all(type(v) in (int, float, str) for v in values.values()), {k: type(v) for k, v in values.items()}
