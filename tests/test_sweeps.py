"""Grokking sweeps: exact every-step times, independence of seeds, resumable records, fits."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
import torch

from corelib.engine import DropoutStreams, PrefixData, SeedStack, StackOptimizer, epoch_order
from corelib.results import StoreError
from corelib.tasks import condition_stacks, stopping_rules, sweeps
from corelib.tasks.modular import modular_addition_split
from corelib.tasks.sweeps import (
    Condition,
    SweepConfig,
    SweepStats,
    batch_plan,
    bootstrap_fit,
    condition_dir,
    grok_time_constants,
    min_correct,
    power_law_constants,
    run_condition,
    run_sweep,
    summarise,
    train_condition,
)
from corelib.theory import grok_time

TINY = dict(d_model=16, n_heads=2, d_ff=32, lr=1e-2)


def overlap_data(cond: Condition, cfg: SweepConfig) -> tuple[PrefixData, PrefixData]:
    """Train set, and a 'test' set of 40 training pairs + 4 held-out pairs.

    Tiny models do not generalise on small p, so the test accuracy of the real split never
    crosses a high threshold. On this set it does, once the 40 pairs are memorised, and at 0.9
    the error budget is 4: the early exit is exercised with a small budget on both sets.
    """
    (x, y), (xt, yt) = modular_addition_split(cond.p, cfg.train_fraction, cfg.split_seed, cfg.split_permutation)
    test = PrefixData.from_tokens(torch.cat([x[:40], xt[:4]]), torch.cat([y[:40], yt[:4]]))
    return PrefixData.from_tokens(x, y), test


@torch.no_grad()
def exact_accuracy(stack: SeedStack, data: PrefixData) -> list[float]:
    """Accuracy of every seed on all of ``data``, as Python floats (correct / n in double precision).

    (``SeedStack.accuracy`` divides in float32, where e.g. 54/60 < 0.9.)
    """
    correct = (stack.last_logits(data).argmax(-1) == data.targets).sum(dim=1)
    return [int(c) / len(data) for c in correct]


def naive_times(cond: Condition, seeds, cfg: SweepConfig, steps: int, data) -> dict[int, tuple]:
    """Reference: the same training, with a full accuracy evaluation of train and test after every step."""
    train, test = data
    n = len(train)
    batch = min(cond.batch_size or n, n)
    model_cfg = cfg.model_config(cond.p)
    stack = SeedStack.initialise(model_cfg, seeds, "cpu")
    opt = StackOptimizer(stack, cfg.lr, [cond.weight_decay] * len(seeds))
    streams = DropoutStreams(cfg.dropout, seeds) if cfg.dropout else None  # every seed draws every step
    t_mem, t_gen = [None] * len(seeds), [None] * len(seeds)
    step, permutations, pos = 0, 0, n
    while step < steps:
        if pos + batch > n:  # the next batch would run past the end: a fresh permutation
            order = torch.stack([epoch_order(n, s, permutations) for s in seeds])
            permutations, pos = permutations + 1, 0
        idx = order[:, pos : pos + batch]
        pos += batch
        opt.step(stack, train, idx, None if streams is None else streams.draw(model_cfg, idx.shape[1], 2, "cpu"))
        step += 1
        acc_tr, acc_te = exact_accuracy(stack, train), exact_accuracy(stack, test)  # after `step`
        for j in range(len(seeds)):
            if t_mem[j] is None and acc_tr[j] >= cfg.threshold:
                t_mem[j] = step
            if t_gen[j] is None and acc_te[j] >= cfg.threshold:
                t_gen[j] = step
    return {s: (t_mem[j], t_gen[j]) for j, s in enumerate(seeds)}


def test_min_correct_agrees_with_the_float_comparison():
    for n in [1, 7, 60, 61, 100, 1404, 1405, 5101]:
        for thr in [0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0, 0.3, 0.7]:
            c = min_correct(n, thr)
            assert c / n >= thr and (c == 0 or (c - 1) / n < thr), (n, thr, c)
    assert min_correct(1404, 0.99) == 1390  # 14 errors allowed on the paper's training set


@pytest.mark.parametrize("dropout", [0.0, pytest.param(0.1, marks=pytest.mark.slow)], ids=["no dropout", "dropout"])
@pytest.mark.parametrize(
    "batch_size", [pytest.param(32, marks=pytest.mark.slow), None], ids=["minibatch", "full-batch"]
)
def test_times_equal_a_naive_full_evaluation_after_every_step(batch_size, dropout):
    # With dropout this also checks that a seed that stops leaves the others' mask streams intact.
    max_epochs = 300 if dropout else (80 if batch_size else 100)  # dropout slows the tiny models down
    threshold = 0.7 if dropout else 0.9  # with dropout, 0.9 takes 5x the steps to test the same thing
    cfg = SweepConfig(**TINY, threshold=threshold, patience_epochs=1, max_epochs=max_epochs, dropout=dropout)
    cond = Condition(p=11, weight_decay=1.0, batch_size=batch_size)
    seeds, data = (1, 2, 3), overlap_data(cond, cfg)
    recs = train_condition(cond, seeds, cfg, device="cpu", progress=False, data=data)
    steps = max(r["stopped_at"] for r in recs)
    ref = naive_times(cond, seeds, cfg, steps, data)
    for r in recs:
        assert (r["t_mem"], r["t_gen"]) == ref[r["seed"]], r
        assert r["t_gen"] is not None and r["t_mem"] is not None and r["t_mem"] > 1
        assert r["reason"] == "patience" and r["stopped_at"] == r["t_gen"] + r["steps_per_epoch"]
        assert r["delay"] == r["t_gen"] - r["t_mem"]
    assert len({r["t_gen"] for r in recs}) > 1  # seeds stopped at different steps (dropping was exercised)
    assert min(r["stopped_at"] for r in recs) < max(r["t_gen"] for r in recs)  # one left, others trained on
    assert len({r["t_mem"] for r in recs}) > 1


@pytest.mark.parametrize("dropout", [0.0, pytest.param(0.1, marks=pytest.mark.slow)], ids=["no dropout", "dropout"])
def test_a_seed_gets_the_same_result_alone_or_with_others(dropout):
    cfg = SweepConfig(**TINY, threshold=0.12, patience_epochs=1, max_epochs=40, dropout=dropout)
    cond = Condition(p=11, weight_decay=0.5, batch_size=16)
    together = train_condition(cond, (4, 5, 6), cfg, device="cpu", progress=False)
    alone = train_condition(cond, (5,), cfg, device="cpu", progress=False)
    assert together[1] == alone[0]


def _cfg():
    return SweepConfig(**TINY, threshold=0.12, patience_epochs=0, max_epochs=20)


@pytest.mark.slow
def test_records_resume_and_corrupt_ones_are_recomputed(tmp_path, monkeypatch):
    cond, cfg, seeds = Condition(p=11, weight_decay=1.0, batch_size=None), _cfg(), (1, 2, 3)
    first = run_condition(cond, seeds, cfg, root=tmp_path, device="cpu", progress=False)
    folder = condition_dir(cond, cfg, tmp_path)
    assert sorted(f.name for f in folder.glob("seed_*.json")) == ["seed_1.json", "seed_2.json", "seed_3.json"]

    calls = []
    real = sweeps.train_condition

    def spy(cond_, seeds_, *args, **kwargs):
        calls.append(tuple(seeds_))
        return real(cond_, seeds_, *args, **kwargs)

    monkeypatch.setattr(sweeps, "train_condition", spy)
    assert run_condition(cond, seeds, cfg, root=tmp_path, device="cpu", progress=False) == first
    assert calls == []  # finished: nothing recomputed

    text = (folder / "seed_1.json").read_text()
    (folder / "seed_1.json").write_text(text[: len(text) // 2])  # truncated JSON
    bad = json.loads((folder / "seed_3.json").read_text())
    bad["delay"] = 12345  # inconsistent with t_gen - t_mem
    (folder / "seed_3.json").write_text(json.dumps(bad))
    with pytest.warns(UserWarning, match="recomputed"):
        again = run_condition(cond, seeds, cfg, root=tmp_path, device="cpu", progress=False)
    assert calls == [(1, 3)]
    assert again == first
    assert json.loads((folder / "seed_3.json").read_text()) == first[2]


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: r.pop("t_gen"),
        lambda r: r.update(t_mem="12"),
        lambda r: r.update(seed=99),
        lambda r: r.update(extra=1),
        lambda r: r.update(final_test_acc=1.5),
    ],
)
def test_record_problems_detects_wrong_fields(damage):
    cond, cfg = Condition(p=11, weight_decay=1.0), _cfg()
    key = sweeps.params_key(sweeps._condition_params(cond, cfg))
    good = {
        "seed": 1,
        "condition": key,
        "p": 11,
        "weight_decay": 1.0,
        "batch_size": 60,
        "steps_per_epoch": 1,
        "t_mem": 5,
        "t_gen": 9,
        "delay": 4,
        "stopped_at": 9,
        "reason": "patience",
        "final_train_acc": 1.0,
        "final_test_acc": 0.2,
    }
    assert sweeps.record_problems(good, cond, cfg, 1) == []
    damage(good)
    assert sweeps.record_problems(good, cond, cfg, 1)


@pytest.mark.slow
def test_run_sweep_dispatches_only_unfinished_conditions(tmp_path, monkeypatch):
    cfg, seeds = _cfg(), (1, 2)
    conds = [Condition(p=11, weight_decay=w, batch_size=None) for w in (0.5, 1.0)]
    table = run_sweep(conds[:1], seeds, cfg, root=tmp_path, progress=False)
    assert list(table["seed"]) == [1, 2] and set(table["weight_decay"]) == {0.5}
    ran = []
    real = sweeps.run_condition
    monkeypatch.setattr(sweeps, "run_condition", lambda c, *a, **k: ran.append(c) or real(c, *a, **k))
    full = run_sweep(conds, seeds, cfg, root=tmp_path, n_jobs=1, progress=False)
    assert ran == [conds[1]]
    assert len(full) == 4 and full.iloc[:2].equals(table)


@pytest.mark.slow  # starts a Dask cluster of two worker processes
def test_a_sweep_on_a_dask_cluster_gives_the_records_of_a_sequential_run(tmp_path):
    distributed = pytest.importorskip("distributed")
    cfg, seeds = _cfg(), (1, 2)
    conds = [Condition(p=11, weight_decay=w, batch_size=None) for w in (0.5, 1.0, 2.0)]
    sequential = run_sweep(conds, seeds, cfg, root=tmp_path / "here", progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_cluster = run_sweep(conds, seeds, cfg, root=tmp_path / "there", cluster=cluster, progress=False)
    pd.testing.assert_frame_equal(on_cluster, sequential, check_exact=True)
    # every record was saved where the driver reads them: a second run dispatches nothing
    again = run_sweep(conds, seeds, cfg, root=tmp_path / "there", cluster="tcp://127.0.0.1:1", progress=False)
    pd.testing.assert_frame_equal(again, sequential, check_exact=True)


@pytest.mark.parametrize(
    ("gpus", "worker", "variable", "expected"),
    [
        (4, 0, None, "cuda:0"),
        (4, 6, None, "cuda:2"),  # LocalCluster names its workers 0, 1, ...: one GPU each, round robin
        (4, "w-a", None, f"cuda:{int(hashlib.sha256(b'w-a').hexdigest(), 16) % 4}"),
        (4, None, None, "cpu"),  # not on a worker
        (4, 3, "cpu", "cpu"),  # ACE_DEVICE wins
        (1, 3, None, "cpu"),  # one GPU (faked here without CUDA): no pinning
    ],
)
def test_worker_device_pins_one_gpu_per_dask_worker(monkeypatch, gpus, worker, variable, expected):
    import distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(sweeps, "default_device", lambda: torch.device("cpu"))
    if variable is None:
        monkeypatch.delenv(sweeps.DEVICE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(sweeps.DEVICE_VARIABLE, variable)

    def get_worker():
        if worker is None:
            raise ValueError("No worker found")
        return type("Worker", (), {"name": worker})()

    monkeypatch.setattr(distributed, "get_worker", get_worker)
    assert sweeps.worker_device() == torch.device(expected)


def test_a_cluster_without_dask_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_distributed(name, *args, **kwargs):
        if name == "distributed":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(ImportError, match=r"pip install 'corelib\[cluster\]'"):
        with sweeps._dask_backend("tcp://127.0.0.1:8786"):
            pass


def test_bootstrap_recovers_a_planted_power_law():
    rng = np.random.default_rng(1)
    omegas = np.array([0.3, 0.5, 1.0, 2.0, 3.0])
    rows = [
        {"weight_decay": w, "t_mem": 100, "t_gen": 100 + d, "delay": d}
        for w in omegas
        for d in 1000 / w * np.exp(0.1 * rng.standard_normal(6))
    ]
    rows.append({"weight_decay": 1.0, "t_mem": 100, "t_gen": None, "delay": None})  # never grokked: ignored
    table = pd.DataFrame(rows)
    fit = bootstrap_fit(table, "weight_decay", power_law_constants, n_boot=200)
    assert fit.loc["exponent", "estimate"] == pytest.approx(-1.0, abs=0.1)
    assert 0 < fit.loc["exponent", "sd"] < 0.1
    assert fit.loc["exponent", "ci_low"] < fit.loc["exponent", "estimate"] < fit.loc["exponent", "ci_high"]
    summary = summarise(table, "weight_decay")
    assert summary.loc[1.0, "n_seeds"] == 7 and summary.loc[1.0, "n_grokked"] == 6
    assert summary.loc[1.0, "n_missing"] == 1 and summary.loc[1.0, "n_nonpositive"] == 0
    with pytest.raises(ValueError, match=">= 2 values"):
        bootstrap_fit(table[table["weight_decay"] == 1.0], "weight_decay", power_law_constants)


def test_bootstrap_recovers_planted_grok_time_constants():
    rng = np.random.default_rng(2)
    primes = np.array([31, 43, 53, 61, 79, 89, 101])
    rows = [
        {"p": q, "delay": d} for q in primes for d in grok_time(q, 2770.0, 23.0) * np.exp(0.05 * rng.standard_normal(8))
    ]
    fit = bootstrap_fit(pd.DataFrame(rows), "p", grok_time_constants, n_boot=100)
    assert fit.loc["Omega", "estimate"] == pytest.approx(2770, rel=0.2)
    assert fit.loc["p_crit", "estimate"] == pytest.approx(23, rel=0.15)
    # the product is better determined than either constant (they are correlated)
    rel = fit["sd"] / fit["estimate"].abs()
    assert rel["Omega_p_crit"] < min(rel["Omega"], rel["p_crit"])


def test_bad_settings_are_refused_with_clear_errors():
    with pytest.raises(ValueError, match="modulus >= 2"):
        Condition(p=1, weight_decay=1.0)
    with pytest.raises(ValueError, match="batch_size"):
        Condition(p=11, weight_decay=1.0, batch_size=0)
    with pytest.raises(ValueError, match="weight_decay"):
        Condition(p=11, weight_decay=-1)
    with pytest.raises(ValueError, match="distinct"):
        train_condition(Condition(p=11, weight_decay=1.0), (1, 1), _cfg())
    with pytest.raises(ValueError, match="threshold"):
        SweepConfig(threshold=1.5)
    with pytest.raises(ValueError, match="divisible"):
        SweepConfig(d_model=10, n_heads=4)


def test_fits_use_condition_means_and_exclude_nonpositive_delays():
    """The estimate is the fit to the per-condition means (numpy's polyfit in log-log), as the paper's."""
    rng = np.random.default_rng(3)
    rows = [
        {"weight_decay": w, "t_mem": 100, "t_gen": 100 + d, "delay": d}
        for w in (0.5, 1.0, 2.0)
        for d in 1000 / w * np.exp(0.5 * rng.standard_normal(4))
    ]
    rows += [
        {"weight_decay": 2.0, "t_mem": 300, "t_gen": 300, "delay": 0},  # generalised with memorising
        {"weight_decay": 2.0, "t_mem": 300, "t_gen": 250, "delay": -50},
    ]  # before it: no delay either
    table = pd.DataFrame(rows)
    means = table[table["delay"] > 0].groupby("weight_decay")["delay"].mean()
    slope, _ = np.polyfit(np.log(means.index.to_numpy()), np.log(means.to_numpy()), 1)
    fit = bootstrap_fit(table, "weight_decay", power_law_constants, n_boot=50)
    assert fit.loc["exponent", "estimate"] == pytest.approx(slope, rel=1e-10)
    summary = summarise(table, "weight_decay")
    assert summary.loc[2.0, "n_grokked"] == 4 and summary.loc[2.0, "n_nonpositive"] == 2
    assert summary.loc[2.0, "delay_mean"] == pytest.approx(means[2.0])


@pytest.mark.slow
def test_batch_plan_and_a_kept_partial_batch():
    """The reference skips a permutation's partial batch; keep_partial_batch trains on it."""
    assert batch_plan(1404, 512) == {"batch": 512, "steps_per_permutation": 2, "skipped": 380, "steps_per_epoch": 3}
    assert batch_plan(1404, 512, True) == {"batch": 512, "steps_per_permutation": 3, "skipped": 0, "steps_per_epoch": 3}
    assert batch_plan(60, None) == {"batch": 60, "steps_per_permutation": 1, "skipped": 0, "steps_per_epoch": 1}
    with pytest.raises(ValueError, match="positive batch size"):
        batch_plan(60, 0)
    cond = Condition(p=11, weight_decay=1.0, batch_size=32)  # 60 training pairs: batches 32 (+ 28)
    rows = {}
    for keep in (False, True):
        stats = sweeps.SweepStats()
        cfg = SweepConfig(**TINY, max_epochs=5, dropout=0.0, keep_partial_batch=keep)
        train_condition(cond, (1,), cfg, device="cpu", progress=False, max_steps=4, stats=stats)
        rows[keep] = stats.train_rows
    assert rows == {False: 4 * 32, True: 2 * (32 + 28)}


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["after a checkpoint", "after a record"])
def test_an_interrupted_condition_resumes_from_its_checkpoint_to_the_same_records(tmp_path, monkeypatch, kill):
    # "after a record": the seed that just stopped is in the last checkpoint, so it is trained again.
    cfg = SweepConfig(**TINY, threshold=0.9, patience_epochs=1, max_epochs=300, dropout=0.1)
    cond, seeds = Condition(p=11, weight_decay=1.0, batch_size=None), (1, 2, 3)
    data = overlap_data(cond, cfg)
    reference = {r["seed"]: r for r in train_condition(cond, seeds, cfg, device="cpu", progress=False, data=data)}
    stops = sorted(r["stopped_at"] for r in reference.values())
    assert stops[0] < stops[-1]
    interrupt_at = (stops[0] + stops[-1]) // 2  # full batch: one step per epoch

    class Killed(Exception):
        pass

    real_save = condition_stacks._save_checkpoint
    stored: dict[int, dict] = {}

    def save_then_die(path, trainer, epoch, *args):
        real_save(path, trainer, epoch, *args)
        if epoch == interrupt_at:
            raise Killed

    def store_then_die(rec):
        stored[rec["seed"]] = rec
        raise Killed

    kwargs = dict(device="cpu", progress=False, data=data, checkpoint=tmp_path / "checkpoint", checkpoint_every=1)
    if kill == "after a checkpoint":
        monkeypatch.setattr(condition_stacks, "_save_checkpoint", save_then_die)
        first = lambda r: stored.update({r["seed"]: r})  # noqa: E731
    else:
        first = store_then_die
    with pytest.raises(Killed):
        train_condition(cond, seeds, cfg, on_record=first, **kwargs)
    monkeypatch.setattr(condition_stacks, "_save_checkpoint", real_save)
    assert 0 < len(stored) < len(seeds)  # killed with some seeds done and some running
    missing = [s for s in seeds if s not in stored]
    stats = SweepStats()
    resumed = train_condition(
        cond, missing, cfg, on_record=lambda r: stored.update({r["seed"]: r}), stats=stats, **kwargs
    )
    started = interrupt_at if kill == "after a checkpoint" else stops[0] - 1
    assert stats.steps == max(reference[s]["stopped_at"] for s in missing) - started  # resumed, not redone
    assert {r["seed"]: r for r in resumed} == {s: reference[s] for s in missing}
    assert stored == reference
    assert not list(tmp_path.glob("checkpoint*"))  # removed once the condition is done


def test_condition_path_names_the_folder_without_creating_it(tmp_path):
    cfg, cond = SweepConfig(**TINY), Condition(p=11, weight_decay=1.0, batch_size=None)
    path = sweeps.condition_path(cond, cfg, tmp_path)
    assert not path.exists()
    assert sweeps.condition_dir(cond, cfg, tmp_path) == path and (path / "params.json").exists()


def test_a_new_stopping_rule_keys_its_records_anew_and_the_first_keeps_todays_keys(monkeypatch):
    """The store keys a record by what decides it, the stopping rule's version included: a new
    rule is not answered with the old rule's records, and the recorded sweep (stored before the
    version existed) is still read under today's rule."""
    from corelib.experiments import paper_scale

    cond, cfg = Condition(p=11, weight_decay=1.0), _cfg()
    today = sweeps.condition_key(cond, cfg)
    assert sweeps.STOPPING_RULE_VERSION == 1 and "stopping_rule" not in sweeps._condition_params(cond, cfg)
    if paper_scale.recorded_sweeps(n_boot=2) is None:
        pytest.skip("no recorded sweep in this checkout")
    monkeypatch.setattr(sweeps, "STOPPING_RULE_VERSION", 2)
    assert sweeps.condition_key(cond, cfg) != today
    assert sweeps._condition_params(cond, cfg)["stopping_rule"] == 2
    with pytest.raises(StoreError, match="made by another version of corelib"):
        paper_scale.recorded_sweeps(n_boot=2)


def test_the_recorded_sweeps_glue_numbers_not_sentences():
    """The chapter's values of the recorded paper-scale sweep: the fitted constants as numbers, what
    the run was (seeds, conditions, cap, hours), and "n/a" for every name when none is recorded."""
    from corelib.experiments import grokking_sweeps, paper_scale

    recorded = paper_scale.recorded_sweeps(n_boot=20)
    values = grokking_sweeps.recorded_glue_values(recorded)
    assert set(values) == set(grokking_sweeps.recorded_glue_values(None))
    assert set(grokking_sweeps.recorded_glue_values(None).values()) == {"n/a"}
    assert (values["rec_n_seeds"], values["rec_n_omegas"], values["rec_n_moduli"]) == (12, 6, 7)
    assert values["rec_deviations"] == "none" and values["rec_precision"] == "fp32"
    assert float(values["rec_beta"]) == pytest.approx(recorded.fit_omega.loc["exponent", "estimate"], abs=0.005)
    assert float(values["rec_product_at_1"]) == pytest.approx(recorded.fit_p.loc["Omega_p_crit", "estimate"], abs=1)
    # How far Omega (at weight decay 1) lies from the paper's, in %; the relative bootstrap sds, in %.
    omega = recorded.fit_p.loc["Omega", "estimate"] * recorded.params.p_weight_decay
    assert float(values["rec_Omega_vs_paper_pct"]) == pytest.approx(100 * (omega / 2770 - 1), abs=0.5)
    for name, row in (("rec_rel_Omega", "Omega"), ("rec_rel_product", "Omega_p_crit")):
        fit = recorded.fit_p.loc[row]
        assert float(values[name]) == pytest.approx(100 * fit["sd"] / fit["estimate"], rel=0.05)
    prose = [k for k, v in values.items() if isinstance(v, str) and ". " in v and k != "rec_rederive"]
    assert not prose, f"sentences glued: {prose}"


def test_both_first_chunks_come_from_one_pass_with_the_logits_of_separate_passes():
    cfg = SweepConfig(**TINY, threshold=0.9)
    cond = Condition(p=11, weight_decay=1.0, batch_size=32)
    train, test = overlap_data(cond, cfg)
    stack = SeedStack.initialise(cfg.model_config(cond.p), [1, 2, 3], "cpu")
    calls = []
    fn = stopping_rules.stacked_last_logits(cfg.model_config(cond.p), shared_rows=True)

    def counted(*args):
        calls.append(args[1].shape[0])
        return fn(*args)

    tests = [stopping_rules._ThresholdTest(d, cfg.threshold, counted) for d in (train, test)]
    which = torch.tensor([0, 2])
    params = {k: v.detach() for k, v in stack.params.items()}
    joint = stopping_rules._first_chunks_together(tests, params, which)
    assert calls == [sum(len(t.first_rows()[0]) for t in tests)]
    for t, logits in zip(tests, joint):
        alone = fn({k: v[which] for k, v in params.items()}, *t.first_rows(), t.prefixes)
        assert torch.equal(logits, alone)
        assert torch.equal(t.passes(params, which, logits), t.passes(params, which))


def test_the_sweeps_plans_pair_each_condition_with_its_sweeps_cap():
    from corelib.experiments.grokking_sweeps import SweepsParams

    params = SweepsParams(omegas=[1.0, 3.0], moduli=[31, 53], omega_max_epochs=700, p_max_epochs=900)
    plans = params.plans()
    assert [(c.label(), cfg.max_epochs) for c, cfg in plans] == [
        ("p=53 wd=1 B=512", 700),
        ("p=53 wd=3 B=512", 700),
        ("p=31 wd=1 B=full", 900),
        ("p=53 wd=1 B=full", 900),
    ]
    cond, cfg = params.plan("p=31 wd=1 B=full")
    assert (cond.p, cond.batch_size, cfg.max_epochs) == (31, None, 900)
    with pytest.raises(ValueError, match=r"no condition 'p=31 wd=3 B=full' in these sweeps; choose one of \["):
        params.plan("p=31 wd=3 B=full")
