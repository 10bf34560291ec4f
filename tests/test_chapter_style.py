"""The chapters read like lectures: short code cells, and no code line that scrolls sideways.

Every ``notebooks/*.py`` (jupytext percent format) is cut into cells. Counting code lines only
(comments and blank lines aside):

- no code cell is longer than ``MAX_CELL_LINES``, except the ``parameters`` cell: papermill reads
  one parameter per line, so that cell is as long as the chapter has parameters;
- the median code cell over all chapters is at most ``MAX_MEDIAN_LINES``.

Every line of a code cell, comments and the parameters cell included, is at most
``MAX_LINE_CHARS`` characters. That is what the rendered page shows without scrolling at a
window width of 1280 px: measured in Chromium on the built book (sphinx-book-theme 1.3 with the
page's table of contents on the right), a code block's text area is 640 px wide, 622 px in a
cell collapsed behind a ``hide-input`` toggle once opened, and the code font (14 px monospace)
is 8.43 px per character: 73 characters fit in either.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("*.py"))
MAX_CELL_LINES = 15
MAX_MEDIAN_LINES = 8
MAX_LINE_CHARS = 73


def code_cells(path: Path) -> list[tuple[int, str, list[str]]]:
    """(first line number, cell marker, lines) of every code cell of a percent-format script."""
    cells, current = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("# %%"):
            current = None if "[markdown]" in line else (number, line, [])
            if current is not None:
                cells.append(current)
        elif current is not None:
            current[2].append(line)
    return cells


def code_lines(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]


def test_the_cells_are_found():
    assert len(CHAPTERS) >= 8
    assert all(code_cells(path) for path in CHAPTERS)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_code_cell_is_long(path):
    long = [
        f"{path.name}:{number} has {len(code_lines(lines))} code lines"
        for number, marker, lines in code_cells(path)
        if '"parameters"' not in marker and len(code_lines(lines)) > MAX_CELL_LINES
    ]
    assert not long, "\n".join(long)


def test_the_median_code_cell_is_short():
    sizes = [len(code_lines(lines)) for path in CHAPTERS for _, _, lines in code_cells(path) if code_lines(lines)]
    assert statistics.median(sizes) <= MAX_MEDIAN_LINES


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_code_line_scrolls_sideways(path):
    wide = [
        f"{path.name}:{number + k + 1} has {len(line)} characters"
        for number, _, lines in code_cells(path)
        for k, line in enumerate(lines)
        if len(line) > MAX_LINE_CHARS
    ]
    assert not wide, "\n".join(wide)


def test_the_modular_chapters_share_their_settings_in_every_profile():
    from acebook.project import profiles

    for profile, notebooks in profiles(ROOT).items():
        emergence, inflation = notebooks.get("modular_addition", {}), notebooks.get("core_inflation", {})
        shared = set(emergence) & set(inflation)
        assert {name: emergence[name] for name in shared} == {name: inflation[name] for name in shared}, profile


def test_every_chapter_writes_its_cost_sentence_and_glues_only_its_values():
    for path in CHAPTERS:
        if path.stem == "claims":  # the claims page costs nothing to compute
            continue
        text = path.read_text()
        assert "# **Computing it** on {glue:text}`cost_machine`: {glue:text}`cost_book` with the book's" in text
        for name in ("cost_machine", "cost_book", "cost_paper"):
            assert f'glue("{name}", cost.{name.split("_")[1]}, display=False)' in text, (path.name, name)


# --------------------------------------------------------------------------- how the prose reads


def test_the_reading_measures_count_what_they_say(tmp_path):
    from acebook.readability import measure, paragraphs, sentences

    text = (
        "One short paragraph with {glue:text}`a` and {claim}`markov.rank <holds>`.\n\n"
        "```python\nnot = prose + at_all\n```\n\n"
        "```{admonition} Note\n:class: tip\n\nA note. It has two sentences.\n```\n\n"
        "- an item\n- another item, $x + y$ inline.\n\n| a | table |\n"
    )
    assert paragraphs(text) == [
        "One short paragraph with {glue:text}`a` and {claim}`markov.rank <holds>`.",
        "A note. It has two sentences.",
        "an item",
        "another item, $x + y$ inline.",
    ]
    assert sentences("A note. It has two sentences. e.g. not here.") == [
        "A note.",
        "It has two sentences. e.g. not here.",
    ]
    src = tmp_path / "probe.py"
    src.write_text("# %% [markdown]\n" + "".join(f"# {line}\n" if line else "#\n" for line in text.splitlines()))
    m = measure(src)
    assert (m.paragraphs, m.most_values, m.longest_sentence, m.words) == (4, 2, 7, 7 + 6 + 2 + 4)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_reads_in_one_sitting(path):
    """Paragraphs, sentences and values per paragraph within the book's limits (the table of every
    chapter is printed on failure: ``python -m acebook.readability``)."""
    from acebook.readability import measure, table

    over = measure(path).over_limits()
    assert not over, f"{path.name} is beyond the reading limits: {over}\n{table(CHAPTERS)}"


def test_the_time_to_read_follows_words_figures_and_the_exercises_marks(tmp_path):
    import math

    from acebook.readability import MINUTES_PER_FIGURE, WORDS_PER_MINUTE, chapter_time, exercise_minutes, measure

    words = " ".join(["word"] * (WORDS_PER_MINUTE * 12))  # 12 minutes of prose
    text = (
        f"{words}\n\n```{{glue:figure}} fig_a\n:name: fig-a\n\nA caption.\n```\n\n"
        "```{exercise} One\n:label: ex-one\n\n🔴⚪⚪⚪⚪ · 🔵⚪⚪⚪⚪ · about 15 minutes\n\nDo it.\n```\n\n"
        "```{exercise} Two\n:label: ex-two\n\n🔴⚪⚪⚪⚪ · 🔵⚪⚪⚪⚪ · about 10 minutes, pen and paper\n\n"
        "Think.\n```\n"
    )
    src = tmp_path / "chapter.py"
    src.write_text("# %% [markdown]\n" + "".join(f"# {line}\n" if line else "#\n" for line in text.splitlines()))
    assert exercise_minutes(src) == {"ex-one": 15, "ex-two": 10}
    t = chapter_time(src)
    m = measure(src)
    assert WORDS_PER_MINUTE * 12 < m.words < WORDS_PER_MINUTE * 12 + 30 and m.figures == 1
    assert t.reading == 5 * math.ceil((m.words / WORDS_PER_MINUTE + MINUTES_PER_FIGURE) / 5)
    assert (t.exercises, t.total) == (25, t.reading + 25)
    src.write_text(src.read_text().replace("about 10 minutes", "ten minutes"))
    with pytest.raises(ValueError, match="2 exercises but 1 with a label"):
        exercise_minutes(src)


def test_every_chapters_time_is_computed_from_its_words_figures_and_exercise_marks():
    line = "# **Time**: about {glue:text}`time_read` minutes to read, {glue:text}`time_total` with the exercises."
    for path in CHAPTERS:
        if path.stem == "claims":  # a reference page: no exercises, no time line
            continue
        text = path.read_text()
        assert line in text, path.name
        assert f'minutes = chapter_time("{path.stem}")' in text, path.name
        for name, field in (("time_read", "reading"), ("time_total", "total")):
            assert f'glue("{name}", minutes.{field}, display=False)' in text, (path.name, name)
