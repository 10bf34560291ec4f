"""Every chapter teaches: objectives, prerequisites and time at the top, a summary at the end, and
at least three exercises with difficulty, importance, time and expected result, one of them a
coding exercise the student checks, and no solution in plain view (notebooks/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = [
    Path(e["file"]).name
    for e in TOC["chapters"]
    if e["file"].startswith("book/chapters/") and Path(e["file"]).name != "claims"
]


def _markdown(chapter: str) -> str:
    lines = (ROOT / "notebooks" / f"{chapter}.py").read_text().splitlines()
    return "\n".join(ln[2:] if ln.startswith("# ") else ln.lstrip("#") for ln in lines)


def _exercises(text: str) -> list[tuple[str, str]]:
    """(label, body) of each ``{exercise}`` directive."""
    out = []
    for m in re.finditer(r"^(`{3,}|:{3,})\{exercise\}[^\n]*\n(.*?)^\1\s*$", text, re.S | re.M):
        label = re.search(r":label:\s*(\S+)", m[2])
        out.append((label[1] if label else "", m[2]))
    return out


def test_the_chapters_are_found():
    assert "markov_chain" in CHAPTERS and len(CHAPTERS) >= 9


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_opens_with_objectives_prerequisites_and_time(chapter):
    text = _markdown(chapter)
    box = re.search(r"```\{admonition\} In this chapter\n(.*?)\n```", text, re.S)
    assert box, f"{chapter}: no 'In this chapter' admonition at the top"
    body = box[1]
    for part in ("**You will be able to**", "**Before you start**", "**Time**"):
        assert part in body, f"{chapter}: the 'In this chapter' box has no {part}"
    goals = body.split("**You will be able to**")[1].split("**Before you start**")[0]
    n = len(re.findall(r"^- ", goals, re.M))
    assert 3 <= n <= 5, f"{chapter}: {n} learning objectives (want 3 to 5)"
    assert text.index("In this chapter") < text.index('tags=["parameters"]') if "parameters" in text else True


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_ends_with_a_written_summary(chapter):
    text = _markdown(chapter)
    assert re.search(r"^## Summary\s*$", text, re.M), f"{chapter}: no '## Summary' section"
    summary = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    # written words: glued values and cited claims are numbers inside the sentences, not words
    words = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", summary).split()
    assert len(words) >= 60, f"{chapter}: the summary has {len(words)} written words"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_has_three_marked_exercises_and_three_checked_ones(chapter):
    text = _markdown(chapter)
    exercises = _exercises(text)
    assert len(exercises) >= 3, f"{chapter}: {len(exercises)} exercises (want at least 3)"
    for label, body in exercises:
        assert "🔴" in body and "🔵" in body and "minute" in body, f"{chapter}/{label}: no difficulty, importance, time"
        assert "Expected result" in body, f"{chapter}/{label}: no expected result"
    code = (ROOT / "notebooks" / f"{chapter}.py").read_text()
    checks = set(re.findall(r"^ex\.(check_\w+)\(", code, re.M))
    assert len(checks) >= 3, f"{chapter}: {len(checks)} checked coding exercises (ex.check_...), at least 3 wanted"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_no_solution_is_in_plain_view(chapter):
    text = _markdown(chapter)
    kept = ROOT / "book" / "solutions" / f"{chapter}.md"
    for m in re.finditer(r"^(`{3,}|:{3,})\{solution\} (\S+)\n(.*?)^\1\s*$", text, re.S | re.M):
        label, body = m[2], m[3]
        assert "```python" not in body, f"{chapter}/{label}: code in the chapter's solution"
        if "{literalinclude}" in body:  # a solution that is a tested function, shown from its test file
            continue
        assert "{include} ../solutions/" in body, f"{chapter}/{label}: the solution is written in the chapter"
        assert f"<!-- {label} -->" in kept.read_text(), f"{chapter}/{label}: not in {kept.name}"
        assert f"<!-- end {label} -->" in kept.read_text(), f"{chapter}/{label}: no end marker in {kept.name}"


# --------------------------------------------------------------------------- the module's times

_CLASS = re.compile(r"^\*\*Class (\d+):.*?(?=^\*\*Class \d+:|^## |\Z)", re.M | re.S)
_READ = re.compile(r"\{doc\}`[^`]*?<?(chapters/\w+|intro)>?`\s*\(about\s+(\d+)\s+minutes", re.S)
_AFTER = re.compile(r"^- After class.*?(?=^- )", re.M | re.S)
_EXERCISE = re.compile(r"\{ref\}`[^`]*<([\w-]+)>`\s*\((\d+)")
_SYLLABUS_ROW = re.compile(r"^\| (\d+) \|.*\| (\d+) min \| (\d+) min \| about (\d+) min", re.M)
_TOTAL = re.compile(r"Homework in all, about (\d+) minutes: (\d+) of reading and (\d+) of exercises")


def _module_classes() -> dict[str, str]:
    text = (ROOT / "book" / "teach.md").read_text()
    return {m[1]: m[0] for m in _CLASS.finditer(text)}


def test_the_modules_homework_times_are_the_chapters_reading_times_and_the_exercises_marks():
    """Every time the course page states comes from acebook.readability: a chapter's reading
    time from its words and figures, an exercise's from its marks, a class's homework as their
    sum. A chapter that changes makes this test name the number to update."""
    from acebook.readability import chapter_time, exercise_minutes

    marks = {}
    for source in sorted((ROOT / "notebooks").glob("*.py")):
        marks.update(exercise_minutes(source))
    classes = _module_classes()
    assert len(classes) >= 4, "the module's classes were not found in book/teach.md"
    problems, computed = [], {}
    for number, block in classes.items():
        reading = 0
        for page, stated in _READ.findall(block):
            path = ROOT / "book" / "intro.md" if page == "intro" else ROOT / "notebooks" / f"{page.split('/')[1]}.py"
            minutes = chapter_time(path).reading
            reading += minutes
            if int(stated) != minutes:
                problems.append(f"class {number}: {page} reads in about {minutes} minutes, not {stated}")
        after = _AFTER.search(block)
        exercises = 0
        for label, stated in _EXERCISE.findall(after[0] if after else ""):
            exercises += marks.get(label, -1000)
            if marks.get(label) != int(stated):
                problems.append(f"class {number}: {label} is marked {marks.get(label)} minutes, not {stated}")
        computed[number] = (reading, exercises, reading + exercises)
        total = _TOTAL.search(block)
        if total is None:
            problems.append(
                f"class {number}: no line 'Homework in all, about T minutes: R of reading and E of exercises'"
            )
        elif tuple(map(int, total.groups())) != (reading + exercises, reading, exercises):
            problems.append(
                f"class {number}: homework is about {reading + exercises} minutes: {reading} of reading and "
                f"{exercises} of exercises, not {total.groups()}"
            )
    syllabus = (ROOT / "book" / "syllabus.md").read_text()
    for number, reading, exercises, total in _SYLLABUS_ROW.findall(syllabus):
        if computed.get(number) != (int(reading), int(exercises), int(total)):
            problems.append(
                f"syllabus, class {number}: {reading}, {exercises}, {total} min; the module: {computed.get(number)}"
            )
    assert len(_SYLLABUS_ROW.findall(syllabus)) == len(classes), "the syllabus's time table was not found"
    assert not problems, "\n".join(problems)
