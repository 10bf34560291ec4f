"""What every typed record of the book shares: item access for code written against its JSON form.

The experiments return frozen dataclasses with documented fields. Notebooks, exercises and
students' code written when those records were dicts read them as ``record["field"]``;
:class:`ItemAccess` keeps that working and answers a misspelt field with the field meant, as
attribute access would not. New code reads attributes.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

__all__ = ["ItemAccess", "check_keys", "check_value", "nearest_name"]


def nearest_name(name: object, known: Sequence[str]) -> str:
    """The field ``name`` was probably meant to be, or the list of fields when none is close."""
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(known)}."


def check_keys(stored: object, what: str, required: Sequence[str], optional: Sequence[str] = (), *, fix: str) -> None:
    """Refuse a stored record that is not a JSON object, has a key not known (naming the field
    meant) or lacks a required key; ``fix`` says how to write the record again."""
    if not isinstance(stored, Mapping):
        raise TypeError(f"a stored {what} is a JSON object (dict), got {type(stored).__name__}: read it from its file.")
    known = [*required, *optional]
    unknown = [k for k in stored if k not in known]
    if unknown:
        raise ValueError(
            f"a stored {what} has the unknown key {unknown[0]!r}: {nearest_name(unknown[0], known)} "
            f"Correct the record, or read it with the version of corelib that wrote it."
        )
    missing = [k for k in required if k not in stored]
    if missing:
        raise ValueError(f"a stored {what} lacks {', '.join(map(repr, missing))}: the record is incomplete; {fix}.")


def check_value(
    what: str, name: str, value: object, fits: Callable[[object], bool], expected: str, *, fix: str
) -> None:
    """Refuse a stored field's value that ``fits`` rejects, naming the field and what it holds."""
    if not fits(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"a stored {what} has {name} = {shown}, which is not {expected}: the record is damaged; {fix}."
        )


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
