"""How a chapter reads: words, paragraphs, sentences and glued values, measured from its source.

A student reads a chapter in one sitting when its paragraphs are short, its sentences plain and
its numbers few at a time. :func:`measure` reads the markdown cells of a jupytext chapter
(``notebooks/<name>.py``) and returns a :class:`TextMeasures`; :data:`LIMITS` are the book's
bounds, which ``tests/test_chapter_style.py`` holds every chapter to; :func:`table` prints them
side by side (``python -m acebook.readability``).

What counts:

- A *paragraph* is a block of prose lines between blank lines, a list item, or the body of a
  directive (an admonition, a dropdown, a figure's caption). Headings, tables, code, math blocks
  and directive options are not prose.
- A *value* is a glued number (``{glue:text}``) or a verdict (``{claim}``) in the text.
- A role's text or an inline formula counts as one word.
- A sentence ends at ".", "!" or "?" followed by a space and a capital letter, a bracket or a
  quote.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass, fields
from pathlib import Path

__all__ = [
    "LIMITS",
    "MINUTES_PER_FIGURE",
    "WORDS_PER_MINUTE",
    "ChapterTime",
    "TextMeasures",
    "chapter_markdown",
    "chapter_time",
    "exercise_minutes",
    "measure",
    "paragraphs",
    "sentences",
    "table",
]

LIMITS = {"longest_paragraph": 150, "most_values": 6, "median_sentence": 25, "longest_sentence": 50}
"""Upper bounds per chapter: words in a paragraph, values in a paragraph, words in the median
sentence and in the longest one."""

_VALUE = re.compile(r"\{(?:glue(?::text|:any|:md)?|claim)\}`[^`]*`")
_ROLE = re.compile(r"\{[a-z:\-]+\}`[^`]*`")
_MATH = re.compile(r"\$[^$\n]+\$")
_FENCE = re.compile(r"^\s*(```+|:::+)(\{[^}]*\})?")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"”)]?\s+(?=[A-Z(“\"*\[])")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


@dataclass(frozen=True)
class TextMeasures:
    """The measures of one chapter's prose.

    Attributes:
        chapter: the chapter's name.
        words: words of prose in all.
        paragraphs: number of paragraphs.
        longest_paragraph: words in the longest paragraph.
        most_values: glued values and verdicts in the paragraph that has most.
        median_sentence: words in the median sentence.
        longest_sentence: words in the longest sentence.
        long_sentences: sentences over 40 words.
        figures: figures shown (``{glue:figure}`` directives).
    """

    chapter: str
    words: int
    paragraphs: int
    longest_paragraph: int
    most_values: int
    median_sentence: float
    longest_sentence: int
    long_sentences: int
    figures: int

    def over_limits(self) -> dict[str, float]:
        """The measures beyond :data:`LIMITS`, with their values (empty when within)."""
        return {k: getattr(self, k) for k, bound in LIMITS.items() if getattr(self, k) > bound}


def chapter_markdown(source: Path | str) -> str:
    """The markdown cells of a jupytext percent script, joined by blank lines (a ``.md`` page: its text)."""
    if Path(source).suffix == ".md":
        return Path(source).read_text(encoding="utf-8")
    cells, current, in_markdown = [], [], False
    for line in Path(source).read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            if in_markdown:
                cells.append("\n".join(current))
            current, in_markdown = [], "[markdown]" in line
        elif in_markdown:
            current.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    if in_markdown:
        cells.append("\n".join(current))
    return "\n\n".join(cells)


def _prose_lines(markdown: str) -> list[str]:
    """The lines that are prose, with a blank line wherever a block ends."""
    out, code, math, comment, directives = [], False, False, False, 0
    for line in markdown.splitlines():
        stripped = line.strip()
        fence = _FENCE.match(line)
        if fence:
            # A directive's body is prose; a code block is not; a bare fence closes what is open.
            if code:
                code = False
            elif fence.group(2):
                directives += 1
            elif stripped.strip("`:") or not directives:
                code = fence.group(1).startswith("`")
            else:
                directives -= 1
            out.append("")
            continue
        if code:
            continue
        if stripped.startswith("<!--"):
            comment = "-->" not in stripped
            out.append("")
            continue
        if comment:
            comment = "-->" not in stripped
            continue
        if stripped.startswith("$$"):
            math = not (math or (stripped.endswith("$$") and len(stripped) > 2))
            out.append("")
            continue
        if math:
            continue
        if stripped.startswith(("#", "|")) or re.match(r"^:[a-zA-Z_-]+:", stripped) or stripped == "---":
            out.append("")
            continue
        if _ITEM.match(line):
            out.append("")
            line = _ITEM.sub("", line)
        out.append(line)
    return out


def paragraphs(markdown: str) -> list[str]:
    """The prose paragraphs of ``markdown``, each on one line."""
    blocks, current = [], []
    for line in _prose_lines(markdown) + [""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            blocks.append(" ".join(current))
            current = []
    return blocks


def _words(text: str) -> list[str]:
    return _MATH.sub("F", _ROLE.sub("R", text)).split()


def sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph (roles and formulas kept whole)."""
    shielded = _MATH.sub("F", _ROLE.sub("R", paragraph))
    return [s for s in _SENTENCE_END.split(shielded) if s.strip()]


def measure(source: Path | str) -> TextMeasures:
    """The :class:`TextMeasures` of the chapter at ``source`` (``notebooks/<name>.py``)."""
    markdown = chapter_markdown(source)
    paras = paragraphs(markdown)
    lengths = [len(s.split()) for p in paras for s in sentences(p)] or [0]
    return TextMeasures(
        chapter=Path(source).stem,
        words=sum(len(_words(p)) for p in paras),
        paragraphs=len(paras),
        longest_paragraph=max((len(_words(p)) for p in paras), default=0),
        most_values=max((len(_VALUE.findall(p)) for p in paras), default=0),
        median_sentence=float(statistics.median(lengths)),
        longest_sentence=max(lengths),
        long_sentences=sum(n > 40 for n in lengths),
        figures=markdown.count("{glue:figure}"),
    )


WORDS_PER_MINUTE = 80
"""A careful first reading of technical prose with formulas: about a third of the speed at which
an adult reads a novel (the book's choice, written down here and in the README)."""
MINUTES_PER_FIGURE = 3
"""Time to read a multi-panel figure and its caption against the text."""

_EXERCISE = re.compile(r"```\{exercise\}[^\n]*\n:label:\s*(?P<label>\S+).*?about (?P<minutes>\d+) minutes", re.S)


def exercise_minutes(source: Path | str) -> dict[str, int]:
    """Each exercise's label and the minutes its marks give ("🔴🔴⚪⚪⚪ · 🔵🔵⚪⚪⚪ · about 15 minutes")."""
    found = {m["label"]: int(m["minutes"]) for m in _EXERCISE.finditer(chapter_markdown(source))}
    n = chapter_markdown(source).count("```{exercise}")
    if len(found) != n:
        raise ValueError(f"{source}: {n} exercises but {len(found)} with a label and 'about N minutes' in their marks")
    return found


def _round_up(minutes: float, step: int = 5) -> int:
    return max(step, int(-(-minutes // step) * step))


@dataclass(frozen=True)
class ChapterTime:
    """How long a chapter takes a student, in minutes.

    Attributes:
        reading: a careful reading: prose at :data:`WORDS_PER_MINUTE` and each figure
            :data:`MINUTES_PER_FIGURE`, rounded up to 5 minutes.
        exercises: the sum of the exercises' own marks.
    """

    reading: int
    exercises: int

    @property
    def total(self) -> int:
        """Reading and every exercise."""
        return self.reading + self.exercises


def chapter_time(chapter: Path | str) -> ChapterTime:
    """The :class:`ChapterTime` of a chapter: its name (``"markov_chain"``: ``notebooks/<name>.py`` of
    the project, wherever the kernel runs), the path of a jupytext source, or a ``.md`` page."""
    source = Path(chapter)
    if source.suffix not in (".py", ".md"):
        source = Path(__file__).resolve().parent.parent / "notebooks" / f"{chapter}.py"
    m = measure(source)
    reading = _round_up(m.words / WORDS_PER_MINUTE + MINUTES_PER_FIGURE * m.figures)
    return ChapterTime(reading, sum(exercise_minutes(source).values()))


def table(sources: list[Path]) -> str:
    """One row per chapter, one column per measure; a measure beyond its limit is starred."""
    names = [f.name for f in fields(TextMeasures)]
    rows = [names]
    for source in sources:
        m = measure(source)
        over = m.over_limits()
        rows.append([str(getattr(m, n)) + ("*" if n in over else "") for n in names])
    widths = [max(len(r[i]) for r in rows) for i in range(len(names))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
    limits = ", ".join(f"{k} <= {v}" for k, v in LIMITS.items())
    return "\n".join(lines) + f"\n(* beyond the limit; limits: {limits})"


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    print(table(sorted((root / "notebooks").glob("*.py")) if len(sys.argv) < 2 else [Path(a) for a in sys.argv[1:]]))
