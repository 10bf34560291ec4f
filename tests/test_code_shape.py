"""Functions a newcomer can read: at most 60 lines of code each in corelib/ and acebook/ (the
docstring, blank lines and comment lines aside), modules of at most 800 lines, and no closure that
rebinds its enclosing function's names. Statements, branches and complexity per function are ruff's (pyproject.toml)."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 60
MAX_MODULE_LINES = 800  # a module is one concept: past this, it is usually two
SOURCES = sorted(p for package in ("corelib", "acebook") for p in (ROOT / package).rglob("*.py"))


def code_lines(source: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of ``node``'s body holding code: its signature, docstring, blank lines and comments aside."""
    body = node.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    has_doc = has_doc and isinstance(body[0].value.value, str)
    if has_doc and len(body) == 1:
        return 0
    first = body[1].lineno if has_doc else body[0].lineno
    text = "\n".join(source.splitlines()[first - 1 : node.end_lineno])
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (
            tokenize.COMMENT,
            tokenize.NL,
            tokenize.NEWLINE,
            tokenize.INDENT,
            tokenize.DEDENT,
            tokenize.ENDMARKER,
        ):
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)


def functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines of code) of every function and method of the module at ``path``."""
    source = path.read_text()
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{prefix}{child.name}", code_lines(source, child)))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def rebinding_closures(path: Path) -> list[str]:
    """Nested functions that declare ``nonlocal``: they change their enclosing function's state."""
    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Nonlocal)]


def test_code_lines_counts_code_only() -> None:
    source = 'def f(a,\n      b):\n    """Doc.\n\n    More."""\n    # why\n\n    x = (a +\n         b)\n    return x\n'
    node = ast.parse(source).body[0]
    assert code_lines(source, node) == 3  # the two lines of one statement, and the return


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_longer_than_sixty_lines_of_code(path: Path) -> None:
    long = [f"{name} ({n} lines)" for name, n in functions(path) if n > MAX_LINES]
    assert not long, (
        f"{path.relative_to(ROOT)}: functions over {MAX_LINES} lines of code: {', '.join(long)}. Split them into "
        "named steps (small functions, or methods of a small object holding the state they share)."
    )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_longer_than_eight_hundred_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, (
        f"{path.relative_to(ROOT)} has {lines} lines: split it by concept into modules of at most "
        f"{MAX_MODULE_LINES} (CONTRIBUTING's table names where each goes)."
    )


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_closure_rebinds_its_enclosing_functions_names(path: Path) -> None:
    found = rebinding_closures(path)
    assert not found, f"`nonlocal` at {', '.join(found)}: keep the shared state in an object with methods instead."


def untyped_results(path: Path) -> list[str]:
    """Functions named ``run`` or ``*_summary`` of a module at ``path`` annotated to return a dict
    (or not annotated): a chapter's results are a documented dataclass, not string keys."""
    tree = ast.parse(path.read_text())
    return [
        f"{node.name} -> {ast.unparse(node.returns) if node.returns else 'unannotated'}"
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and (node.name == "run" or node.name.endswith("_summary"))
        and (node.returns is None or ast.unparse(node.returns).startswith(("dict", "Dict", "Mapping")))
    ]


def test_untyped_results_are_found() -> None:
    source = (
        "def run() -> dict[str, int]:\n    pass\ndef clock_summary() -> Clock:\n    pass\ndef a_summary():\n    pass\n"
    )
    path = Path(__file__).with_name("_shape_probe.py")
    try:
        path.write_text(source)
        assert untyped_results(path) == ["run -> dict[str, int]", "a_summary -> unannotated"]
    finally:
        path.unlink()


@pytest.mark.parametrize(
    "path", sorted((ROOT / "corelib" / "experiments").glob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_chapter_results_are_typed(path: Path) -> None:
    found = untyped_results(path)
    assert not found, (
        f"{path.relative_to(ROOT)}: {', '.join(found)}; return a frozen dataclass whose fields are documented "
        "(see CONTRIBUTING.md, 'Results')."
    )
