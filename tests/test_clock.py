"""The clock of core inflation and the interpretability window: schedules, the collapse measure, the arms."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from corelib import claims
from corelib.experiments import (
    inflation_clock,
    inflation_clock_pairs,
    inflation_clock_window,
    modular_runs,
    paper_scale,
)
from corelib.recorded import RECORDED_DIR
from corelib.results import load_json


def _smoke() -> inflation_clock.ClockParams:
    """The chapter's smoke settings: a tiny model on two fast clocks."""
    from acebook.runner import chapter_parameters

    return inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "smoke"))


def test_the_papers_pair_is_the_papers_run_on_its_schedule():
    params = inflation_clock.ClockParams()
    assert inflation_clock.steps_per_epoch(params) == 3  # 1404 training pairs in batches of 512
    paper = inflation_clock.pair_params(params, 1e-3, 1.0)
    assert (paper.long_epochs, paper.snapshot_every, paper.late_after, paper.snapshot_every_late) == (
        20000,
        100,
        2000,
        500,
    )
    # The same folder as the core-inflation chapter's run: nothing trained twice.
    assert paper.training_identity() == modular_runs.ModularParams().training_identity()
    assert inflation_clock_pairs.tau_of(params, 1e-3, 1.0, 20000) == pytest.approx(60.0)


def test_a_faster_clock_reaches_the_same_tau_in_proportionally_fewer_epochs():
    params = inflation_clock.ClockParams()
    fast = inflation_clock.pair_params(params, 3e-3, 2.0)  # six times the paper's lr * wd
    assert fast.snapshot_every == 17 and fast.late_after == 340 and fast.snapshot_every_late == 85
    assert fast.long_epochs >= 20000 / 6 and fast.long_epochs - 20000 / 6 < 85  # rounded up to a snapshot
    assert fast.stack_config("wd", fast.long_epochs).is_snapshot(fast.long_epochs)
    assert (fast.lr, fast.weight_decay) == (3e-3, 2.0)
    assert inflation_clock_pairs.tau_of(params, 3e-3, 2.0, fast.long_epochs) == pytest.approx(60.0, rel=0.03)


def test_spread_has_known_answers():
    x = np.linspace(0, 1, 11)
    assert inflation_clock.spread([x, x], [x, x]) == 0.0
    assert inflation_clock.spread([x, x], [0 * x, 0 * x + 2]) == pytest.approx(np.sqrt(2.0))  # sd of (0, 2)
    # Only the overlap of the x ranges counts: y = x on [0, 1] and on [0, 2] agree there.
    assert inflation_clock.spread([x, 2 * x], [x, 2 * x]) == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(inflation_clock.spread([x], [x])) and np.isnan(inflation_clock.spread([x, x + 5], [x, x]))


def _fake_run(lr: float, wd: float, epochs: np.ndarray, f, seeds: int = 3, noise: float = 0.0, seed: int = 0):
    """Records whose core dimension is f(tau) per model (plus noise), on the paper's 3 steps per epoch."""
    rng = np.random.default_rng(seed)
    records = []
    for e in epochs:
        models = []
        for _ in range(seeds):
            d = f(lr * wd * 3 * e) + noise * rng.standard_normal()
            models.append(
                {
                    "core_dim": d,
                    "necessary_rank": d,
                    "sufficient_rank": d / 2,
                    "modes": [1] * int(d // 4),
                    "test_acc": 1.0,
                }
            )
        records.append({"epoch": int(e), "models": models})
    return {"lr": lr, "wd": wd, "steps": 3, "records": records}


def _grow(tau):
    """A core that grows from 15 toward 60 on the decay's clock."""
    return 15 + 45 * (1 - np.exp(-tau / 20))


def _on_one_clock() -> dict:
    """The paper's run and one at six times its lr x wd, both following _grow of tau."""
    return {
        "slow": _fake_run(1e-3, 1.0, np.arange(0, 20001, 500), _grow),
        "fast": _fake_run(3e-3, 2.0, np.arange(0, 3401, 85), _grow),
    }


def test_curves_on_one_clock_collapse_and_curves_on_another_do_not():
    params = inflation_clock.ClockParams()
    grow = _grow
    on_clock = _on_one_clock()
    c = inflation_clock.collapse(params, on_clock)["core_dim"]
    assert c.spread_tau < 0.05 * c.spread_epochs and c.ratio < 0.05
    # The same growth per epoch, whatever lr * wd: rescaling pulls the curves apart.
    per_epoch = lambda tau, rate: grow(tau / rate * 1e-3)  # noqa: E731
    off_clock = {
        "slow": _fake_run(1e-3, 1.0, np.arange(0, 3401, 85), lambda t: per_epoch(t, 1e-3)),
        "fast": _fake_run(3e-3, 2.0, np.arange(0, 3401, 85), lambda t: per_epoch(t, 6e-3)),
    }
    c = inflation_clock.collapse(params, off_clock)["core_dim"]
    assert c.spread_epochs == pytest.approx(0.0, abs=1e-9) and c.spread_tau > 1.0
    noisy = {
        k: _fake_run(v["lr"], v["wd"], np.arange(0, 3401, 85), grow, noise=2.0, seed=i)
        for i, (k, v) in enumerate(on_clock.items())
    }
    c = inflation_clock.collapse(params, noisy)["core_dim"]
    assert 0.5 < c.noise < 2.0  # the standard error of a 3-seed mean of sd 2 is 1.15


def test_window_arms_branch_where_asked_and_ramp_on_the_windows_clock():
    params = inflation_clock.ClockParams(window_pair=(3e-3, 2.0), window_horizon=30.0)
    arms = inflation_clock.window_arms(params, grok_epoch=153)
    assert set(arms) == set(inflation_clock.WINDOW_ARMS)
    assert arms["kept"][1] == "wd" and all(arm == "no_wd" for _, arm in list(arms.values())[1:])
    removed, _ = arms["removed"]
    assert (removed.branch_epoch, removed.branch_weight_decay, removed.branch_anneal_epochs) == (153, 0.0, 0)
    restarted, _ = arms["restarted"]  # the control: same branch and fresh optimizer, decay kept
    assert (restarted.branch_epoch, restarted.branch_weight_decay, restarted.branch_anneal_epochs) == (153, 2.0, 0)
    # tau 1.5 and 6 are 500 and 2000 epochs on the paper's clock, a sixth of that here
    assert arms["anneal_short"][0].branch_anneal_epochs == 83 and arms["anneal_long"][0].branch_anneal_epochs == 333
    late = arms["removed_late"][0].branch_epoch
    # tau 18 is epoch 1000 here; the snapshots there are 935 and 1020 (every 85 after 340)
    assert late == 1020 and removed.stack_config("wd", removed.long_epochs).is_snapshot(late)
    assert len({modular_runs.arm_dir(mp, arm) for mp, arm in arms.values()}) == len(arms)  # a folder each


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="late_removal .* must come before window_horizon"):
        inflation_clock.ClockParams(late_removal=70.0)
    with pytest.raises(ValueError, match=r"pairs\[1\] must be a finite positive number"):
        inflation_clock.ClockParams(pairs=((1e-3, 1.0), (1e-3, 0.0)))
    with pytest.raises(ValueError, match="distinct"):
        inflation_clock.ClockParams(pairs=((1e-3, 1.0), (1e-3, 1.0)))


@pytest.mark.slow
def test_the_smoke_settings_run_end_to_end_and_resume_to_the_same_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    params = _smoke()
    runs = inflation_clock.run_clock(params, progress=False)
    window = inflation_clock.window_summary(params, inflation_clock.run_window(params, progress=False))
    summary = inflation_clock.clock_summary(params, runs)
    values = inflation_clock.glue_values(params, summary, window)
    assert values["n_pairs"] == 2 and values["window_grok"] == window.grok_epoch
    found = inflation_clock.finding_values(summary, window)
    assert set(found) == {
        "window.restart_grows",
        "clock.tau_separates",
        "window.anneal_smaller",
        "window.anneal_larger",
        "window.removed_smaller",
        "window.late_removal_deflates",
        "clock.tau_collapse",
    }
    # every value is one a finding accepts, each recorded by the chapter that shows it
    claims.record("inflation_clock", inflation_clock.clock_finding_values(summary), settings={})
    claims.record("interpretability_window", inflation_clock.window_finding_values(window), settings={})
    assert found == {**inflation_clock.window_finding_values(window), **inflation_clock.clock_finding_values(summary)}
    assert list(inflation_clock.window_table(window).index) == list(inflation_clock.WINDOW_ARMS)
    # A second run reads everything back: the same numbers.
    again = inflation_clock.clock_summary(params, inflation_clock.run_clock(params, progress=False))
    assert again.pairs == summary.pairs


@pytest.mark.slow
def test_every_glued_name_of_the_chapter_is_glued(tmp_path, monkeypatch):
    import re
    from pathlib import Path

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    notebooks = Path(__file__).resolve().parent.parent / "notebooks"

    def used(text):
        glued = set(re.findall(r"\{glue:text\}`([A-Za-z_0-9]+)", text))
        return glued | set(re.findall(r"```\{glue:figure\} (\w+)", text))

    params = _smoke()
    summary = inflation_clock.run(params, progress=False)
    inflation_clock.save_window(params, summary)
    fast = inflation_clock.load_window()  # what the window chapter reads back
    paper = inflation_clock_window.show(paper_scale.recorded_window(), sample_epochs=0)
    clock = {
        **inflation_clock.clock_glue_values(params, summary.clock),
        **inflation_clock.record_numbers(summary.record),
    }
    window = {
        **inflation_clock.window_glue_values(fast.params, fast.window),
        **inflation_clock_window.glue_values(paper),
        **paper_scale.seed_cost_values(paper_scale.recorded_window(), paper_scale.recorded_gpu_times(), 24),
    }
    for chapter, values, figures in (
        ("inflation_clock", clock, {"fig_clock"}),
        ("interpretability_window", window, {"fig_window", "fig_paper_window"}),
    ):
        text = (notebooks / f"{chapter}.py").read_text()
        figures |= {"cost_machine", "cost_book", "cost_paper", "time_read", "time_total"}  # the header's
        assert used(text) - figures <= set(values), (chapter, sorted(used(text) - set(values)))
        assert figures <= set(re.findall(r'glue\("(\w+)"', text))
        assert all(isinstance(v, (int, float)) or len(str(v).split()) <= 4 for v in values.values())  # no sentences
    assert fast.window == summary.window  # the window chapter shows the clock chapter's arms


def test_spreads_within_the_seed_noise_are_called_indistinguishable():
    params = inflation_clock.ClockParams()
    flat = {
        "a": _fake_run(1e-3, 1.0, np.arange(0, 3401, 85), lambda t: 20.0 + 0 * t, noise=2.0, seed=1),
        "b": _fake_run(3e-3, 2.0, np.arange(0, 3401, 85), lambda t: 20.0 + 0 * t, noise=2.0, seed=2),
    }
    c = inflation_clock.collapse(params, flat)["core_dim"]
    assert max(c.spread_tau, c.spread_epochs) <= 2 * c.noise


def test_the_collapse_starts_at_each_runs_grokking():
    params = inflation_clock.ClockParams()
    runs = _on_one_clock()
    for r in runs.values():  # memorising: far from the curve, and below the accuracy threshold
        for m in r["records"][0]["models"]:
            m.update(core_dim=128.0, test_acc=0.1)
    c = inflation_clock.collapse(params, runs)["core_dim"]
    assert c.n_runs == 2 and c.ratio < 0.05


def test_the_recorded_run_is_compared_at_the_same_tau_on_its_own_clock(recwarn):
    params = inflation_clock.ClockParams(pairs=((3e-3, 2.0),))
    fast = _fake_run(3e-3, 2.0, np.arange(0, 1021, 85), _grow)
    paper = _fake_run(1e-3, 1.0, np.arange(0, 20001, 500), _grow)
    paper["records"][3]["models"][0]["necessary_rank"] = np.nan  # a seed without a rank: no warning
    recorded = paper_scale.RecordedInflation(
        params=modular_runs.ModularParams(),
        arms={"wd": paper["records"]},
        histories={},
        summary=None,
        provenance={},
        source="recorded run",
    )
    runs = {
        "lr 0.003, wd 2": fast,
        inflation_clock.RECORDED_LABEL: inflation_clock_pairs.recorded_run(params, recorded),
    }
    summary = inflation_clock.clock_summary(params, runs, recorded)
    at = summary.recorded.at_pair_ends
    assert list(at) == ["lr 0.003, wd 2"] and at["lr 0.003, wd 2"].epoch == 6000  # tau 18.4 ~ epoch 6000
    assert summary.recorded.at_pair_epochs["lr 0.003, wd 2"].epoch == 1000  # nearest to its epoch 1020
    # on one clock: far larger than the paper run at equal epochs, the same at equal tau
    table = inflation_clock.recorded_table(summary)
    assert table.loc["lr 0.003, wd 2", "paper run, same τ: epoch"] == 6000
    assert table.loc["lr 0.003, wd 2", "vs same epoch"] == "larger"
    found = inflation_clock.finding_values(summary, _fake_window())
    assert found["clock.smaller_at_equal_epochs"] < 0
    held = {**runs, "lr 0.003, wd 2": _fake_run(3e-3, 2.0, np.arange(0, 1021, 85), lambda tau: 15 + 0 * tau)}
    held_summary = inflation_clock.clock_summary(params, held, recorded)
    table = inflation_clock.recorded_table(held_summary)
    assert table.loc["lr 0.003, wd 2", "vs same epoch"] == table.loc["lr 0.003, wd 2", "vs same τ"] == "smaller"
    found = inflation_clock.finding_values(held_summary, _fake_window())
    assert found["clock.smaller_at_equal_tau"] > 0 and found["clock.smaller_at_equal_epochs"] > 0
    assert summary.collapse["core_dim"].ratio < 0.05
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    # A record of another model does not join
    other = dataclasses.replace(recorded, params=modular_runs.ModularParams(d_model=64))
    assert inflation_clock_pairs.recorded_run(params, other) is None


def _fake_window() -> SimpleNamespace:
    """A window summary with every arm alike (the parts the clock's glue values read)."""
    row = {**_arm(13, 15), "modes": 5.0, "test_acc": 1.0, "spikes_per_1000": 0.0, "end": 680, "branch": 204}
    arms = {name: SimpleNamespace(**row, at_branch=None) for name in inflation_clock.WINDOW_ARMS}
    arms["removed_late"].at_branch = SimpleNamespace(**row)
    return SimpleNamespace(arms=arms, grok_epoch=204, tau_grok=3.67)


def _window_of(arms: dict[str, dict]) -> SimpleNamespace:
    """The parts of a window summary the findings read, from plain rows (``at_branch``: a row too)."""
    return SimpleNamespace(
        arms={
            name: SimpleNamespace(
                **{**row, "at_branch": SimpleNamespace(**row["at_branch"]) if "at_branch" in row else None}
            )
            for name, row in arms.items()
        }
    )


def _arm(lo: float, hi: float) -> dict:
    return {"core_dim": (lo + hi) / 2, "core_dim_min": lo, "core_dim_max": hi}


def test_the_window_findings_tell_arms_apart_only_when_their_seed_ranges_do_not_overlap():
    arms = {
        "kept": _arm(13, 15),
        "restarted": _arm(16, 20),  # above the kept run: the restart alone grows the core
        "removed": _arm(19, 70),  # overlaps the control
        "anneal_short": _arm(21, 40),  # above the control
        "anneal_long": _arm(22, 24),  # above it too
        "removed_late": {**_arm(36, 52), "at_branch": _arm(9, 16)},
    }
    window = _window_of(arms)
    clock_part = SimpleNamespace(collapse={"core_dim": SimpleNamespace(ratio=0.8)}, recorded=None)

    def status(found):
        return {k: claims.status(claims.claim(k), {"values": found, "settings": {}})[0] for k in found}

    got = status(inflation_clock.finding_values(clock_part, window))
    assert got["window.restart_grows"] == got["window.anneal_larger"] == "holds"
    assert got["window.anneal_smaller"] == got["window.removed_smaller"] == "does not hold"
    assert got["window.late_removal_deflates"] == "does not hold"  # 12.5 -> 44
    assert got["clock.tau_collapse"] == got["clock.tau_separates"] == "does not hold"  # ratio 0.8
    arms["anneal_short"] = _arm(20, 40)  # touches the control's 20: no longer told apart
    assert (
        status(inflation_clock.finding_values(clock_part, _window_of(arms)))["window.anneal_larger"] == "does not hold"
    )


def test_runs_with_the_same_product_are_paired_and_told_apart_only_without_overlap():
    def row(lr, wd, lo, hi, epochs=3400):
        return SimpleNamespace(
            rate_ratio=inflation_clock_pairs.rate_ratio(lr, wd), epochs=epochs, core_dim_min=lo, core_dim_max=hi
        )

    pairs = {"a": row(2e-3, 3.0, 15, 18), "b": row(3e-3, 2.0, 20, 25), "c": row(1e-3, 3.0, 15, 18)}
    assert inflation_clock.same_product(pairs) == [
        inflation_clock_pairs.SameProduct(runs=("a", "b"), epochs=3400, apart=-1)
    ]
    pairs["b"] = row(3e-3, 2.0, 18, 25)  # ranges touch: not told apart
    assert inflation_clock.same_product(pairs)[0].apart == 0
    pairs["b"] = row(3e-3, 2.0, 20, 25, epochs=1700)  # another horizon: not compared
    assert inflation_clock.same_product(pairs) == []


def test_the_recorded_book_run_glues_the_numbers_its_prose_was_written_for():
    """The chapter's glue values on the recorded book-profile run (nothing trained): the settings it
    quotes (snapshot interval, anneal spans on the paper's clock, the window's learning rate against
    the paper's) and the results it cites, as numbers, never sentences."""
    from acebook.runner import chapter_parameters
    from corelib.experiments import paper_scale

    params = inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "book"))
    record = paper_scale.recorded_clock(params)
    if record is None:
        pytest.skip("no recorded book-profile clock run in this checkout")
    summary = inflation_clock.run(params, paper_scale.recorded_inflation(), record=record, progress=False)
    values = inflation_clock.glue_values(params, summary.clock, summary.window)
    assert (values["snapshot_unit"], values["n_seeds"], values["window_lr_ratio"]) == (100, 3, 3.0)
    assert (values["anneal_short"], values["anneal_long"]) == (1.5, 6.0)
    assert (values["anneal_short_paper_epochs"], values["anneal_long_paper_epochs"]) == (500, 2000)
    assert (values["recorded_epochs"], values["recorded_tau_end"]) == (20000, 60.0)
    removed = summary.window.arms["removed"]
    assert (values["removed_min"], values["removed_max"]) == (removed.core_dim_min, removed.core_dim_max)
    control = summary.window.arms["restarted"].core_dim
    assert values["removed_max_over_control"] == pytest.approx(removed.core_dim_max / control, abs=0.005)
    assert all(isinstance(v, (int, float)) or len(str(v).split()) <= 4 for v in values.values())


def _record(epoch: int, dims: list[int]) -> dict:
    models = [
        {"core_dim": d, "necessary_rank": d, "sufficient_rank": d - 1, "modes": [1] * (d // 10), "test_acc": 1.0}
        for d in dims
    ]
    return {"epoch": epoch, "models": models}


def _history(epochs: range, spikes: dict[int, list[int]]) -> dict:
    """Two seeds fitted from the first epoch; ``spikes``: per seed, the epochs it drops below 0.9."""
    acc = [[0.5 if e in spikes.get(s, []) else 1.0 for s in range(2)] for e in epochs]
    return {"epoch": list(epochs), "train_acc": acc}


def test_the_window_as_its_arms_stood_at_an_earlier_epoch_has_known_answers():
    window = {
        "grok_epoch": 100,
        "lr": 0.02,
        "wd": 1.0,
        "arms": {
            "kept": {
                "branch": None,
                "records": [_record(e, [10 + e // 100, 12 + e // 100]) for e in (0, 100, 200, 300, 400)],
                "history": _history(range(1, 401), {0: [150, 350]}),
            },
            "removed": {
                "branch": 100,
                "records": [_record(e, [10, 30]) for e in (100, 200, 300, 400)],
                "history": _history(range(101, 401), {1: [250, 251, 380]}),
            },
            "removed_late": {
                "branch": 300,
                "records": [_record(300, [13, 16]), _record(400, [40, 40])],
                "history": _history(range(301, 401), {}),
            },
        },
    }
    params = _smoke()
    whole = inflation_clock.window_summary(params, window)
    at = inflation_clock.window_summary(params, window, until=250)
    assert set(whole.arms) == {"kept", "removed", "removed_late"} and set(at.arms) == {"kept", "removed"}
    assert (at.arms["kept"].end, at.arms["kept"].core_dim_min, at.arms["kept"].core_dim_max) == (200, 12, 14)
    assert at.arms["kept"].spikes_per_model == 0.5  # seed 0's spike at 150; the one at 350 is later
    assert whole.arms["kept"].spikes_per_model == 1.0 and whole.arms["kept"].spikes_per_1000 == 1000 * 1.0 / 300
    assert at.arms["removed"].spikes_per_model == 0.0  # its spike at 250 comes after its snapshot at 200
    at_300 = inflation_clock.window_summary(params, window, until=300).arms["removed"]
    assert (at_300.spikes_per_model, at_300.spikes_per_1000) == (0.5, 1000 * 0.5 / 200)  # per epoch since the branch
    assert whole.arms["removed"].spikes_per_model == 1.0
    assert whole.arms["removed_late"].at_branch.core_dim == 14.5  # its own start, not the kept run's 13 and 15
    started_unseen = {**window, "arms": {**window["arms"]}}
    started_unseen["arms"]["removed_late"] = {**window["arms"]["removed_late"]}
    started_unseen["arms"]["removed_late"]["records"] = [_record(400, [40, 40])]
    unseen = inflation_clock.window_summary(params, started_unseen).arms["removed_late"]
    assert unseen.at_branch.core_dim == 14.0  # without its own snapshot there: the kept run's at 300
    assert list(inflation_clock.window_table(at).index) == ["kept", "removed"]
    # At a tau: the summary up to the epoch where the window's clock reaches it.
    tau = float(inflation_clock_pairs.tau_of(params, 0.02, 1.0, 250))
    by_tau = inflation_clock.window_at_tau(params, window, [tau])
    assert by_tau[tau] == at
    table = inflation_clock.window_tau_table(by_tau)
    assert table.index.names == ["tau", "arm"] and list(table.loc[tau].index) == ["kept", "removed"]
    for bad in (-1.0, float("nan"), float("inf"), "12"[:0]):
        with pytest.raises(ValueError, match="taus must be finite numbers >= 0"):
            inflation_clock.window_at_tau(params, window, [bad])
    # Unless asked for an earlier epoch, an arm not trained past its branch is refused, not left out.
    window["arms"]["removed_late"]["records"] = [_record(300, [13, 16])]
    with pytest.raises(ValueError, match="arm 'removed_late' has no snapshot after its branch at epoch 300"):
        inflation_clock.window_summary(params, window)


def test_the_window_is_kept_for_its_chapter_and_written_again_only_when_it_changes(tmp_path, monkeypatch):
    from acebook.runner import chapter_parameters

    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("ACE_PROFILE", "book")
    with pytest.raises(ValueError, match="the chapter inflation_clock trains .* run it first"):
        inflation_clock.load_window()
    # the recorded book-profile window, as the clock chapter keeps it (its JSON form)
    params = inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "book"))
    window = load_json(RECORDED_DIR / "inflation_clock_book" / "window.json")
    inflation_clock.save_window(params, SimpleNamespace(window_data=window, record=None))
    path = tmp_path / inflation_clock.WINDOW_FOLDER / "window.json"
    written = path.stat().st_mtime_ns
    inflation_clock.save_window(params, SimpleNamespace(window_data=window, record=None))
    assert path.stat().st_mtime_ns == written  # unchanged: not written again, so nothing counts as computed
    fast = inflation_clock.load_window()
    assert fast.params == params and (fast.profile, fast.source) == ("book", None)
    assert fast.window == inflation_clock.window_summary(params, window)
    assert set(fast.curves) == set(window["arms"])
    monkeypatch.setenv("ACE_PROFILE", "smoke")  # a window of another profile is shown with a warning
    with pytest.warns(UserWarning, match="with the book profile, not smoke"):
        inflation_clock.load_window()
    recorded = SimpleNamespace(window_data=window, record={"source": "recorded book-profile run"})
    inflation_clock.save_window(params, recorded)
    assert inflation_clock.load_window().source == "recorded book-profile run"
    with pytest.raises(ValueError, match="keeps no window_data"):
        inflation_clock.save_window(params, SimpleNamespace(window_data=None, record=None))
