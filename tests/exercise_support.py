"""Shared by the exercise tests: a solution's Python, cut out of ``book/solutions/<chapter>.md``
(or, for an exercise still solved in its chapter, out of its ``{solution}`` dropdown), and run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python_blocks(lines: list[str]) -> list[str]:
    blocks, inside = [], None
    for ln in lines:
        if inside is None and ln.strip() == "```python":
            inside = []
        elif inside is not None and ln.strip() == "```":
            blocks.append("\n".join(inside))
            inside = None
        elif inside is not None:
            inside.append(ln)
    return blocks


def solution_code(chapter: str, label: str) -> str:
    """The ```python blocks of the solution ``label``: from ``book/solutions/<chapter>.md`` where it
    is kept there, else from the ``{solution} label`` dropdown of ``notebooks/<chapter>.py``."""
    kept = ROOT / "book" / "solutions" / f"{chapter}.md"
    text = kept.read_text() if kept.exists() else ""
    if f"<!-- {label} -->" in text:
        body = text.split(f"<!-- {label} -->", 1)[1].split(f"<!-- end {label} -->", 1)[0].splitlines()
    else:
        lines = [
            ln[2:] if ln.startswith("# ") else ln.lstrip("#")
            for ln in (ROOT / "notebooks" / f"{chapter}.py").read_text().splitlines()
        ]
        start = next(
            (i for i, ln in enumerate(lines) if re.match(rf"`{{3,}}\{{solution\}} {re.escape(label)}\s*$", ln)), None
        )
        assert start is not None, f"no solution {label!r} in notebooks/{chapter}.py"
        fence = re.match(r"`+", lines[start]).group()
        end = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == fence)
        body = lines[start + 1 : end]
    blocks = _python_blocks(body)
    assert blocks, f"solution {label!r} has no python block"
    return "\n\n".join(blocks)


def run_solution(chapter: str, label: str) -> dict:
    namespace: dict = {}
    exec(compile(solution_code(chapter, label), f"{chapter}:{label}", "exec"), namespace)
    return namespace
