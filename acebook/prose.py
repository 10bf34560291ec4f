"""Numbers written into a chapter's prose by hand, so that a test can tell them from results.

A number the book measures is glued (myst-nb ``glue``): it follows the run that produced it, on
this machine and profile or another. The prose may still write numbers that are not results of a
run: quotes of the paper, properties of a model or a task, definitions and fixed thresholds. Each
chapter declares those in its jupytext header, under ``written_numbers``, as the exact phrases that
contain them (:func:`declared`); :func:`written_numbers` finds every numeral of a chapter's prose,
and :func:`undeclared` the ones no declared phrase covers, so a result typed into a sentence is
caught (``tests/test_prose_numbers.py``).

Not prose here: math, code, roles and glue, directive options, headings, list markers, the
chapter's reading time, references to a figure, table or section, and the exercises with their
hints and solutions (an exercise states its expected result for fixed inputs, as a textbook does).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import jupytext

__all__ = ["WrittenNumber", "declared", "prose", "undeclared", "written_numbers"]

_BLOCK = re.compile(r"^(`{3,}|:{3,})\{(exercise|solution|admonition)\}([^\n]*)\n(.*?)^\1\s*$", re.S | re.M)
_DROP = (
    re.compile(r"\$\$.*?\$\$", re.S),  # display math
    re.compile(r"(?<!\\)\$(?:[^$\n]|\n(?!\s*\n))+\$"),  # inline math, which may span lines
    re.compile(r"\{[\w:-]+\}`[^`]*`"),  # roles: glue, claim, doc, ref, numref
    re.compile(r"`[^`\n]*`"),  # code
    re.compile(r"<!--.*?-->", re.S),  # comments
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"^\s*#+ .*$", re.M),  # headings
    re.compile(r"^\s*:[\w-]+:.*$", re.M),  # directive options
    re.compile(r"^\s*\(?[\w-]+\)=\s*$", re.M),  # labels
    re.compile(r"^\s*\*\*Time\*\*.*$", re.M),  # the reading time, an estimate
    re.compile(r"^\s*\d+\.\s", re.M),  # numbered-list markers
    # references to the paper's or the book's figures, tables, sections, equations, appendices
    re.compile(
        r"\b(?:Figures?|Tables?|Sections?|Eqs?\.|Equations?|Appendix|Appendices|panels?)\s+[A-Z]?\d+[a-z]?"
        r"(?:\s*(?:–|-|,|and)\s*[A-Z]?\d+[a-z]?)*"
    ),  # fmt: skip
)
_NUMBER = re.compile(r"(?<![\w.\-–/^])\d+(?:[.,]\d+)*(?: \d{3})*(?![\w\-/^])")


@dataclass(frozen=True)
class WrittenNumber:
    """A numeral in a chapter's prose.

    Attributes:
        number: the numeral as written (``"49 152"``, ``"0.25"``).
        context: the words around it, whitespace collapsed, for the message of a failing test.
    """

    number: str
    context: str


def prose(source: Path | str) -> str:
    """The prose of a jupytext chapter: its markdown cells without what is not prose (see above),
    whitespace collapsed."""
    nb = jupytext.read(source)
    text = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    text = _BLOCK.sub(lambda m: "" if m[2] != "admonition" or "dropdown" in m[4] else m[4], text)
    for pattern in _DROP:
        text = pattern.sub(" ", text)
    return " ".join(text.split())


def declared(source: Path | str) -> list[str]:
    """The phrases with numbers that the chapter at ``source`` writes by hand (its jupytext header's
    ``written_numbers``: a list of strings)."""
    phrases = jupytext.read(source).metadata.get("written_numbers", [])
    if not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases):
        raise ValueError(f"{source}: written_numbers in the jupytext header must be a list of phrases (strings)")
    return phrases


def written_numbers(text: str) -> list[WrittenNumber]:
    """Every numeral of ``text`` (prose as :func:`prose` returns it), in order."""
    return [WrittenNumber(m[0], text[max(0, m.start() - 50) : m.end() + 30].strip()) for m in _NUMBER.finditer(text)]


def undeclared(text: str, declared: Iterable[str]) -> list[WrittenNumber]:
    """The numerals of ``text`` that no phrase of ``declared`` covers.

    Each declared phrase must occur in ``text`` (whitespace collapsed); a phrase that does not is a
    ValueError, so a declaration cannot outlive the sentence it was written for.
    """
    for phrase in declared:
        phrase = " ".join(phrase.split())
        if phrase not in text:
            raise ValueError(f"the declared phrase {phrase!r} is not in the chapter's prose: update or remove it")
        text = text.replace(phrase, " ")
    return written_numbers(text)
