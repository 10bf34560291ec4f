"""Sentences that cite a claim or a finding are checked against the results they rest on.

Every ``{claim}`id <status>``` role in the chapters and pages parses, names a registered claim
or finding and declares the status its sentence assumes; and that status is the one the book
profile's build and the recorded paper-scale runs give (``recorded/book_claims.json``, written by
``python -m acebook.record claims --profile book`` after a build of the book profile).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acebook.citations import Citation, check_citations, find_citations, parse_target
from corelib.claims import CLAIMS, FINDINGS
from corelib.recorded import load_json

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "notebooks").glob("*.py")) + sorted((ROOT / "book").glob("*.md"))


def _all_citations() -> list[Citation]:
    return [c for path in SOURCES for c in find_citations(path, ROOT)]


def _row(status: str, within: str) -> dict:
    return {"status": status, "within tolerance": within, "ours": "1"}


def test_a_citation_is_parsed_with_its_sentence_and_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# T\n\nFirst sentence. The rank is 3, {claim}`markov.rank <holds>`. Next one.\n")
    (c,) = find_citations(page)
    assert (c.line, c.claim_id, c.declared) == (3, "markov.rank", "holds")
    assert c.sentence == "The rank is 3, {claim}`markov.rank <holds>`."


def test_jupytext_markdown_is_read_without_its_comment_marks(tmp_path):
    script = tmp_path / "ch.py"
    script.write_text("# %% [markdown]\n# The overlap is small,\n# {claim}`markov.overlap <reproduced>`.\n")
    (c,) = find_citations(script)
    assert c.sentence == "The overlap is small, {claim}`markov.overlap <reproduced>`."


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("markov.nope <holds>", "unknown claim 'markov.nope'"),
        ("markov.rank <fine>", "unknown status 'fine'"),
        ("markov rank", "write {claim}`<claim id> <status>`"),
    ],
)
def test_a_bad_citation_names_the_problem_and_the_fix(target, says):
    with pytest.raises((KeyError, ValueError), match=says):
        parse_target(target)


def test_a_citation_whose_status_changed_is_reported_with_its_sentence():
    cites = [
        Citation("ch.py", 7, "The core is small.", "markov.rank", "reproduced"),
        Citation("ch.py", 9, "It holds.", "markov.overlap", "holds"),
        Citation("ch.py", 11, "No status.", "markov.angles", None),
    ]
    rows = {
        "markov.rank": _row("differs", "no"),
        "markov.overlap": _row("measured at reduced settings", "yes"),
        "markov.angles": _row("reproduced", "yes"),
    }
    problems = check_citations(cites, rows)
    assert len(problems) == 2
    assert "ch.py:7" in problems[0] and "'The core is small.'" in problems[0] and "'differs'" in problems[0]
    assert "declares no status" in problems[1]


def test_every_citation_in_the_book_parses_and_declares_a_status():
    cites = _all_citations()
    assert len({c.source for c in cites}) >= 1
    assert not [c for c in cites if c.declared is None]


def test_every_sentence_holds_for_the_book_profile_and_the_recorded_runs():
    snapshot = load_json(ROOT / "recorded" / "book_claims.json")
    assert snapshot["profile"] == "book"
    rows = snapshot["rows"]
    missing = [c.id for c in CLAIMS + FINDINGS if c.id not in rows]
    assert not missing, (
        f"recorded/book_claims.json predates claims {missing}: rebuild the book, then "
        "`python -m acebook.record claims --profile book`"
    )
    problems = check_citations(_all_citations(), rows)
    assert not problems, "\n".join(problems)
