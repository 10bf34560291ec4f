"""Recorded results: exported with provenance, read back verified, and re-derived from scratch."""

import dataclasses
import json
import os

import numpy as np
import pytest
import torch
from pandas.testing import assert_frame_equal

from acebook import record
from acebook.runner import chapter_parameters
from conftest import copy_results
from corelib.experiments import core_inflation, grokking_sweeps, modular_runs, paper_scale
from corelib.experiments.grokking_sweeps import SweepsParams
from corelib.recorded import compare_values, is_recorded, load_recorded, recorded_path
from corelib.results import StoreError, load_json, save_json


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))
    return tmp_path


def _smoke_inflation() -> modular_runs.ModularParams:
    return modular_runs.ModularParams.from_namespace(chapter_parameters("core_inflation", "smoke"))


def _smoke_clock():
    from corelib.experiments import inflation_clock

    return inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "smoke"))


def test_compare_values_reports_each_difference_with_its_place():
    a = {"x": [1, 2.0, None], "y": {"z": "s"}}
    assert compare_values(a, json.loads(json.dumps(a)), 1e-6) == []
    b = {"x": [1, 2.1, None], "y": {"z": "t"}}
    assert compare_values(a, b, 1e-6) == [
        ".x[1]: recorded 2.0, re-derived 2.1",
        ".y.z: recorded 's', re-derived 't'",
    ]
    assert compare_values(a, b, 0.2)[0].startswith(".y.z")  # within tolerance: only the string
    assert compare_values([1, 2], [1], 0) == [": 2 recorded entries, 1 re-derived"]
    assert compare_values({"r": 3}, {"r": 4}, 10) == [".r: recorded 3, re-derived 4"]  # integers exactly


@pytest.mark.slow
def test_core_inflation_is_exported_read_back_and_re_derived(results):
    params = _smoke_inflation()
    rec_root = results / "recorded"
    with pytest.raises(SystemExit, match="arm of the smoke-profile run is at epoch 0"):
        record.export("core_inflation", "smoke", rec_root)
    for arm in modular_runs.ARMS:
        modular_runs.train_arm(params, arm, params.long_epochs, progress=False)
    arms = {arm: modular_runs.analyse_arm(params, arm, params.long_epochs, progress=False) for arm in modular_runs.ARMS}
    folder = record.export("core_inflation", "smoke", rec_root)
    assert is_recorded("core_inflation", "smoke", rec_root)
    got = load_recorded("core_inflation", "smoke", rec_root)
    prov = got["provenance"]
    assert prov["profile"] == "smoke" and prov["params"]["long_epochs"] == params.long_epochs
    assert prov["precision"] == "fp32" and prov["training_seconds"]["wd"] > 0
    assert {"cpu", "torch"} <= set(prov["machine"]) and set(prov["code"]) == {"corelib", "commit"}
    assert [r["epoch"] for r in got["arms"]["no_wd"]] == [r["epoch"] for r in arms["no_wd"]]
    assert "operator" not in got["arms"]["wd"][0]["models"][0] and "modes" in got["arms"]["wd"][0]["models"][0]
    assert all("operator" in m for m in got["arms"]["wd"][-1]["models"])  # the figure shows the last one
    assert got["history"]["wd"]["epoch"][-1] == params.long_epochs
    full = modular_runs.history(params, "wd", until=params.long_epochs)
    assert got["history"]["wd"]["epoch"] == full["epoch"]  # integers kept exactly
    np.testing.assert_allclose(got["history"]["wd"]["loss"], full["loss"], rtol=1e-5)  # 6 significant digits
    assert b"\n" not in (folder / "history.json").read_bytes()  # stored without indentation
    # The chapter reads the record as it reads its own run, and compares the snapshots both have.
    shown = paper_scale.recorded_inflation(rec_root, "smoke")
    assert shown["source"].startswith("recorded smoke-profile run (commit ")
    assert (
        shown["summary"].wd.core_dim_end
        == core_inflation.inflation_summary(params, arms["wd"], arms["no_wd"]).wd.core_dim_end
    )
    agree = paper_scale.inflation_agreement(params, arms, shown)
    assert {k: agree[k] for k in ("comparable", "n_snapshots", "differences")} == {
        "comparable": True,
        "n_snapshots": {arm: len(arms[arm]) for arm in modular_runs.ARMS},
        "differences": [],
    }
    assert agree["agreement"].agrees and agree["agreement"].n_moved == 0
    other = modular_runs.ModularParams.from_namespace(
        {**chapter_parameters("core_inflation", "smoke"), "seeds": [7, 8]}
    )
    assert paper_scale.inflation_agreement(other, arms, shown)["comparable"] is False
    assert paper_scale.recorded_inflation(results / "nothing", "smoke") is None
    # without a record the chapter glues the same names (its prose must resolve either way)
    assert set(core_inflation._recorded_values(shown, agree)) == set(core_inflation._recorded_values(None, None))
    # Re-derived from scratch (another results root): identical on this machine and code.
    assert record.verify("core_inflation", "smoke", epochs=6, root=rec_root).identical
    # A record that differs from what the code computes is reported: a rank one off in one model is
    # within rounding's reach (not identical, still in agreement) ...
    changed = got["arms"]
    changed["wd"][1]["models"][0]["core_dim"] += 1
    save_json(folder / "arms.json", changed)
    result = record.verify("core_inflation", "smoke", epochs=6, root=rec_root)
    assert result.agrees and not result.identical
    problems = list(result.differences)
    assert problems == [
        f"wd[1].models[0].core_dim: recorded {changed['wd'][1]['models'][0]['core_dim']}, "
        f"re-derived {changed['wd'][1]['models'][0]['core_dim'] - 1}"
    ]
    differences = paper_scale.inflation_agreement(params, arms, paper_scale.recorded_inflation(rec_root, "smoke"))
    assert differences["differences"] == [f"wd epoch {arms['wd'][1]['epoch']}" + problems[0].removeprefix("wd[1]")]
    # ... and a damaged one is refused on reading.
    raw = (folder / "arms.json").read_bytes()
    (folder / "arms.json").write_bytes(raw.replace(b'"epoch": 2', b'"epoch": 3', 1))
    with pytest.raises(StoreError, match="arms.json"):
        load_recorded("core_inflation", "smoke", rec_root)


@pytest.mark.slow
def test_grokking_sweeps_are_exported_and_a_condition_re_derived(results, smoke_sweeps):
    params = SweepsParams.from_namespace(chapter_parameters("grokking_sweeps", "smoke"))
    rec_root = results / "recorded"
    with pytest.raises(SystemExit, match="records of the smoke-profile sweeps are missing"):
        record.export("grokking_sweeps", "smoke", rec_root)
    copy_results(smoke_sweeps, results / "results")  # both sweeps, as run_sweep trains them (conftest.py)
    labels = list(dict.fromkeys(c.label() for c in (*params.omega_conditions(), *params.p_conditions())))
    log = results / "driver.log"
    log.write_text("\r".join(_bar(label, 0, f"00:{10 + i}") for i, label in enumerate(labels[:-1])))
    record.export("grokking_sweeps", "smoke", rec_root, logs=[log])
    got = load_recorded("grokking_sweeps", "smoke", rec_root)
    timed = got["provenance"]["training_seconds"]
    assert timed == {label: 10 + i for i, label in enumerate(labels[:-1])} | {labels[-1]: None}
    assert got["provenance"]["timing"].endswith(f"not timed: {labels[-1]}")
    n_conditions = len(params.omega_conditions()) + len(params.p_conditions())
    assert len(got["records"]) == n_conditions * params.n_seeds
    shown = paper_scale.recorded_sweeps(rec_root, "smoke")
    built = grokking_sweeps.run(params)
    for key in ("table_omega", "table_p", "summary_omega", "summary_p", "fit_omega", "fit_p"):
        if getattr(built, key) is None:  # too few grokked seeds to fit in the smoke profile
            assert getattr(shown, key) is None, key
        else:
            assert_frame_equal(getattr(shown, key), getattr(built, key))
    assert paper_scale.recorded_sweeps(results / "nothing", "smoke") is None
    # the claims page reads the record's claim values under its name
    from corelib import claims

    paper_scale.record_claims("grokking_sweeps", shown)
    saved = claims.load_records(chapters=["grokking_sweeps"])
    assert any(data.get("source") == shown.source for data in saved.values()), saved.keys()
    assert set(grokking_sweeps.recorded_glue_values(shown)) == set(grokking_sweeps.recorded_glue_values(None))
    label = params.p_conditions()[0].label()
    assert record.verify("grokking_sweeps", "smoke", condition=label, seeds=1, root=rec_root).identical
    assert record.verify("grokking_sweeps", "smoke", condition=label, root=rec_root).identical  # every seed
    assert "--seeds" not in got["provenance"]["rederive"]  # the command re-derives the recorded stack
    with pytest.raises(SystemExit, match="--seeds must be at least 1"):
        record.verify("grokking_sweeps", "smoke", condition=label, seeds=0, root=rec_root)
    with pytest.raises(SystemExit, match="no condition 'p=2 wd=1 B=full'"):
        record.verify("grokking_sweeps", "smoke", condition="p=2 wd=1 B=full", root=rec_root)


def _stdout_only(folder):
    log = folder / "stdout.log"
    log.write_text("grokking_sweeps: p=31 wd=1 B=full done (1 of 13)\n")
    return log


def _bar(label: str, step: int, elapsed: str) -> str:
    return f"{label}, 12 seeds:   3%|▎         | {step}/30000 [{elapsed}<1:00:00,  1.5s/it, running=12]"


def test_sweep_wall_times_are_read_from_the_drivers_progress_bars(tmp_path):
    a, b = "p=31 wd=1 B=full", "p=53 wd=0.3 B=512"
    old, new = tmp_path / "old.log", tmp_path / "new.log"
    # the old log: a started from 0 (then was lost: no checkpoint), b ran 1:02:03 and stopped
    old.write_text("\r".join([_bar(a, 0, "00:00"), _bar(a, 50, "05:00"), _bar(b, 0, "00:00"), _bar(b, 900, "1:02:03")]))
    # the new log: a starts over from 0 and runs 10:30; b resumes at step 1000 and runs 00:30 more
    new.write_text("\n".join([_bar(a, 0, "00:00"), _bar(a, 4000, "10:30"), "done", _bar(b, 1000, "00:30")]))
    os.utime(old, (1_000, 1_000))
    os.utime(new, (2_000, 2_000))
    assert record.sweep_wall_seconds([new, old]) == {a: 630, b: 3723 + 30}
    # one log appended to by two runs: the elapsed time going back starts a new piece
    both = tmp_path / "both.log"
    c = "p=53 wd=1e-05 B=full"
    both.write_text(
        "\r".join([_bar(c, 0, "00:00"), _bar(c, 500, "02:00"), _bar(c, 500, "00:00"), _bar(c, 900, "01:10")])
    )
    assert record.sweep_wall_seconds([both]) == {c: 120 + 70}
    both.write_text("\r".join([_bar(c, 0, "00:00"), _bar(c, 500, "02:00"), _bar(c, 0, "00:00"), _bar(c, 900, "01:10")]))
    assert record.sweep_wall_seconds([both]) == {c: 70}  # started over: the first piece's work was lost
    with pytest.raises(SystemExit, match="no sweep progress bars; they go to stderr, so .* 2>&1"):
        record.sweep_wall_seconds([_stdout_only(tmp_path)])
    with pytest.raises(SystemExit, match="only resumed pieces of p=53 wd=0.3 B=512: add the log where it started"):
        record.sweep_wall_seconds([new])
    with pytest.raises(SystemExit, match="--logs serves grokking_sweeps only"):
        record.export("core_inflation", "smoke", tmp_path, logs=[new])
    with pytest.raises(SystemExit, match="no such log file: .*missing.log"):
        record.export("grokking_sweeps", "smoke", tmp_path, logs=[new, tmp_path / "missing.log"])


def test_unknown_experiments_and_missing_records_name_the_fix(tmp_path):
    with pytest.raises(ValueError, match="no recorded results are kept for 'markov'"):
        recorded_path("markov")
    with pytest.raises(StoreError, match="python -m acebook.record export core_inflation"):
        load_recorded("core_inflation", "paper", tmp_path)


LONG_INTEL = "Intel(R) Xeon(R) Processor @ 2.50GHz"
# Machines the tests pretend to run on: /proc/cpuinfo's text (None: no such file, as off Linux),
# what `platform` says, the CPUs (None: unknown), the GPU the process computes on (None: none).
FAKE_MACHINES = {
    "a long Intel name": (f"processor\t: 0\nmodel name\t: {LONG_INTEL}\nflags\t: fpu avx512f\n", "x86_64", 2, None),
    "a CPU no list knows": ("processor\t: 0\nmodel name\t: Zhaoxin KaiXian KX-U6780A@2.7GHz\n", "", 8, None),
    "a CPU that names itself nowhere": ("processor\t: 0\nflags\t: fpu\n", "", 1, None),
    "no CPU information at all": (None, "", None, None),
    "a GPU": (f"processor\t: 0\nmodel name\t: {LONG_INTEL}\n", "x86_64", 16, "NVIDIA H100 80GB HBM3"),
}


@pytest.fixture
def fake_machine(monkeypatch):
    """``fake_machine(name)``: the process sees the machine ``FAKE_MACHINES[name]``, whatever it runs on."""
    import pathlib
    import platform

    read_text = pathlib.Path.read_text

    def fake(name: str) -> None:
        cpuinfo, processor, cpus, gpu = FAKE_MACHINES[name]

        def read(path, *args, **kwargs):
            if str(path) != "/proc/cpuinfo":
                return read_text(path, *args, **kwargs)
            if cpuinfo is None:
                raise FileNotFoundError(path)
            return cpuinfo

        monkeypatch.setattr(pathlib.Path, "read_text", read)
        monkeypatch.setattr(platform, "processor", lambda: processor)
        monkeypatch.setattr(platform, "machine", lambda: processor)
        monkeypatch.setattr(os, "cpu_count", lambda: cpus)
        if cpus is None:  # not Linux: no affinity to ask
            monkeypatch.delattr(os, "sched_getaffinity", raising=False)
        else:
            monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
        monkeypatch.setattr(record, "default_device", lambda: torch.device("cuda", 0) if gpu else torch.device("cpu"))
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: gpu)

    return fake


def test_chapter_costs_are_recorded_per_profile_and_given_to_the_top_of_a_chapter(results, fake_machine):
    from acebook import run_times

    fake_machine("a long Intel name")  # the test holds whatever machine runs it
    rec = results / "recorded"
    unmeasured = run_times.ChapterCost("a reference machine", "not measured yet", "not measured yet")
    assert run_times.chapter_cost("modular_addition", rec) == unmeasured
    with pytest.raises(SystemExit, match="no chapter of the results root was computed with the book profile"):
        record.export_costs("book", rec)
    run_times.record_run_time("modular_addition", "book", 372.0, computed=True)
    run_times.record_run_time("markov_chain", "book", 5.0, computed=False)  # read back: not a cost
    record.export_costs("book", rec)
    cost = run_times.chapter_cost("modular_addition", rec)
    assert cost == run_times.ChapterCost("2 CPU threads (Intel Xeon)", "about 6 minutes", "not timed")
    assert run_times.chapter_cost("markov_chain", rec) == unmeasured
    run_times.record_run_time("markov_chain", "book", 120.0, computed=True)
    record.export_costs("book", rec)  # the paper profile sets nothing else for this chapter
    assert run_times.chapter_cost("markov_chain", rec).paper == "about 2 minutes (same settings)"
    run_times.record_run_time("modular_addition", "paper", 4.2 * 3600, computed=True)
    record.export_costs("paper", rec)  # adds the paper profile, keeps the book's
    cost = run_times.chapter_cost("modular_addition", rec)
    assert (cost.book, cost.paper) == ("about 6 minutes", "about 4.2 hours")
    for each in (cost, run_times.chapter_cost("markov_chain", rec)):  # values the sentence cites, not sentences
        assert len(each.book.split()) <= 5 and len(each.paper.split()) <= 5 and len(each.machine.split()) <= 6, each
    # each chapter names the CPU it was timed on: a later export on another machine keeps the others'
    costs = json.loads((rec / "chapter_costs.json").read_text())
    costs["chapters"]["markov_chain"]["book"]["cpu"] = "Another Chip 3000"
    save_json(rec / "chapter_costs.json", costs)
    record.export_costs("paper", rec)
    assert run_times.chapter_cost("markov_chain", rec).machine.endswith("(Another Chip 3000)")
    assert run_times.chapter_cost("modular_addition", rec).machine == "2 CPU threads (Intel Xeon)"
    # a time recorded without its CPU says so, not the CPU of the machine that exported the file
    del costs["chapters"]["markov_chain"]["book"]["cpu"]
    save_json(rec / "chapter_costs.json", costs)
    assert run_times.chapter_cost("markov_chain", rec).machine == "2 CPU threads (CPU not recorded)"


@pytest.mark.parametrize(
    "name, cpu, cost, here",
    [
        ("a long Intel name", LONG_INTEL, "2 CPU threads (Intel Xeon)", LONG_INTEL),
        (
            "a CPU no list knows",
            "Zhaoxin KaiXian KX-U6780A@2.7GHz",
            "8 CPU threads (Zhaoxin KaiXian KX-U6780A)",
            "Zhaoxin KaiXian KX-U6780A@2.7GHz",
        ),
        ("a CPU that names itself nowhere", "unknown CPU", "1 CPU thread (unknown)", "unknown CPU"),
        ("no CPU information at all", "unknown CPU", "1 CPU thread (unknown)", "unknown CPU"),
        ("a GPU", LONG_INTEL, "one GPU (NVIDIA H100 80GB)", "NVIDIA H100 80GB HBM3 (cuda)"),
    ],
)
def test_the_machine_is_described_alike_in_provenance_costs_and_verify_on_any_machine(
    name, cpu, cost, here, results, fake_machine
):
    from acebook import run_times

    fake_machine(name)
    described = record.machine()  # what a record's provenance keeps
    assert (described["cpu"], described["logical_cpus"]) == (cpu, FAKE_MACHINES[name][2])
    assert json.loads(json.dumps(described)) == described  # it is stored as JSON
    # verify's "re-derived on": the GPU where the process computes on one, else the CPU
    assert record.computed_on({**described, "device": record.compute_device()}) == here
    run_times.record_run_time("modular_addition", "book", 372.0, computed=True)
    record.export_costs("book", results / "recorded")
    got = run_times.chapter_cost("modular_addition", results / "recorded")
    assert got.machine == cost and len(got.machine.split()) <= 6


@pytest.mark.parametrize(
    "name, short",
    [
        ("Intel(R) Xeon(R) Processor @ 2.50GHz", "Intel Xeon"),
        ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz", "Intel Xeon Platinum"),
        ("AMD EPYC 7B13", "AMD EPYC 7B13"),
        ("AMD EPYC 9654 96-Core Processor", "AMD EPYC 9654"),
        ("AMD Ryzen 7 7840U w/ Radeon 780M Graphics", "AMD Ryzen 7"),
        ("13th Gen Intel(R) Core(TM) i7-1365U", "Intel Core i7-1365U"),
        ("Apple M3 Max", "Apple M3 Max"),
        ("aarch64", "aarch64"),
        ("", "a CPU"),
    ],
)
def test_a_cpu_is_named_in_a_few_words_whatever_it_is_called(name, short):
    from acebook import run_times

    assert run_times.short_cpu_name(name) == short
    cost = f"2 CPU threads ({run_times.short_cpu_name(name)})"
    assert len(cost.split()) <= 6


def test_one_chapters_claims_are_re_judged_and_the_other_rows_kept(results, monkeypatch):
    from corelib import claims

    rec = results / "recorded"
    monkeypatch.setenv("ACE_PROFILE", "book")
    chapters = sorted({c.chapter for c in claims.CLAIMS + claims.FINDINGS})
    for ch in chapters:
        claims.record(ch, {}, settings={})
    claims.record("markov_chain", {"markov.rank": 2}, settings={})
    claims.record("interpretability_window", {"window.anneal_larger": 7.0}, settings={})
    before = load_json(record.export_claims("book", rec))
    assert before["rows"]["window.anneal_larger"]["status"] == "holds" and "updated" not in before
    # A later build of one chapter: only its rows change.
    claims.record("markov_chain", {"markov.rank": 5}, settings={})
    claims.record("interpretability_window", {"window.anneal_larger": -3.0, "window.anneal_smaller": 1.0}, settings={})
    after = load_json(record.export_claims("book", rec, only=["interpretability_window"]))
    assert after["rows"]["window.anneal_larger"]["status"] == "does not hold"
    assert after["rows"]["window.anneal_smaller"]["status"] == "holds"
    assert after["rows"]["markov.rank"] == before["rows"]["markov.rank"]  # not re-judged
    assert list(after["rows"]) == list(before["rows"]) and set(after["updated"]) == {"interpretability_window"}
    assert (after["commit"], after["exported"]) == (before["commit"], before["exported"])
    # A file from before a claim was added, with a row the registry dropped and chapters not run.
    stale = {**after, "not_run": ["interpretability_window", "markov_chain"]}
    stale["rows"] = {"gone.claim": after["rows"]["markov.rank"], **after["rows"]}
    del stale["rows"]["window.anneal_smaller"]
    save_json(rec / record.CLAIMS_FILE, stale)
    again = load_json(record.export_claims("book", rec, only=["interpretability_window"]))
    assert list(again["rows"]) == list(before["rows"]) and again["rows"]["window.anneal_smaller"]["status"] == "holds"
    assert again["not_run"] == ["markov_chain"]
    with pytest.raises(SystemExit, match="does not take --missing-ok"):
        record.export_claims("book", rec, missing_ok=True, only=["interpretability_window"])
    with pytest.raises(SystemExit, match="--only takes chapters with claims"):
        record.export_claims("book", rec, only=["../claims"])
    with pytest.raises(SystemExit, match="holds the 'book' profile's statuses, not the 'paper' one's"):
        record.export_claims("paper", rec, only=["interpretability_window"])
    with pytest.raises(SystemExit, match="does not exist yet: record every chapter once"):
        record.export_claims("book", results / "elsewhere", only=["interpretability_window"])
    monkeypatch.setenv("ACE_PROFILE", "smoke")
    claims.record("interpretability_window", {}, settings={})
    with pytest.raises(SystemExit, match="not recorded with the book profile: {'interpretability_window': 'smoke'}"):
        record.export_claims("book", rec, only=["interpretability_window"])


@pytest.mark.slow
def test_the_clock_experiment_is_exported_shown_from_the_record_and_re_derived(results):
    from corelib.experiments import inflation_clock

    params, rec_root = _smoke_clock(), results / "recorded"
    with pytest.raises(SystemExit, match="of the smoke-profile run is at epoch 0"):
        record.export("inflation_clock", "smoke", rec_root)
    computed = inflation_clock.run(params, progress=False)
    folder = record.export("inflation_clock", "smoke", rec_root)
    prov = load_recorded("inflation_clock", "smoke", rec_root)["provenance"]
    assert prov["params"]["pairs"] == [list(p) for p in params.pairs] and prov["precision"] == "fp32"
    assert set(prov["training_seconds"]) >= {"window removed", inflation_clock.pair_label(*params.pairs[0])}
    # Found only for exactly these settings.
    shown = paper_scale.recorded_clock(params, rec_root, ("paper", "book", "smoke"))
    assert shown["source"].startswith("recorded smoke-profile run (commit ")
    assert paper_scale.recorded_clock(params, rec_root) is None  # no paper or book record here
    other = inflation_clock.ClockParams.from_namespace(
        {**chapter_parameters("inflation_clock", "smoke"), "seeds": [7, 8]}
    )
    assert paper_scale.recorded_clock(other, rec_root, ("smoke",)) is None
    # The chapter shows the record as it shows its own run, after re-deriving a piece of it from
    # scratch (a fresh results root: this one is emptied so nothing can be read back instead).
    import shutil

    shutil.rmtree(results / "results")
    grok = shown["window"]["grok_epoch"]
    after = next(r["epoch"] for r in shown["window"]["arms"]["removed"]["records"] if r["epoch"] > grok)
    from_record = inflation_clock.run(params, record=shown, check_epochs=after, progress=False)
    agreement = from_record.record["agreement"]
    n_kept = sum(r["epoch"] <= grok for r in shown["window"]["arms"]["kept"]["records"])
    n_removed = sum(r["epoch"] <= after for r in shown["window"]["arms"]["removed"]["records"])
    assert {k: agreement[k] for k in ("epochs", "arms", "n_snapshots", "differences")} == {
        "epochs": after,
        "arms": ["kept", "removed"],
        "n_snapshots": n_kept + n_removed,
        "differences": [],
    }
    assert agreement["agreement"].agrees and agreement["agreement"].identical
    assert not (results / "results").exists()  # the re-derivation left nothing behind

    def plain(value):
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value

    for key in ("clock", "curves", "window", "window_curves"):  # NaN equals NaN here
        np.testing.assert_equal(plain(getattr(from_record, key)), plain(getattr(computed, key)), err_msg=key)
    np.testing.assert_equal(  # NaN (a core never measured at this profile's horizon) equals NaN here
        inflation_clock.glue_values(params, from_record.clock, from_record.window),
        inflation_clock.glue_values(params, computed.clock, computed.window),
    )
    numbers = inflation_clock.record_numbers(from_record.record)
    assert (numbers["checked_epochs"], numbers["checked_snapshots"], numbers["differences"]) == (
        after,
        n_kept + n_removed,
        0,
    )
    assert numbers["quantities_beyond"] == 0 == numbers["quantities_moved"] < numbers["checked_quantities"]
    assert inflation_clock.record_numbers(None) == {
        "record_minutes": 0,
        "checked_epochs": 0,
        "checked_snapshots": 0,
        "differences": 0,
        "checked_quantities": 0,
        "quantities_moved": 0,
        "quantities_beyond": 0,
        "largest_z": 0.0,
        "seed_errors": 2.0,
    }
    early = inflation_clock.run(params, record=shown, check_epochs=1, progress=False).record["agreement"]
    assert early["arms"] == ["kept"] and early["epochs"] == 0 == early["n_snapshots"] - 1  # epoch 0 alone
    with pytest.raises(ValueError, match="check_epochs must be 0 .check nothing. or a number of epochs"):
        inflation_clock.run(params, record=shown, check_epochs=-1, progress=False)
    unchecked = inflation_clock.run(params, record=shown, check_epochs=0, progress=False).record
    assert inflation_clock.record_numbers(unchecked)["checked_snapshots"] == 0
    with pytest.raises(ValueError, match="made with other settings than params"):
        inflation_clock.run(other, record=shown, progress=False)
    assert record.verify("inflation_clock", "smoke", epochs=after, root=rec_root).identical
    with pytest.raises(SystemExit, match="--epochs must be a recorded snapshot"):
        record.verify("inflation_clock", "smoke", epochs=after + 1, root=rec_root)
    # A record that differs from what the code computes is reported, and the chapter warns.
    # Every model's core at epoch 0 moved far beyond the seeds' spread: refused, naming it.
    window = load_recorded("inflation_clock", "smoke", rec_root)["window"]
    window["arms"]["removed"]["records"][-1]["models"][1]["core_dim"] += 2
    first = window["arms"]["kept"]["records"][0]["models"]
    dims = [m["core_dim"] for m in first]
    shift = 10 + 3 * (max(dims) - min(dims))
    for m in first:
        m["core_dim"] += shift
    save_json(folder / "window.json", window)
    result = record.verify("inflation_clock", "smoke", epochs=after, root=rec_root)
    assert result.differences[0] == f"kept[0].models[0].core_dim: recorded {dims[0] + shift}, re-derived {dims[0]}"
    assert len(result.differences) == len(first)  # the removed arm's last snapshot lies beyond the sample
    assert [q.name for q in result.beyond] == ["kept · epoch 0 · core_dim"]
    changed = paper_scale.recorded_clock(params, rec_root, ("smoke",))
    with pytest.warns(UserWarning, match=r"1 quantities moved beyond .* \(the first: kept · epoch 0 · core_dim\)"):
        again = inflation_clock.run(params, record=changed, check_epochs=after, progress=False)
    assert inflation_clock.record_numbers(again.record)["quantities_beyond"] == 1


def test_the_committed_clock_record_is_the_book_settings_of_its_chapter():
    from corelib.experiments import inflation_clock

    params = inflation_clock.ClockParams.from_namespace(chapter_parameters("inflation_clock", "book"))
    shown = paper_scale.recorded_clock(params)
    assert shown is not None, "recorded/inflation_clock_book does not hold the chapter's book settings: re-export it"
    assert shown["provenance"]["profile"] == "book" and shown["window"]["grok_epoch"] > 0
    check = chapter_parameters("inflation_clock", "book")["check_epochs"]
    removed = [r["epoch"] for r in shown["window"]["arms"]["removed"]["records"]]
    assert shown["window"]["grok_epoch"] < check and check in removed  # the build's check reaches past the branch


@pytest.mark.slow
def test_the_window_alone_is_exported_and_an_arm_re_derived_from_its_branch_weights(results, monkeypatch):
    import shutil

    from corelib.engine import load_snapshot, plant_snapshot, snapshot_epochs
    from corelib.experiments import inflation_clock

    params, rec_root = _smoke_clock(), results / "recorded"
    with pytest.raises(SystemExit, match="kept run of the smoke-profile run is at epoch 0 of"):
        record.export("inflation_clock_window", "smoke", rec_root)
    whole = inflation_clock.run_window(params, progress=False)
    folder = record.export("inflation_clock_window", "smoke", rec_root)
    rec = paper_scale.recorded_window(rec_root, "smoke")
    assert rec["params"] == params and rec["source"].startswith("recorded smoke-profile run (commit ")
    assert rec["provenance"]["kept_run"] == "results" and "window anneal_short" in rec["provenance"]["training_seconds"]
    dims = rec["provenance"]["core_dims_at_branch"]
    assert dims["kept run"] == dims["branch weights"]  # one run: the kept run shown is the one branched from
    assert paper_scale.recorded_window(rec_root, "book") is None
    np.testing.assert_equal(  # what the chapter shows of the record is what it computed
        dataclasses.asdict(inflation_clock.window_summary(params, rec["window"])),
        dataclasses.asdict(inflation_clock.window_summary(params, whole)),
    )
    grok = rec["window"]["grok_epoch"]
    kept_dir = modular_runs.arm_dir(inflation_clock.window_base(params), "wd")
    at_branch = load_snapshot(kept_dir, grok).params
    assert all(torch.equal(rec["branch_weights"][k], v) for k, v in at_branch.items())
    # The sample: the first epochs of an arm after the branch, from the recorded weights alone, in
    # a fresh results root (this one is emptied so nothing can be read back instead).
    shutil.rmtree(results / "results")
    after = [r["epoch"] - grok for r in rec["window"]["arms"]["anneal_short"]["records"] if r["epoch"] > grok]
    assert (
        rec["provenance"]["rederive"]
        == f"python -m acebook.record verify inflation_clock_window --profile smoke --epochs {after[1]}"
    )
    from corelib.experiments import inflation_clock_window

    shown = inflation_clock_window.show(rec, sample_arm="anneal_short", sample_epochs=after[1], progress=False)
    assert shown.end == inflation_clock.window_summary(params, rec["window"]) and shown.source == rec["source"]
    sample = shown.sample
    n = sum(r["epoch"] <= grok + after[1] for r in rec["window"]["arms"]["anneal_short"]["records"])
    assert (sample["epochs"], sample["arms"], sample["n_snapshots"]) == (grok + after[1], ["anneal_short"], n)
    assert sample["differences"] == [] and sample["agreement"].agrees and sample["agreement"].identical
    assert not (results / "results").exists()
    assert record.verify("inflation_clock_window", "smoke", epochs=after[0], root=rec_root).identical
    with pytest.raises(ValueError, match="must branch at grokking, from the recorded weights"):
        inflation_clock.window_sample_agreement(params, rec, "removed_late", after[0], progress=False)
    for bad in (0, after[-1] + 1, None, 2.5):
        with pytest.raises(ValueError, match=f"must be a whole number from {after[0]} .* to {after[-1]} .*; got {bad}"):
            inflation_clock.window_sample_agreement(params, rec, "removed", bad, progress=False)
    other = inflation_clock.ClockParams.from_namespace(
        {**chapter_parameters("inflation_clock", "smoke"), "seeds": [7, 8]}
    )
    with pytest.raises(ValueError, match="branch weights belong to another run .* differ in seeds"):
        inflation_clock.window_sample_agreement(other, rec, "removed", after[0], progress=False)
    # A record whose arm moved beyond the seeds' spread is refused, naming the quantity.
    window = load_recorded("inflation_clock_window", "smoke", rec_root)["window"]
    last = next(r for r in window["arms"]["anneal_short"]["records"] if r["epoch"] == grok + after[0])["models"]
    dims = [m["core_dim"] for m in last]
    for m in last:
        m["core_dim"] += 10 + 3 * (max(dims) - min(dims))
    save_json(folder / "window.json", window)
    result = record.verify("inflation_clock_window", "smoke", epochs=after[0], root=rec_root)
    assert not result.agrees and [q.name for q in result.beyond] == [
        f"anneal_short · epoch {grok + after[0]} · core_dim"
    ]
    # A snapshot is planted only into an empty folder, and only with weights of the run's shape.
    planted = results / "planted"
    plant_snapshot(planted, rec["branch_run"], grok, rec["branch_weights"])
    assert snapshot_epochs(planted) == [grok]
    assert all(torch.equal(load_snapshot(planted, grok).params[k], v) for k, v in at_branch.items())
    with pytest.raises(StoreError, match="already holds a run"):
        plant_snapshot(planted, rec["branch_run"], grok, rec["branch_weights"])
    (results / "half").mkdir()
    save_json(results / "half" / "progress.json", {"epoch": 0, "state": None, "snapshots": []})
    with pytest.raises(StoreError, match="already holds a run"):  # a run's files without its run.json
        plant_snapshot(results / "half", rec["branch_run"], grok, rec["branch_weights"])
    small = {k: v[:1] for k, v in rec["branch_weights"].items()}
    with pytest.raises(StoreError, match="stacked weights do not match the architecture and seeds"):
        plant_snapshot(results / "empty", rec["branch_run"], grok, small)
    # The paper's window: the drivers train the kept run only to its last branch, and the kept arm
    # shown is the recorded core-inflation run of the same models (here: this test's own).
    from acebook import paper_runs

    monkeypatch.setenv("ACE_RESULTS_DIR", str(results / "window_only"))
    paper_runs.advance_clock("smoke", chunk=40, window_only=True)
    kept = whole["arms"]["kept"]
    stand_in = paper_scale.RecordedInflation(
        params=inflation_clock.window_base(params),
        arms={"wd": kept["records"]},
        histories={"wd": kept["history"]},
        summary=None,
        provenance={},
        source="a recorded core-inflation run",
    )
    monkeypatch.setattr(paper_scale, "recorded_inflation", lambda root=None, profile="paper": stand_in)
    record.export("inflation_clock_window", "smoke", results / "recorded2")
    again = paper_scale.recorded_window(results / "recorded2", "smoke")
    assert again["provenance"]["kept_run"] == "a recorded core-inflation run"
    assert again["window"] == rec["window"]  # the same runs, trained in pieces
    monkeypatch.setattr(paper_scale, "recorded_inflation", lambda root=None, profile="paper": None)
    with pytest.raises(SystemExit, match="no recorded core-inflation run of the same models reaches it"):
        record.export("inflation_clock_window", "smoke", results / "recorded3")


def test_histories_are_stored_as_float32_tensors_and_read_back_as_the_engine_gives_them():
    from corelib.recorded import histories_from_tensors, history_tensors

    third = 1 / 3  # not a float32: rounded on the way
    hist = {
        "epoch": [801, 802, 803],
        "loss": [[2.5, third], [1.0, 0.5], [0.25, 0.125]],
        "train_acc": [[0.5, 1.0], [1.0, 1.0], [0.75, 1.0]],
        "test_acc": [None, [0.5, 0.25], None],
    }
    tensors = history_tensors({"kept": hist, "removed": {**hist, "test_acc": [None] * 3}})
    assert tensors["kept.loss"].dtype == torch.float32 and tensors["kept.loss"].shape == (3, 2)
    assert tensors["kept.test_rows"].tolist() == [1] and tensors["removed.test_acc"].shape == (0, 2)
    back = histories_from_tensors(tensors)
    assert back["removed"]["test_acc"] == [None, None, None] and back["kept"]["test_acc"] == hist["test_acc"]
    assert back["kept"]["epoch"] == hist["epoch"] and back["kept"]["train_acc"] == hist["train_acc"]
    assert back["kept"]["loss"][0][1] != third and back["kept"]["loss"][0][1] == pytest.approx(third, rel=6e-8)
    with pytest.raises(ValueError, match="expected an arm name without '.' and the keys"):
        history_tensors({"a.b": hist})


def test_the_committed_window_record_keeps_its_histories_in_float32_beside_the_records():
    rec = load_recorded("inflation_clock_window", "paper")
    folder = recorded_path("inflation_clock_window", "paper")
    assert "history" not in json.loads((folder / "window.json").read_text())["arms"]["kept"]
    for arm in rec["window"]["arms"].values():
        hist = arm["history"]
        assert len(hist["epoch"]) == len(hist["loss"]) == len(hist["test_acc"]) > 1000
        assert sum(row is not None for row in hist["test_acc"]) == pytest.approx(len(hist["epoch"]) / 10, abs=2)


def test_a_window_record_without_an_arms_history_is_refused_naming_the_fix(tmp_path, monkeypatch):
    import shutil

    from corelib.recorded import HISTORIES, histories_from_tensors, history_tensors
    from corelib.results import load_tensors, save_tensors

    folder = tmp_path / "inflation_clock_window_paper"
    shutil.copytree(recorded_path("inflation_clock_window", "paper"), folder)
    histories = histories_from_tensors(load_tensors(folder / HISTORIES))
    del histories["removed"]
    save_tensors(folder / HISTORIES, history_tensors(histories))
    with pytest.raises(StoreError, match=r"holds no history of the arms \['removed'\]; restore the record"):
        load_recorded("inflation_clock_window", "paper", tmp_path)
    with pytest.raises(ValueError, match="history of 'kept' is empty: train the arm"):
        history_tensors({"kept": {"epoch": [], "loss": [], "train_acc": [], "test_acc": []}})


def test_a_window_record_of_an_earlier_export_with_its_histories_in_json_still_loads(tmp_path):
    import shutil

    from corelib.recorded import HISTORIES
    from corelib.results import remove

    folder = tmp_path / "inflation_clock_window_paper"
    shutil.copytree(recorded_path("inflation_clock_window", "paper"), folder)
    now = load_recorded("inflation_clock_window", "paper", tmp_path)
    save_json(folder / "window.json", now["window"], compact=True)  # histories inside, as exports before
    remove(folder / HISTORIES)
    assert load_recorded("inflation_clock_window", "paper", tmp_path)["window"] == now["window"]


def test_the_gpu_times_give_the_claims_page_short_values_and_a_table(tmp_path):
    from acebook.run_times import GPU_TIMES_FILE, gpu_paper_times

    assert gpu_paper_times(tmp_path) is None  # nothing recorded: the page says so
    check = {"largest_change_of_a_mean_in_standard_errors": 0.5, "agrees": True}
    save_json(
        tmp_path / GPU_TIMES_FILE,
        {
            "machine": {"device": "Some GPU (cuda)"},
            "measured": "2026-01-02",
            "core_inflation": {"arms": [{"arm": "wd", "seconds": 600.0, "recorded_cpu_seconds": 6000.0}]},
            "grokking_sweeps": {
                "conditions": [{"condition": "p=53 wd=1 B=512", "seconds": 30.0, "recorded_cpu_seconds": 45.0}]
            },
            "totals_seconds": {
                "core_inflation": 600.0,
                "core_inflation_recorded_cpu": 6000.0,
                "grokking_sweeps": 30.0,
                "grokking_sweeps_recorded_cpu": 45.0,
            },
            "rederived": {
                "core_inflation": {**check, "epochs": 1000},
                "grokking_sweeps": {**check, "agrees": False, "condition": "p=53 wd=1 B=512"},
            },
        },
    )
    gpu = gpu_paper_times(tmp_path)
    assert (gpu.device, gpu.inflation, gpu.inflation_cpu, gpu.sweeps) == (
        "Some GPU (cuda)",
        "about 10 minutes",
        "about 1.7 hours",
        "about 30 seconds",
    )
    assert gpu.agrees is False and gpu.inflation_epochs == 1000 and gpu.sweeps_condition == "p=53 wd=1 B=512"
    assert list(gpu.table["speed_up"]) == [10.0, 1.5] and list(gpu.table["gpu_minutes"]) == [10.0, 0.5]


def test_a_verify_names_the_processor_it_computed_on(monkeypatch):
    monkeypatch.setenv("ACE_DEVICE", "cpu")
    assert record.compute_device() == "cpu"
    assert record.computed_on({"cpu": "Some CPU"}) == "Some CPU"  # the recorded runs name no device
    assert record.computed_on({"cpu": "Some CPU", "device": "cpu"}) == "Some CPU"
    assert record.computed_on({"cpu": "Some CPU", "device": "Some GPU (cuda)"}) == "Some GPU (cuda)"


@pytest.mark.parametrize(
    "cpuinfo, processor, expected",
    [
        (
            "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.50GHz\nflags\t: avx512f\n",
            "",
            "Intel(R) Xeon(R) Processor @ 2.50GHz",
        ),
        ("processor\t: 0\nmodel name\t:   AMD   EPYC 7B13\n", "x86_64", "AMD EPYC 7B13"),
        ("processor\t: 0\nBogoMIPS\t: 50.00\nModel\t: Raspberry Pi 4 Model B\n", "", "Raspberry Pi 4 Model B"),
        ("processor\t: 0\nflags\t: fpu\n", "SomeChip", "SomeChip"),  # no model name: platform's word
        ("", "", None),  # nothing at all: platform.machine(), else "unknown CPU"
    ],
)
def test_the_machine_is_named_from_whatever_the_cpu_reports(cpuinfo, processor, expected, monkeypatch):
    import platform

    from acebook import run_times

    monkeypatch.setattr(platform, "processor", lambda: processor)
    name = record.cpu_name(cpuinfo)
    assert name == (expected or platform.machine() or "unknown CPU")
    monkeypatch.setattr(platform, "machine", lambda: "")
    assert record.cpu_name(cpuinfo) == (expected or "unknown CPU")
    assert 1 <= len(run_times.short_cpu_name(record.cpu_name(cpuinfo)).split()) <= 3


def test_a_gpu_is_named_where_the_process_computes(monkeypatch):
    import torch

    monkeypatch.setattr(record, "default_device", lambda: torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert record.compute_device() == "NVIDIA H100 80GB HBM3 (cuda)"
    monkeypatch.setattr(record, "default_device", lambda: torch.device("mps"))
    assert record.compute_device() == "Apple GPU (mps)"
    monkeypatch.setattr(record, "default_device", lambda: torch.device("cpu"))
    assert record.compute_device() == "cpu"
