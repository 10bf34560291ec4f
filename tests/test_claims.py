"""The claims registry, recorded values, statuses, and the claims page of the smoke book."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from corelib import claims, runner


def by_id(rows: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in rows}


def test_registry_ids_are_unique_and_belong_to_chapters_of_the_book():
    ids = [c.id for c in claims.CLAIMS]
    assert len(ids) == len(set(ids))
    chapters = set(runner.chapters())
    for c in claims.CLAIMS:
        assert c.chapter in chapters | {"subject_verb_agreement"}, c.id
        assert c.text and c.paper and c.tolerance


def test_tolerances_decide_the_status(tmp_path):
    claims.record("markov_chain", {"markov.rank": [3, 3, 3], "markov.overlap": [0.02, 0.15],
                                   "markov.remove_accuracy": [0.25, 0.26]},
                  notes={"markov.overlap": "one pair happens to be close"}, root=tmp_path)
    rows = by_id(claims.claims_table(claims.load_records(tmp_path)))
    assert rows["markov.rank"]["status"] == "reproduced"
    assert rows["markov.remove_accuracy"]["status"] == "reproduced"
    # every number must pass: one overlap of 0.15 > 0.10 makes the claim differ, with its note
    assert rows["markov.overlap"]["status"] == "differs"
    assert rows["markov.overlap"]["note"] == "one pair happens to be close"
    assert rows["markov.overlap"]["ours"] == "0.02 – 0.15 (2 values)"
    assert rows["markov.cca_mean"]["status"] == "not run in this profile"
    assert rows["markov.cca_mean"]["ours"] == "—"
    assert rows["sweeps.p_crit"]["status"] == "not run in this profile"
    assert rows["markov.rank"]["note"] == ""  # notes are shown for claims that differ


@pytest.mark.parametrize("value, holds", [
    (3, True), (4, False), ([3, 4], False), ({"SmolLM2": 3, "Gemma-3": 3}, True),
    (float("nan"), False), (None, False), ([], False), (np.int64(3), True),
])
def test_holds_needs_every_number_finite_and_passing(value, holds):
    assert claims.claim("markov.rank").holds(value) is holds


def test_boundaries_of_tolerances():
    assert claims.claim("sweeps.p_crit").holds(10) and claims.claim("sweeps.p_crit").holds(31)
    assert not claims.claim("sweeps.p_crit").holds(31.01)
    assert claims.claim("inflation.arm_dim_gap").holds(0.5)
    assert not claims.claim("inflation.arm_dim_gap").holds(0)
    assert claims.claim("markov.accuracy").holds(0.741) and not claims.claim("markov.accuracy").holds(0.739)


def test_record_rejects_unknown_ids_foreign_claims_and_non_numbers(tmp_path):
    with pytest.raises(KeyError, match="unknown claim 'markov.rnak'; known claims: markov.accuracy"):
        claims.record("markov_chain", {"markov.rnak": 3}, root=tmp_path)
    with pytest.raises(ValueError, match="belongs to chapter 'grokking_sweeps', not 'markov_chain'"):
        claims.record("markov_chain", {"sweeps.p_crit": 20}, root=tmp_path)
    with pytest.raises(TypeError, match="must be a number"):
        claims.record("markov_chain", {"markov.rank": "three"}, root=tmp_path)
    assert not list(tmp_path.glob("*.json"))  # nothing written by a rejected call


def test_record_stores_the_profile_and_plain_json(tmp_path, monkeypatch):
    monkeypatch.setenv("ACE_PROFILE", "book")
    path = claims.record("grokking_sweeps", {"sweeps.p_crit": np.float32(21.5), "sweeps.r2_p": 0.97},
                         root=tmp_path)
    data = json.loads(path.read_text())
    assert data["profile"] == "book" and data["chapter"] == "grokking_sweeps"
    assert data["values"] == {"sweeps.p_crit": 21.5, "sweeps.r2_p": 0.97}


def test_a_stale_record_with_unknown_claims_is_reported(tmp_path):
    (tmp_path / "markov_chain.json").write_text(json.dumps(
        {"chapter": "markov_chain", "profile": "book", "values": {"markov.retired": 1}, "notes": {}}))
    with pytest.raises(ValueError, match="unknown claims.*rerun chapter 'markov_chain'"):
        claims.load_records(tmp_path)


def test_every_measured_claim_is_on_the_claims_page(built_book):
    root, _ = built_book
    records = claims.load_records(root / "results" / "claims")
    measured = {cid for data in records.values() for cid in data["values"]}
    expected_chapters = {c.chapter for c in claims.CLAIMS} & set(runner.chapters(root))
    assert set(records) == expected_chapters, "every chapter with claims recorded them"
    html = (root / "_build" / "html" / "book" / "chapters" / "claims.html").read_text()
    missing = sorted(cid for cid in measured if f">{cid}<" not in html)
    assert not missing, f"measured claims missing from the claims page: {missing}"
    # and the page's counts are those of the table it shows
    rows = claims.claims_table(records)
    n_rep = sum(r["status"] == "reproduced" for r in rows)
    text = re.sub(r"<[^>]+>", "", html)
    assert re.search(rf"this build reproduced\s+{n_rep},", text), "glued count of reproduced claims"
    assert all(data["profile"] == "smoke" for data in records.values())
