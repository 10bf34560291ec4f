"""What every typed record of the book shares: item access for code written against its JSON form.

The experiments return frozen dataclasses with documented fields. Notebooks, exercises and
students' code written when those records were dicts read them as ``record["field"]``;
:class:`ItemAccess` keeps that working and answers a misspelt field with the field meant, as
attribute access would not. New code reads attributes.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

__all__ = ["ItemAccess", "nearest_name"]


def nearest_name(name: object, known: Sequence[str]) -> str:
    """The field ``name`` was probably meant to be, or the list of fields when none is close."""
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(known)}."


class ItemAccess:
    """``record["field"]`` for a dataclass record, as its JSON form is read."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        names = [f.name for f in fields(self)]
        if key not in names:
            raise KeyError(f"{type(self).__name__} has no field {key!r}: {nearest_name(key, names)}")
        return getattr(self, key)

    def keys(self) -> list[str]:
        """The record's field names, as a dict's keys."""
        return [f.name for f in fields(self)]

    def __contains__(self, key: object) -> bool:
        return key in self.keys()
