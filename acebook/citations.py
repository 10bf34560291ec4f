"""Sentences that cite a claim of the paper or a finding of the book, and whether they still hold.

A chapter's markdown cites a result inline with the MyST role ``{claim}``, naming the claim (or
finding) of :mod:`corelib.claims` and the status the sentence assumes::

    The sufficient dimension doubles instead of staying stable, {claim}`inflation.sufficient_stable <differs>`.

On the site the role renders the value and its status, judged as the claims page judges it
(:func:`acebook.claims_page.citation_rows`); when the run behind the page gives another status
than the sentence assumes, the page says so at its top (``book/_ext/claim_citations.py``).
:func:`find_citations` reads the citations of a source, for that extension and for the test that
checks every sentence against the book profile's results (:func:`check_citations`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from corelib.claims import claim

from .claims_page import CITABLE_STATUSES, satisfies

__all__ = [
    "Badge",
    "anchored",
    "Citation",
    "ROLE",
    "badge",
    "check_citations",
    "claim_anchor",
    "find_citations",
    "parse_target",
    "sentence_around",
]

ROLE = re.compile(r"\{claim\}`([^`]*)`")
_TARGET = re.compile(r"\s*(?P<id>[A-Za-z0-9_.]+)\s*(?:<(?P<declared>[^<>]+)>)?\s*")


@dataclass(frozen=True)
class Citation:
    """One ``{claim}`` role in a source file.

    Attributes:
        source: the file, relative to the project root where possible.
        line: its line number (1-based).
        sentence: the sentence around it, markdown comment markers removed.
        claim_id: the cited claim or finding.
        declared: the status the sentence assumes (one of
            :data:`acebook.claims_page.CITABLE_STATUSES`), or None when it declares none.
    """

    source: str
    line: int
    sentence: str
    claim_id: str
    declared: str | None


def parse_target(text: str) -> tuple[str, str | None]:
    """``"id <status>"`` → (id, status); raises ValueError naming the problem and the fix."""
    m = _TARGET.fullmatch(text)
    if not m:
        raise ValueError(
            f"{{claim}}`{text}`: write {{claim}}`<claim id> <status>`, e.g. {{claim}}`markov.rank <holds>`."
        )
    claim(m["id"])  # an unknown id raises, listing the known ones
    declared = None if m["declared"] is None else " ".join(m["declared"].split())
    if declared is not None and declared not in CITABLE_STATUSES:
        raise ValueError(
            f"{{claim}}`{text}`: unknown status {declared!r}; choose one of {', '.join(CITABLE_STATUSES)}."
        )
    return m["id"], declared


def sentence_around(text: str, start: int) -> str:
    """The sentence of ``text`` that contains position ``start`` (whitespace collapsed)."""
    # a sentence ends at ". ", at a blank line, or where a list item starts
    before = max(text.rfind(". ", 0, start), text.rfind("\n\n", 0, start), text.rfind("\n- ", 0, start))
    ends = [i for i in (text.find(". ", start), text.find("\n\n", start), text.find("\n- ", start)) if i >= 0]
    end = min(ends) + 1 if ends else len(text)
    return " ".join(text[before + 1 : end].split())


def _markdown_of(path: Path) -> str:
    """The text of a chapter source as its reader sees it: in a jupytext script, the ``# `` of the
    markdown cells' lines removed (lines kept, so line numbers stay right)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return text
    lines = text.splitlines()
    return "\n".join("" if ln.startswith("# %%") else ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines)


def find_citations(path: Path | str, root: Path | str | None = None) -> list[Citation]:
    """Every ``{claim}`` role in a chapter source (jupytext script or markdown page)."""
    path = Path(path)
    text = _markdown_of(path)
    name = str(path.relative_to(root)) if root is not None else str(path)
    out = []
    for m in ROLE.finditer(text):
        claim_id, declared = parse_target(m[1])
        line = text.count("\n", 0, m.start()) + 1
        out.append(Citation(name, line, sentence_around(text, m.start()), claim_id, declared))
    return out


def check_citations(citations: Iterable[Citation], rows: Mapping[str, Mapping]) -> list[str]:
    """The citations whose declared status the results ``rows`` (:func:`citation_rows`) do not
    give, each as a line naming the source, the sentence, the claim and both statuses; citations
    that declare no status are listed too (a sentence must say what it assumes)."""
    problems = []
    for c in citations:
        row = rows[c.claim_id]
        if c.declared is None:
            problems.append(f"{c.source}:{c.line}: {c.claim_id} declares no status: {c.sentence!r}")
        elif not satisfies(row, c.declared):
            problems.append(
                f"{c.source}:{c.line}: the sentence {c.sentence!r} assumes {c.claim_id} is {c.declared!r}; "
                f"the results give {row['status']!r} ({row['ours']}, within tolerance: {row['within tolerance']})"
            )
    return problems


# The mark and the short word a verdict shows, per status: a reader takes it in at a glance.
_FACES = {
    "reproduced": ("✓", "reproduced"),
    "holds": ("✓", "holds"),
    "differs": ("≠", "differs"),
    "does not hold": ("✗", "does not hold"),
    "measured at reduced settings": ("≈", "reduced settings"),
    "not run in this profile": ("○", "not run"),
}


@dataclass(frozen=True)
class Badge:
    """How one cited verdict shows on a page: a small badge after the phrase it supports.

    Attributes:
        claim_id: the cited claim or finding.
        mark: one character for the status (✓ ≠ ✗ ≈ ○), then ⚠ when the sentence's premise fails.
        word: the status in a word or two ("holds", "differs", "reduced settings").
        status: the full status, for the badge's colour (``claim-<status with dashes>``).
        tooltip: what the number is, its value, the paper's value and the bound, in one line.
        anchor: the id of the claim's row on the claims page (``claim-markov-rank``).
        premise_holds: whether the result gives the status the sentence assumes.
    """

    claim_id: str
    mark: str
    word: str
    status: str
    tooltip: str
    anchor: str
    premise_holds: bool

    @property
    def label(self) -> str:
        """The badge's visible text, e.g. "✓ holds" or "≠ differs ⚠"."""
        return f"{self.mark} {self.word}" + ("" if self.premise_holds else " ⚠")

    @property
    def css_class(self) -> str:
        return "claim-" + self.status.replace(" ", "-")


def claim_anchor(claim_id: str) -> str:
    """The HTML id of a claim's row on the claims page."""
    return "claim-" + re.sub(r"[^a-z0-9]+", "-", claim_id.lower()).strip("-")


def anchored(claim_id: str) -> str:
    """A claims-table cell for ``claim_id`` (HTML) holding the anchor its verdict badges link to."""
    return f'<span id="{claim_anchor(claim_id)}">{claim_id}</span>'


def badge(row: Mapping, declared: str | None) -> Badge:
    """The :class:`Badge` of a cited row of :func:`acebook.claims_page.citation_rows`, for a
    sentence that assumes the status ``declared`` (None: it assumes none)."""
    status = row["status"]
    mark, word = _FACES[status]
    parts = [f"{row['claim']}: {row['ours']}"]
    if not str(row["paper"]).startswith("—"):
        parts.append(f"paper: {row['paper']}")
    if row.get("tolerance"):
        parts.append(f"holds when: {row['tolerance']}")
    parts.append(status)
    tooltip = " · ".join(" ".join(str(p).split()) for p in parts)
    ok = declared is None or satisfies(row, declared)
    return Badge(row["id"], mark, word, status, tooltip, claim_anchor(row["id"]), ok)
