"""The claims tables of the book: every registered claim next to what the chapters measured.

The registry, the recorded values and the statuses are :mod:`corelib.claims`; this module turns
them into the rows the claims page shows (:func:`claims_table`) and the table each chapter shows
of its own claims (:func:`chapter_frame`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from corelib.claims import CLAIMS, FINDINGS, RECORDED_SUFFIX, STATUSES, Claim, load_records, status

__all__ = [
    "CITABLE_STATUSES",
    "chapter_frame",
    "chapter_table",
    "citation_rows",
    "claims_table",
    "findings_table",
    "format_value",
    "satisfies",
]

# What a sentence may declare it assumes of a cited claim or finding: a status, or "holds" /
# "fails" (within tolerance or not, at whatever settings it was measured).
CITABLE_STATUSES = (*STATUSES, "holds", "does not hold", "fails")


def format_value(value: Any) -> str:
    """A measured value as a table cell: a number to 3 significant digits, the range of a list,
    ``label: number`` pairs of a mapping, ``n/a`` for a missing or non-finite number."""

    def one(v):
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return "n/a"
        if isinstance(v, int) or float(v).is_integer() and abs(v) < 1e6:
            return f"{int(v)}"
        return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.1e}"

    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {one(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        nums = [v for v in value if v is not None]
        if len(nums) > 1 and len(set(nums)) > 1:
            return f"{one(min(nums))} – {one(max(nums))} ({len(value)} values)"
        return one(nums[0]) if nums else "n/a"
    return one(value)


def _row(c: Claim, data: Mapping[str, Any], build: Mapping[str, Any]) -> dict:
    """The row of claim ``c`` judged on ``data``; ``build`` is this build's record (the same as
    ``data`` unless ``data`` comes from a recorded run)."""
    state, within = status(c, data)
    measured = within is not None
    settings = data.get("settings", {})
    build_state, _ = status(c, build)
    return {
        "id": c.id,
        "chapter": c.chapter,
        "claim": c.text,
        "paper": c.paper,
        "ours": format_value(data["values"][c.id]) if measured else "—",
        "tolerance": c.tolerance,
        "within tolerance": "—" if within is None else ("yes" if within else "no"),
        "status": state,
        "basis": c.basis,
        "settings": "; ".join(f"{k}: {v}" for k, v in settings.items()) if measured else "",
        "profile": data.get("profile", "—") if measured else "—",
        "source": (data.get("source") or "this build") if measured else "—",
        "this build": _build_cell(c, build, build_state) if build is not data else "",
        "note": data.get("notes", {}).get(c.id, ""),
    }


def _build_cell(c: Claim, build: Mapping[str, Any], state: str) -> str:
    """This build's value of a claim judged on a recorded run, with its status."""
    if state == STATUSES[-1]:
        return state
    return f"{format_value(build['values'][c.id])} ({state})"


def _judged(c: Claim, records: Mapping[str, dict]) -> dict:
    build = records.get(c.chapter, {})
    recorded = records.get(c.chapter + RECORDED_SUFFIX, {})
    return _row(c, recorded, build) if status(c, recorded)[1] is not None else _row(c, build, build)


def findings_table(records: Mapping[str, dict] | None = None) -> list[dict]:
    """One row per finding of :data:`corelib.claims.FINDINGS`, as :func:`claims_table` has per claim
    (status ``holds`` / ``does not hold`` / ``not run in this profile``)."""
    records = load_records() if records is None else records
    return [_judged(c, records) for c in FINDINGS]


def citation_rows(records: Mapping[str, dict] | None = None) -> dict[str, dict]:
    """Every claim and finding a sentence can cite, ``{id: row}`` (rows of :func:`claims_table`
    and :func:`findings_table`)."""
    records = load_records() if records is None else records
    return {r["id"]: r for r in claims_table(records) + findings_table(records)}


def satisfies(row: Mapping[str, Any], declared: str) -> bool:
    """Whether a cited row has the status a sentence declares (one of :data:`CITABLE_STATUSES`)."""
    if declared == "holds":
        return row["within tolerance"] == "yes"
    if declared in ("fails", "does not hold"):
        return row["within tolerance"] == "no"
    return row["status"] == declared


def claims_table(records: Mapping[str, dict] | None = None) -> list[dict]:
    """One row per registered claim: paper value, ours, tolerance and its basis, status, settings.

    ``records`` (``{name: record}``) defaults to :func:`corelib.claims.load_records`; the
    statuses are those of :func:`corelib.claims.status`. A claim measured on a recorded run (a
    record named ``<chapter>.recorded``) is judged on it, with this build's own value beside it.
    """
    records = load_records() if records is None else records
    return [_judged(c, records) for c in CLAIMS]


def chapter_table(chapter: str, root: Path | str | None = None) -> list[dict]:
    """The rows of :func:`claims_table` for one chapter, from its own record only.

    ``root``: folder of the recorded claims (default: ``claims/`` of the results root).
    """
    if not any(c.chapter == chapter for c in CLAIMS):
        raise ValueError(
            f"no claims belong to chapter {chapter!r}; chapters with claims: {sorted({c.chapter for c in CLAIMS})}."
        )
    records = load_records(root, chapters=[chapter])
    return [r for r in claims_table(records) if r["chapter"] == chapter]


def chapter_frame(chapter: str, root: Path | str | None = None):
    """:func:`chapter_table` as a styled pandas table for a chapter page, its settings in the caption."""
    import pandas as pd

    rows = chapter_table(chapter, root)
    columns = ["claim", "paper", "ours", "tolerance", "within tolerance", "status", "basis"]
    sources = sorted({r["source"] for r in rows if r["source"] not in ("—", "this build")})
    if sources:
        columns += ["source", "this build"]
    frame = pd.DataFrame(rows).set_index("id")[columns]
    own = [r for r in rows if r["source"] == "this build"]
    settings = next((r["settings"] for r in own if r["settings"]), "")
    caption = (
        f"Measured at settings other than the paper's: {settings}."
        if settings
        else "Measured at the paper's settings."
        if own
        else "Not measured in this run."
    )
    if sources:
        caption = (
            f"Judged on the {'; '.join(sources)} where it measured the claim; the column 'this "
            "build' gives the value this build computed, with its status at this build's settings."
        )
    return frame.style.set_caption(caption).set_properties(**{"text-align": "left"})
