"""What every typed record of the book shares: item access for code written against its JSON form,
and the checks that read a stored record's JSON.

The experiments return frozen dataclasses with documented fields. Notebooks, exercises and
students' code written when those records were dicts read them as ``record["field"]``;
:class:`ItemAccess` keeps that working and answers a misspelt field with the field meant, as
attribute access would not. New code reads attributes.

A record's ``from_json`` reads a file from disk, which nothing vouches for: :func:`check_format`
refuses a format this version does not read, :func:`check_keys` a key not known (naming the field
meant) or one missing, and :func:`check_value` a value its field cannot hold, naming the field.
The predicates (``is_int``, ``is_share``, :func:`list_of`, ...) say what a field may hold; a
:data:`Spec` pairs one with the words for it that a refusal shows.

:class:`StoredRecord` builds a record's ``from_json`` and ``to_json`` from one table of field
readers per record (:func:`leaf`, :func:`nested`, :func:`each`, :func:`named`: a plain value, one
record, a list of records, records by name); it iterates over its field names, as the dicts the
records once were did. The steering run's records and the own-model chapter's are built so.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any, ClassVar, TypeVar

__all__ = [
    "Fits",
    "ItemAccess",
    "Reader",
    "Spec",
    "StoredRecord",
    "by_name",
    "check_fields",
    "check_format",
    "check_keys",
    "check_value",
    "each",
    "is_complex_pairs",
    "is_finite",
    "is_finite_list",
    "is_int",
    "is_list",
    "is_natural",
    "is_object",
    "is_rank",
    "is_real",
    "is_share",
    "leaf",
    "list_of",
    "named",
    "nearest_name",
    "nested",
    "read_versioned",
    "same_lengths",
]

Fits = Callable[[object], bool]
"""Whether a stored value is one a field can hold."""

Spec = tuple[Fits, str]
"""A field's :data:`Fits` and what such a value is, in words, for the refusal of one that is not."""


def is_int(v: object) -> bool:
    """A whole number; not a bool (JSON's ``true`` is no number, though Python counts it an int)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: object) -> bool:
    """A number (int or float, NaN and the infinities included); not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_finite(v: object) -> bool:
    """A finite number (neither NaN nor infinite); not a bool."""
    return is_real(v) and math.isfinite(v)


def is_share(v: object) -> bool:
    """A share: a finite number in [0, 1] (an accuracy, an AUC, a fraction)."""
    return is_finite(v) and 0.0 <= v <= 1.0


def is_rank(v: object) -> bool:
    """A rank or a dimension: a whole number >= 1; not a bool."""
    return is_int(v) and v >= 1


def is_natural(v: object) -> bool:
    """A whole number >= 0 (an epoch, a seed, an index); not a bool."""
    return is_int(v) and v >= 0


def is_list(v: object) -> bool:
    """A JSON list (a Python list), whatever its items."""
    return isinstance(v, list)


def is_object(v: object) -> bool:
    """A JSON object (a mapping), whatever it holds."""
    return isinstance(v, Mapping)


def list_of(fits: Fits) -> Fits:
    """Whether a value is a JSON list (a Python list) whose every item ``fits``."""
    return lambda v: isinstance(v, list) and all(fits(x) for x in v)


def by_name(fits: Fits) -> Fits:
    """Whether a value is a JSON object whose keys are strings and whose every value ``fits``."""
    return lambda v: isinstance(v, Mapping) and all(isinstance(k, str) and fits(x) for k, x in v.items())


def is_finite_list(v: object) -> bool:
    """A list of finite numbers."""
    return isinstance(v, list) and all(is_finite(x) for x in v)


def is_complex_pairs(v: object) -> bool:
    """A list of complex numbers as JSON keeps them: ``[real, imaginary]`` pairs of finite numbers."""
    return isinstance(v, list) and all(is_finite_list(e) and len(e) == 2 for e in v)


def nearest_name(name: object, known: Sequence[str]) -> str:
    """The field ``name`` was probably meant to be, or the list of fields when none is close."""
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
    return f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(known)}."


def check_format(stored: object, what: str, reads: int) -> None:
    """Refuse a stored record in a format other than ``reads``, the one this version reads. Format
    1 has no marker (the records written before formats were numbered); a later one has a
    ``"format"`` key."""
    version = stored.get("format", 1) if isinstance(stored, Mapping) else 1
    if version != reads:
        raise ValueError(
            f"a stored {what} is in format {version!r}; this corelib reads format {reads}: "
            f"update corelib to the version that wrote it."
        )


def check_keys(
    stored: object,
    what: str,
    required: Sequence[str],
    optional: Sequence[str] = (),
    *,
    fix: str,
    type_fix: str = "read it from its file",
    unknown_fix: str = "Correct the record, or read it with the version of corelib that wrote it",
) -> None:
    """Refuse a stored record that is not a JSON object, has a key not known (naming the field
    meant) or lacks a required key; ``fix`` says how to write the record again, ``type_fix`` and
    ``unknown_fix`` what to do about the first two (each written as one clause, without its full stop)."""
    if not isinstance(stored, Mapping):
        raise TypeError(f"a stored {what} is a JSON object (dict), got {type(stored).__name__}: {type_fix}.")
    known = [*required, *optional]
    unknown = [k for k in stored if k not in known]
    if unknown:
        raise ValueError(
            f"a stored {what} has the unknown key {unknown[0]!r}: {nearest_name(unknown[0], known)} {unknown_fix}."
        )
    missing = [k for k in required if k not in stored]
    if missing:
        raise ValueError(f"a stored {what} lacks {', '.join(map(repr, missing))}: the record is incomplete; {fix}.")


def check_value(what: str, name: str, value: object, fits: Fits, expected: str, *, fix: str) -> None:
    """Refuse a stored field's value that ``fits`` rejects, naming the field and what it holds."""
    if not fits(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"a stored {what} has {name} = {shown}, which is not {expected}: the record is damaged; {fix}."
        )


def check_fields(
    stored: object, what: str, specs: Mapping[str, Spec], optional: Sequence[str] = (), *, fix: str
) -> None:
    """Refuse ``stored`` unless its keys are those of ``specs`` and ``optional`` (which may be
    absent) and each value with a spec fits it (:func:`check_keys`, :func:`check_value`)."""
    check_keys(stored, what, [k for k in specs if k not in optional], optional, fix=fix)
    for name, value in stored.items():
        if name in specs:
            check_value(what, name, value, *specs[name], fix=fix)


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


# --------------------------------------------------------------------------- records read by field

Reader = Callable[[object, str, str, str], Any]
"""How a record reads one stored field: ``(value, what, name, fix) -> field value``, refusing a
value the field cannot hold (``what``: the record, for the message; ``fix``: how to mend it)."""

R = TypeVar("R", bound="StoredRecord")


def _tuples(value: Any) -> Any:
    """A JSON list as a tuple (its items too) and a JSON object's values likewise: no list is kept."""
    if isinstance(value, Mapping):
        return {k: _tuples(v) for k, v in value.items()}
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _json(value: Any) -> Any:
    """A field's value in its JSON form: records as their objects, tuples as lists."""
    if isinstance(value, StoredRecord):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return value


def leaf(fits: Fits, expected: str, *, as_stored: bool = False) -> Reader:
    """A field holding a plain JSON value that ``fits`` (``expected``: it in words); its lists are
    kept as tuples unless ``as_stored`` (a free-form object kept as read)."""

    def read(value: object, what: str, name: str, fix: str) -> Any:
        check_value(what, name, value, fits, expected, fix=fix)
        return value if as_stored else _tuples(value)

    return read


def nested(cls: type[StoredRecord]) -> Reader:
    """A field holding one record of ``cls``."""
    return lambda value, what, name, fix: cls.read(value, f"{what}'s {name}", fix)


def each(cls: type[StoredRecord]) -> Reader:
    """A field holding a list of records of ``cls`` (kept as a tuple)."""

    def read(value: object, what: str, name: str, fix: str) -> tuple:
        check_value(what, name, value, is_list, "a list", fix=fix)
        return tuple(cls.read(v, f"{what}'s {name}[{k}]", fix) for k, v in enumerate(value))

    return read


def named(cls: type[StoredRecord]) -> Reader:
    """A field holding records of ``cls`` by name (a JSON object)."""

    def read(value: object, what: str, name: str, fix: str) -> dict:
        check_value(what, name, value, by_name(lambda _: True), "a JSON object (dict) by name", fix=fix)
        return {k: cls.read(v, f"{what}'s {name}[{k!r}]", fix) for k, v in value.items()}

    return read


def same_lengths(what: str, lengths: Mapping[str, int], n: int, of: str, fix: str) -> None:
    """Refuse any of ``lengths`` (field -> its length) that is not ``n``, one per ``of``."""
    for name, length in lengths.items():
        check_value(what, name, length, lambda x: x == n, f"one value per {of} ({n})", fix=fix)


class StoredRecord(ItemAccess):
    """A frozen dataclass record read from and written to its JSON form by the readers of its
    fields (``READERS``, one per field, in the fields' order); it iterates over its field names.

    ``WHAT`` names the record in a refusal and ``FIX`` says how to mend its file. A record stored
    in a file of its own sets ``FORMAT``, the format of that file this version reads
    (:func:`read_versioned`); a part of a record, read inside it, leaves it None.
    """

    __slots__ = ()
    READERS: ClassVar[Mapping[str, Reader]] = {}
    WHAT: ClassVar[str] = "record"
    FIX: ClassVar[str] = "restore the file the record was read from"
    FORMAT: ClassVar[int | None] = None

    @classmethod
    def read(cls: type[R], stored: object, what: str, fix: str) -> R:
        """The record from its stored JSON object (``what``: where it sits, for the messages)."""
        check_keys(stored, what, list(cls.READERS), fix=fix)
        record = cls(**{name: read(stored[name], what, name, fix) for name, read in cls.READERS.items()})
        record.check(what, fix)
        return record

    @classmethod
    def from_json(cls: type[R], stored: Mapping[str, Any]) -> R:
        """The record from its stored JSON (:meth:`to_json`), in the format this version reads
        (``FORMAT``); refuses unknown or missing keys, values its fields cannot hold, naming the
        field, and fields that disagree with one another (:meth:`check`)."""
        if cls.FORMAT is None:
            return cls.read(stored, cls.WHAT, cls.FIX)
        return read_versioned(cls, stored, cls.FORMAT)

    def check(self, what: str, fix: str) -> None:
        """Refuse fields that disagree with one another (lengths); nothing to check by default."""

    def to_json(self) -> dict[str, Any]:
        """The stored form: every field as JSON, records as their objects, tuples as lists."""
        return {f.name: _json(getattr(self, f.name)) for f in fields(self)}

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())


def read_versioned(cls: type[R], stored: object, version: int) -> R:
    """A top-level record of ``cls`` from a stored file in format ``version`` (1: no marker)."""
    check_format(stored, cls.WHAT, version)
    if isinstance(stored, Mapping) and "format" in stored:
        stored = {k: v for k, v in stored.items() if k != "format"}
    return cls.read(stored, cls.WHAT, cls.FIX)
