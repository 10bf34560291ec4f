"""The claims registry, recorded values, statuses, and the claims page of the smoke book."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from acebook import claims_page, project
from corelib import claims
from corelib.results import StoreError, remove, save_json


def by_id(rows: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in rows}


def test_registry_ids_are_unique_and_belong_to_chapters_of_the_book():
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids))
    chapters = set(project.chapters())
    for c in claims.CLAIMS:
        assert c.chapter in chapters | {"subject_verb_agreement"}, c.id
        assert c.text and c.paper and c.tolerance and c.basis, c.id


def test_tolerances_follow_the_papers_numbers():
    """A claim with a single number is tested at ±10 %; a stated bound is the bound itself."""
    for c in claims.CLAIMS:
        if c.basis.startswith("±10 %"):
            assert c.value is not None, c.id
            edge = 1.1 * abs(c.value)
            outside = c.value + 1.01 * (edge - abs(c.value)) * (1 if c.value > 0 else -1)
            assert c.holds(c.value) and not c.holds(outside), c.id
    assert claims.claim("sva.auc_keep").holds(0.91) and not claims.claim("sva.auc_keep").holds(0.909)
    assert claims.claim("sva.auc_remove").holds(0.25) and not claims.claim("sva.auc_remove").holds(0.251)
    assert claims.claim("sva.auc_flip").holds(0.10) and not claims.claim("sva.auc_flip").holds(0.101)
    remove = claims.claim("markov.remove_accuracy")
    assert remove.holds(0.237) and not remove.holds(0.262)
    # p_crit's interval lies inside what a fit to the paper's moduli (smallest 31) can return
    assert claims.claim("sweeps.p_crit").holds(23) and not claims.claim("sweeps.p_crit").holds(26)


def test_status_reads_the_settings_and_the_tolerance(tmp_path):
    claims.record(
        "markov_chain",
        {"markov.rank": [3, 3, 3], "markov.overlap": [0.03, 0.15], "markov.remove_accuracy": [0.25, 0.26]},
        settings={},
        notes={"markov.overlap": "one pair happens to be close"},
        root=tmp_path,
    )
    claims.record(
        "grokking_sweeps",
        {"sweeps.p_crit": 23.0, "sweeps.r2_p": 0.5},
        settings={"n_seeds": "3 (paper: 12)"},
        root=tmp_path,
    )
    claims.record(
        "subject_verb_agreement",
        {"sva.rank": {"a": 1}, "sva.pearson": {}},
        settings={"models": "[a] (paper: six)"},
        root=tmp_path,
    )
    rows = by_id(claims_page.claims_table(claims.load_records(tmp_path)))
    assert rows["markov.rank"]["status"] == "reproduced"
    assert rows["markov.remove_accuracy"]["status"] == "reproduced"
    # every number must pass: one overlap of 0.15 > 0.04 makes the claim differ, with its note
    assert rows["markov.overlap"]["status"] == "differs" and rows["markov.overlap"]["within tolerance"] == "no"
    assert rows["markov.overlap"]["note"] == "one pair happens to be close"
    assert rows["markov.overlap"]["ours"] == "0.03 – 0.15 (2 values)"
    assert rows["markov.cca_mean"]["status"] == "not run in this profile"
    assert rows["markov.cca_mean"]["ours"] == "—"
    # reduced settings are never "reproduced", whatever the numbers
    assert rows["sweeps.p_crit"]["status"] == "measured at reduced settings"
    assert rows["sweeps.p_crit"]["within tolerance"] == "yes" and rows["sweeps.r2_p"]["within tolerance"] == "no"
    assert rows["sweeps.p_crit"]["settings"] == "n_seeds: 3 (paper: 12)"
    assert rows["sweeps.Omega"]["status"] == "not run in this profile"
    assert rows["sva.pearson"]["status"] == "not run in this profile"  # one model: no pair to correlate
    assert rows["sva.rank"]["status"] == "measured at reduced settings"
    chapter = claims_page.chapter_table("grokking_sweeps", root=tmp_path)
    assert [r["id"] for r in chapter] == [c.id for c in claims.CLAIMS if c.chapter == "grokking_sweeps"]
    with pytest.raises(ValueError, match="no claims belong to chapter 'claims'"):
        claims_page.chapter_table("claims", root=tmp_path)


def test_claims_measured_on_a_recorded_run_are_judged_on_it_with_the_builds_value_beside(tmp_path):
    claims.record(
        "grokking_sweeps",
        {"sweeps.p_crit": 30.0, "sweeps.r2_p": 0.999},
        settings={"n_seeds": "3 (paper: 12)"},
        root=tmp_path,
    )
    claims.record(
        "grokking_sweeps",
        {"sweeps.p_crit": 23.5, "sweeps.Omega": 5000.0},
        settings={},
        root=tmp_path,
        source="recorded paper-profile run (commit abc1234)",
    )
    assert (tmp_path / "grokking_sweeps.recorded.json").exists()
    records = claims.load_records(tmp_path)
    assert set(records) == {"grokking_sweeps", "grokking_sweeps.recorded"}
    rows = by_id(claims_page.claims_table(records))
    p_crit = rows["sweeps.p_crit"]  # judged on the recorded run, at the paper's settings
    assert (p_crit["status"], p_crit["ours"], p_crit["settings"]) == ("reproduced", "23.5", "")
    assert p_crit["source"] == "recorded paper-profile run (commit abc1234)"
    assert p_crit["this build"] == "30 (measured at reduced settings)"
    assert rows["sweeps.Omega"]["status"] == "differs"  # 5000 is not within 10 % of 2770
    assert rows["sweeps.Omega"]["this build"] == "not run in this profile"
    # a claim the recorded run did not measure falls back to this build's value
    r2 = rows["sweeps.r2_p"]
    assert (r2["status"], r2["source"], r2["this build"]) == ("measured at reduced settings", "this build", "")
    # a chapter page reads its recorded values too, and says where they come from
    page = by_id(claims_page.chapter_table("grokking_sweeps", root=tmp_path))
    assert page["sweeps.p_crit"]["source"] == "recorded paper-profile run (commit abc1234)"
    assert (page["sweeps.r2_p"]["source"], page["sweeps.omega_exponent"]["source"]) == ("this build", "—")
    caption = claims_page.chapter_frame("grokking_sweeps", root=tmp_path).caption
    assert "Judged on the recorded paper-profile run (commit abc1234)" in caption
    with pytest.raises(ValueError, match="source must name the recorded run"):
        claims.record("grokking_sweeps", {}, settings={}, root=tmp_path, source=" ")


def test_deviations_name_every_setting_that_differs_from_the_papers():
    from corelib.experiments.modular_runs import ModularParams

    assert claims.deviations(ModularParams(), ModularParams()) == {}
    got = claims.deviations(
        ModularParams(long_epochs=4000, seeds=(1, 2), eval_every=5), ModularParams(), ignore=["eval_every"]
    )
    assert got == {"seeds": "[1, 2] (paper: [1031, 1032, 1033])", "long_epochs": "4000 (paper: 20000)"}
    assert claims.deviations({"lr": 1e-4, "extra": 1}, {"lr": 1e-3}) == {"lr": "0.0001 (paper: 0.001)"}


@pytest.mark.parametrize(
    "value, holds",
    [
        (3, True),
        (4, False),
        ([3, 4], False),
        ({"SmolLM2": 3, "Gemma-3": 3}, True),
        (float("nan"), False),
        (None, False),
        ([], False),
        (np.int64(3), True),
    ],
)
def test_holds_needs_every_number_finite_and_passing(value, holds):
    assert claims.claim("markov.rank").holds(value) is holds


def test_record_rejects_unknown_ids_foreign_claims_and_non_numbers(tmp_path):
    with pytest.raises(KeyError, match="unknown claim 'markov.rnak'; known claims: markov.accuracy"):
        claims.record("markov_chain", {"markov.rnak": 3}, settings={}, root=tmp_path)
    with pytest.raises(ValueError, match="belongs to chapter 'grokking_sweeps', not 'markov_chain'"):
        claims.record("markov_chain", {"sweeps.p_crit": 20}, settings={}, root=tmp_path)
    with pytest.raises(TypeError, match="must be a number"):
        claims.record("markov_chain", {"markov.rank": "three"}, settings={}, root=tmp_path)
    with pytest.raises(TypeError, match="settings must map names to text"):
        claims.record("markov_chain", {"markov.rank": 3}, settings={"lr": 1e-4}, root=tmp_path)
    assert not list(tmp_path.glob("*.json"))  # nothing written by a rejected call


def test_record_stores_the_profile_settings_and_plain_json(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_PROFILE", "book")
    returned = claims.record(
        "grokking_sweeps",
        {"sweeps.p_crit": np.float32(21.5), "sweeps.r2_p": 0.97},
        settings={"n_seeds": "3 (paper: 12)"},
        root=tmp_path,
    )
    assert returned is None  # a chapter cell ending with the call shows nothing
    data = json.loads((tmp_path / "grokking_sweeps.json").read_text())
    assert data["profile"] == "book" and data["chapter"] == "grokking_sweeps"
    assert data["values"] == {"sweeps.p_crit": 21.5, "sweeps.r2_p": 0.97}
    assert data["settings"] == {"n_seeds": "3 (paper: 12)"}


def test_a_stale_or_hand_written_record_is_reported(tmp_path):
    record = tmp_path / "markov_chain.json"
    save_json(
        record,
        {"chapter": "markov_chain", "profile": "book", "values": {"markov.retired": 1}, "settings": {}, "notes": {}},
    )
    with pytest.raises(ValueError, match="unknown claims.*rerun chapter 'markov_chain'"):
        claims.load_records(tmp_path)
    save_json(record, {"chapter": "markov_chain", "values": {}})
    with pytest.raises(ValueError, match="no 'values' and 'settings'.*rerun chapter 'markov_chain'"):
        claims.load_records(tmp_path)
    remove(record)
    (tmp_path / "modular_addition.json").write_text("{}")  # not written by the store: refused, not skipped
    with pytest.raises(StoreError, match="modular_addition.json is not recorded"):
        claims.load_records(tmp_path)


@pytest.mark.slow  # builds the whole book
def test_every_measured_claim_is_on_the_claims_page(built_book):
    root, _ = built_book
    records = claims.load_records(root / "results" / "claims")
    measured = {cid for data in records.values() for cid in data["values"]}
    # the paper's claims and the book's own findings
    expected_chapters = {c.chapter for c in (*claims.CLAIMS, *claims.FINDINGS)} & set(project.chapters(root))
    # and the chapters that show a recorded paper-scale run (here: smoke runs recorded by conftest.py,
    # and the window chapter's paper-clock window) recorded its values too
    shown = {
        f"{c}{claims.RECORDED_SUFFIX}"
        for c in ("modular_addition", "core_inflation", "grokking_sweeps", "interpretability_window")
    }
    assert set(records) == expected_chapters | shown, "every chapter with claims recorded them"
    html = (root / "_build" / "html" / "book" / "chapters" / "claims.html").read_text()
    missing = sorted(cid for cid in measured if f">{cid}<" not in html)
    assert not missing, f"measured claims missing from the claims page: {missing}"
    # and the page's counts are those of the table it shows
    rows = claims_page.claims_table(records)
    n_rep = sum(r["status"] == "reproduced" for r in rows)
    text = re.sub(r"<[^>]+>", "", html)
    assert re.search(rf"This build reproduced\s+{n_rep}\s+of them\.", text), "glued count of reproduced claims"
    # the smoke profile runs nothing at the paper's settings (the theory chapter checks an identity)
    assert all(
        r["status"] in ("measured at reduced settings", "not run in this profile")
        for r in rows
        if r["chapter"] != "grokking_theory"
    )
    assert all(data["profile"] == "smoke" for data in records.values())


def test_findings_are_judged_by_their_own_condition_whatever_the_settings(tmp_path):
    from acebook.claims_page import citation_rows, findings_table

    values = {"window.anneal_larger": 7.0, "window.anneal_smaller": -24.0}
    claims.record(
        "interpretability_window", values, settings={"seeds": "[1, 2] (paper: [1031, 1032, 1033])"}, root=tmp_path
    )
    rows = {r["id"]: r for r in findings_table(claims.load_records(tmp_path))}
    assert rows["window.anneal_larger"]["status"] == "holds"  # settings do not make a finding "reduced"
    assert rows["window.anneal_smaller"]["status"] == "does not hold"
    assert rows["window.removed_smaller"]["status"] == "not run in this profile"
    assert set(citation_rows(claims.load_records(tmp_path))) == {c.id for c in claims.CLAIMS + claims.FINDINGS}
    with pytest.raises(ValueError, match="belongs to chapter 'interpretability_window'"):
        claims.record("own_model", {"window.anneal_larger": 1.0}, settings={}, root=tmp_path)
