"""The window on the paper's clock, read from its record: known answers on a made-up record."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from acebook.runner import chapter_parameters
from corelib import claims
from corelib.experiments import inflation_clock, inflation_clock_window, paper_scale


def _params() -> inflation_clock.ClockParams:
    return inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "paper"))


def _snapshot(epoch: int, dims: list[int], acc: float = 1.0) -> dict:
    models = [
        {"core_dim": d, "necessary_rank": d, "sufficient_rank": d - 1, "modes": [1] * (d // 10), "test_acc": acc}
        for d in dims
    ]
    return {"epoch": epoch, "models": models}


def _quiet(first: int, last: int) -> dict:
    """A training history of three seeds without a loss spike."""
    epochs = list(range(first, last + 1))
    return {"epoch": epochs, "train_acc": [[1.0, 1.0, 1.0] for _ in epochs]}


def _arm(branch: int | None, snapshots: dict[int, list[int]], acc: float = 1.0) -> dict:
    start = branch or 0
    return {
        "branch": branch,
        "records": [_snapshot(e, d, acc) for e, d in sorted(snapshots.items())],
        "history": _quiet(start + 1, max(snapshots)),
    }


_BRANCH = [12, 16, 18]  # the weights the arms branch from, at grokking (epoch 800)


def _after(mid: list[int], end: list[int]) -> dict[int, list[int]]:
    return {800: _BRANCH, 4000: mid, 10000: mid, 20000: end}


def _recorded(**arms: dict) -> paper_scale.RecordedWindow:
    window = {
        "grok_epoch": 800,
        "lr": 1e-3,
        "wd": 1.0,
        "arms": {
            "kept": _arm(None, {0: [0, 0, 0], 800: [12, 15, 17], 4000: [24, 30, 34], 20000: [42, 50, 63]}),
            "restarted": _arm(800, _after([31, 40, 56], [36, 38, 42])),
            "removed": _arm(800, _after([12, 12, 46], [10, 12, 47])),
            "anneal_short": _arm(800, _after([12, 30, 44], [20, 25, 30])),
            "anneal_long": _arm(800, _after([14, 30, 40], [25, 30, 35]), acc=0.98),
            "removed_late": _arm(6000, {6000: [40, 45, 50], 10000: [35, 40, 44], 20000: [30, 35, 41]}),
            **arms,
        },
    }
    return paper_scale.RecordedWindow(
        params=_params(),
        window=window,  # in its JSON form, as inflation_clock_records.as_window reads it
        branch_run={},
        branch_weights={},
        provenance={
            "training_seconds": {"window removed": 3600.0, "window anneal_long": 5400.0},
            "core_dims_at_branch": {"kept run": [12, 15, 17], "branch weights": _BRANCH},
        },
        source="recorded paper-profile run (commit abc1234, exported 2026-11-30)",
    )


def test_the_findings_have_known_answers_on_a_made_up_record():
    pw = inflation_clock_window.show(_recorded(), sample_epochs=0)
    values = inflation_clock_window.finding_values(pw)
    kept_growths = np.array([42, 50, 63]) - np.array([12, 15, 17])
    assert values == pytest.approx(
        {
            "window_paper.kept_inflates": 42 - 17,
            "window_paper.anneal_smaller": 42 - 35,
            "window_paper.anneal_near_grokking": (35 - 18) / kept_growths.min(),  # per seed: the longer ramp's third
            "window_paper.removed_smaller": 42 - 47,
            "window_paper.restart_smaller": 42 - 42,
            "window_paper.late_removal_deflates": 40 - 41,  # its own snapshot at the branch, not the kept run's
            "window_paper.anneal_below_restart": 36 - 35,
            "window_paper.removed_below_restart": 36 - 47,
            "window_paper.all_generalise": 0.98,
        }
    )
    judged = {c.id: c.holds(values[c.id]) for c in claims.FINDINGS if c.id in values}
    assert judged == {
        "window_paper.kept_inflates": True,
        "window_paper.anneal_smaller": True,
        "window_paper.anneal_near_grokking": False,  # one annealed seed grew 17, over half the kept seeds' least, 30
        "window_paper.removed_smaller": False,
        "window_paper.restart_smaller": False,  # touching ranges are not told apart
        "window_paper.late_removal_deflates": False,
        "window_paper.anneal_below_restart": True,
        "window_paper.removed_below_restart": False,
        "window_paper.all_generalise": False,
    }


def test_the_arms_are_read_at_each_tau_on_the_papers_clock():
    pw = inflation_clock_window.show(_recorded(), sample_epochs=0)
    assert (pw.end.grok_epoch, round(pw.end.tau_grok, 2)) == (800, 2.4)
    assert {tau: s.arms["kept"].end for tau, s in pw.at_tau.items()} == {12.0: 4000, 30.0: 4000, 60.0: 20000}
    assert "removed_late" not in pw.at_tau[12.0].arms  # it branches at tau 18
    assert pw.at_tau[30.0].arms["removed_late"].end == 10000
    assert pw.at_tau[60.0] == pw.end
    assert pw.at_branch["kept"].core_dim_max == 17 and pw.at_branch["removed"].core_dim_max == 18
    table = inflation_clock_window.tau_table(pw)
    assert table.loc[(60.0, "anneal_long"), "seeds"] == "25–35"
    assert list(table.loc[12.0].index) == ["kept", "restarted", "removed", "anneal_short", "anneal_long"]


def _t_power(a: np.ndarray, b: np.ndarray, n: int) -> float:
    """The power of a two-sided two-sample t-test at the 5 % level with n seeds per arm, for the
    difference and pooled spread of a and b: P(|Z + delta| > c * sqrt(V / df)) with V ~ chi2(df),
    integrated numerically (independent of the noncentral t distribution)."""
    df = 2 * n - 2
    s = math.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))
    delta = abs(a.mean() - b.mean()) / (s * math.sqrt(2 / n))
    c = stats.t.ppf(0.975, df)

    def rejects(v: float) -> float:
        edge = c * math.sqrt(v / df)
        return (stats.norm.sf(edge - delta) + stats.norm.cdf(-edge - delta)) * stats.chi2.pdf(v, df)

    return integrate.quad(rejects, 0, np.inf)[0]


def test_the_seeds_needed_reach_80_percent_power_and_one_fewer_does_not():
    pw = inflation_clock_window.show(_recorded(), sample_epochs=0)
    kept, other = np.array([42.0, 50.0, 63.0]), np.array([25.0, 30.0, 35.0])
    n = inflation_clock_window.seeds_needed(pw, "anneal_long")
    assert _t_power(kept, other, n) >= 0.8 > _t_power(kept, other, n - 1)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    pooled = (kept.var(ddof=1) + other.var(ddof=1)) / 2
    assert n > math.ceil(2 * z**2 * pooled / (kept.mean() - other.mean()) ** 2)  # the t-test asks for more
    close = _recorded(restarted=_arm(800, _after([1, 2, 3], [44, 50, 60])))  # a difference of 0.33
    many = inflation_clock_window.seeds_needed(inflation_clock_window.show(close, sample_epochs=0), "restarted")
    assert many > 1000
    same = _recorded(removed=_arm(800, _after([1, 2, 3], [42, 50, 63])))
    assert inflation_clock_window.seeds_needed(inflation_clock_window.show(same, sample_epochs=0), "removed") is None
    glued = inflation_clock_window.glue_values(inflation_clock_window.show(same, sample_epochs=0))
    assert glued["pw_seeds_removed"] == "no number"
    # Uneven seeds: a seed without a core at the end is left out.
    uneven = _recorded(removed=_arm(800, _after([1, 2, 3], [40, 44, 0])))
    uneven["window"]["arms"]["removed"]["records"][-1]["models"][2]["core_dim"] = None
    n = inflation_clock_window.seeds_needed(inflation_clock_window.show(uneven, sample_epochs=0), "removed")
    a = np.array([40.0, 44.0])
    assert n > 2 and _t_power(a, kept, n) >= 0.8 > _t_power(a, kept, n - 1)
    for seed in (0, 1):
        uneven["window"]["arms"]["removed"]["records"][-1]["models"][seed]["core_dim"] = None
    pw = inflation_clock_window.show(uneven, sample_epochs=0)
    with pytest.raises(ValueError, match="'removed' has 0 and 'kept' has 3 seeds with a core at the end"):
        inflation_clock_window.seeds_needed(pw, "removed")
    assert inflation_clock_window.glue_values(pw)["pw_seeds_removed"] == "no estimate (too few seeds)"


def test_the_seed_that_grew_most_decides_and_a_kept_seed_that_did_not_grow_fails_it():
    short = _recorded(anneal_short=_arm(800, _after([12, 30, 44], [30, 35, 40])))
    values = inflation_clock_window.finding_values(inflation_clock_window.show(short, sample_epochs=0))
    kept_growths = np.array([42, 50, 63]) - np.array([12, 15, 17])
    assert values["window_paper.anneal_near_grokking"] == pytest.approx((40 - 18) / kept_growths.min())
    assert values["window_paper.anneal_smaller"] == 42 - 40
    flat = _recorded(kept=_arm(None, {0: [0, 0, 0], 800: [12, 15, 17], 20000: [11, 50, 63]}))
    values = inflation_clock_window.finding_values(inflation_clock_window.show(flat, sample_epochs=0))
    assert math.isnan(values["window_paper.anneal_near_grokking"])  # one kept seed shrank
    near = next(c for c in claims.FINDINGS if c.id == "window_paper.anneal_near_grokking")
    assert claims.status(near, {"values": values}) == ("does not hold", False)


def test_one_model_that_stops_generalising_fails_every_arm_generalising():
    rec = _recorded()
    rec["window"]["arms"]["removed"]["records"][-1]["models"][1]["test_acc"] = 0.9
    pw = inflation_clock_window.show(rec, sample_epochs=0)
    assert pw.end.arms["removed"].test_acc == pytest.approx(2.9 / 3)  # the arm's mean is above 0.95
    assert inflation_clock_window.finding_values(pw)["window_paper.all_generalise"] == 0.9


def test_spikes_are_counted_from_each_arms_branch_up_to_each_tau():
    rec = _recorded()
    history = rec["window"]["arms"]["removed"]["history"]
    for epoch in (900, 901, 5000):  # seed 0 drops below 90 % train accuracy twice, seed 2 once
        history["train_acc"][epoch - 801] = [0.5, 1.0, 0.5 if epoch == 5000 else 1.0]
    pw = inflation_clock_window.show(rec, sample_epochs=0)
    at_12, at_60 = pw.at_tau[12.0].arms["removed"], pw.at_tau[60.0].arms["removed"]
    assert (at_12.end, at_12.spikes_per_model) == (4000, pytest.approx(1 / 3))  # the episode 900-901 only
    assert at_60.spikes_per_model == pytest.approx(1.0) and at_60.spikes_per_1000 == pytest.approx(1000 / 19200)
    assert at_12.spikes_per_1000 == pytest.approx(1000 / 3 / 3200)
    values = inflation_clock_window.glue_values(pw)
    assert (values["pw_removed_12_spikes"], values["pw_removed_60_spikes"]) == (0.1, 0.05)


def test_an_arm_without_a_snapshot_at_its_branch_is_named():
    rec = _recorded()
    rec["window"]["arms"]["kept"]["records"] = rec["window"]["arms"]["kept"]["records"][2:]
    rec["window"]["arms"]["removed"]["records"] = rec["window"]["arms"]["removed"]["records"][1:]
    with pytest.raises(ValueError, match="'kept' has no snapshot at its branch \\(epoch 800\\)"):
        inflation_clock_window.show(rec, sample_epochs=0)
    # The kept run shown is another realisation: it never stands in for an arm's start.
    late = _recorded()
    late["window"]["arms"]["removed_late"]["records"] = late["window"]["arms"]["removed_late"]["records"][1:]
    with pytest.raises(ValueError, match="'removed_late' has no snapshot at its branch \\(epoch 6000\\)"):
        inflation_clock_window.show(late, sample_epochs=0)


def test_the_glued_numbers_name_each_arm_and_tau():
    values = inflation_clock_window.glue_values(inflation_clock_window.show(_recorded(), sample_epochs=0))
    assert (values["pw_kept_60_core"], values["pw_kept_60_min"], values["pw_kept_60_max"]) == (51.7, 42, 63)
    assert values["pw_anneal_long_60_acc"] == 0.98 and values["pw_kept_12_core"] == 29.3
    assert "pw_removed_late_12_core" not in values and values["pw_removed_late_30_core"] == 39.7
    assert (values["pw_anneal_short_epochs"], values["pw_anneal_long_epochs"], values["pw_late_branch"]) == (
        500,
        2000,
        6000,
    )
    assert (values["pw_kept_branch_dims"], values["pw_weights_branch_dims"]) == ("12, 15, 17", "12, 16, 18")
    assert (values["pw_removed_60_dims"], values["pw_anneal_short_12_dims"]) == ("10, 12, 47", "12, 30, 44")
    assert values["pw_late_at_branch_dims"] == "40, 45, 50"
    assert (values["pw_anneal_gap"], values["pw_max_spikes"]) == (42 - 35, 0.0)
    assert values["pw_training_hours"] == 2.5 and values["pw_checked_epochs"] == 0
    assert all(isinstance(v, (int, float)) or len(str(v).split()) <= 4 for v in values.values())


def test_a_bad_sample_request_is_refused_before_any_work():
    with pytest.raises(ValueError, match="window_sample_arm must be an arm that branches at grokking"):
        inflation_clock_window.show(None, sample_arm="kept")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="window_check_epochs must be a whole number"):
            inflation_clock_window.show(None, sample_epochs=bad)
    with pytest.raises(ValueError, match="no recorded window on the paper's clock: .*git checkout -- recorded/"):
        inflation_clock_window.show(None)


def test_the_findings_are_recorded_under_the_records_name_and_forgotten_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setenv("ACE_PROFILE", "book")
    claims.record("interpretability_window", {"window.anneal_larger": 7.0}, settings={})
    stale = claims.claims_dir() / f"inflation_clock{claims.RECORDED_SUFFIX}.json"  # from before the window's chapter
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    pw = inflation_clock_window.show(_recorded(), sample_epochs=0)
    inflation_clock_window.record_claims(pw)
    records = claims.load_records()
    kept = records["interpretability_window" + claims.RECORDED_SUFFIX]
    assert kept["source"] == pw.source and kept["settings"] == {}  # the paper's model, on its clock
    assert kept["values"] == pytest.approx(inflation_clock_window.finding_values(pw))
    assert records["interpretability_window"]["values"] == {"window.anneal_larger": 7.0}  # the build's own
    assert not stale.exists()
    inflation_clock_window.record_claims(None)
    assert set(claims.load_records()) == {"interpretability_window"}
