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

from corelib.claims import CLAIMS, Claim, load_records, status

__all__ = ["chapter_frame", "chapter_table", "claims_table", "format_value"]


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


def _row(c: Claim, data: Mapping[str, Any]) -> dict:
    state, within = status(c, data)
    measured = within is not None
    settings = data.get("settings", {})
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
        "note": data.get("notes", {}).get(c.id, ""),
    }


def claims_table(records: Mapping[str, dict] | None = None) -> list[dict]:
    """One row per registered claim: paper value, ours, tolerance and its basis, status, settings.

    ``records`` (``{chapter: record}``) defaults to :func:`corelib.claims.load_records`; the
    statuses are those of :func:`corelib.claims.status`.
    """
    records = load_records() if records is None else records
    return [_row(c, records.get(c.chapter, {})) for c in CLAIMS]


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
    frame = pd.DataFrame(rows).set_index("id")[
        ["claim", "paper", "ours", "tolerance", "within tolerance", "status", "basis"]
    ]
    settings = next((r["settings"] for r in rows if r["settings"]), "")
    caption = (
        f"Measured at settings other than the paper's: {settings}."
        if settings
        else "Measured at the paper's settings."
        if any(r["ours"] != "—" for r in rows)
        else "Not measured in this run."
    )
    return frame.style.set_caption(caption).set_properties(**{"text-align": "left"})
