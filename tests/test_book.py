"""The whole book, smoke profile: every chapter executes and the site renders.

The build runs in a copy of the project in a temporary folder, so running the tests never
replaces a book you built with `make book`. It is the session fixture `built_book` of
conftest.py, shared with test_browser.py, which opens the same site in headless Chromium.
"""

import json
import re

import pytest

from acebook import project, runner
from conftest import BOOK_GROUP

pytestmark = pytest.mark.slow  # builds the whole book


def test_every_chapter_renders(built_book):
    root, index = built_book
    assert index.exists()
    for name in project.chapters(root):
        page = root / "_build" / "html" / "book" / "chapters" / f"{name}.html"
        assert page.exists(), name
        html = page.read_text()
        assert "Traceback" not in html, f"{name} shows a Python traceback"
        assert not re.search(r"glue.*not found", html, re.I), f"{name} has an unresolved glue"
        # no stray return value or path of the machine that built it
        assert "PosixPath(" not in html and str(root) not in html, f"{name} shows a local path"


def test_executed_notebooks_have_no_errors(built_book):
    root, _ = built_book
    for name in project.chapters(root):
        nb = json.loads(project.output_path(name, root).read_text())
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
        assert not errors, name


def test_recorded_runs_are_shown_and_checked_against_the_build(built_book):
    root, _ = built_book
    pages = root / "_build" / "html" / "book" / "chapters"

    def text(page):  # the words a reader sees: glued values are spans inside the sentences
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", (pages / page).read_text()))

    agrees = r"\b0 analysed values differ from the record\. Of these, 0 are ranks"
    inflation = text("core_inflation.html")
    assert "The figure below is the recorded smoke-profile run" in inflation
    assert "same seeds and settings: yes" in inflation and re.search(r"At the \d+ snapshots both have", inflation)
    assert re.search(agrees, inflation)
    modular = text("modular_addition.html")
    assert "Whether this build has the same seeds and settings: yes" in modular
    assert re.search(r"compares the two at the \d+ snapshots that both have", modular)
    assert re.search(agrees, modular)
    sweeps = text("grokking_sweeps.html")
    assert "The recorded paper-scale sweep is the recorded smoke-profile run" in sweeps


def test_second_build_uses_the_cache(built_book, monkeypatch):
    root, _ = built_book
    # The same results folder as the first build (conftest.py): the claims page's cache key
    # covers the claims recorded there, and nothing is written to the checkout's results/.
    monkeypatch.setenv("ACE_RESULTS_DIR", str(root / "results"))
    monkeypatch.setenv("ACE_RECORDED_DIR", str(root / "recorded"))  # part of two chapters' cache keys
    before = {n: project.output_path(n, root).stat().st_mtime for n in project.chapters(root)}
    runner.build_book("smoke", root=root, render=False)
    after = {n: project.output_path(n, root).stat().st_mtime for n in project.chapters(root)}
    assert before == after


def test_the_reader_copies_show_every_number_in_plain_jupyter(built_book):
    """What a student opens in Jupyter (the executed chapter, ``book/chapters/<name>.ipynb``),
    exported to HTML by nbconvert as Jupyter renders it, holds no raw glue or claim role, and its
    glued figures are images in the prose."""
    import nbformat
    from nbconvert import HTMLExporter

    from acebook.reader import RAW_ROLE, glued_values

    root, _ = built_book
    for name in project.chapters(root):
        nb = nbformat.read(project.output_path(name, root), as_version=4)
        body, _ = HTMLExporter().from_notebook_node(nb)
        left = sorted(set(RAW_ROLE.findall(body)))
        assert not left, f"{name}: the reader's copy still shows {left}"
        figures = sum(c.source.count("](attachment:") for c in nb.cells if c.cell_type == "markdown")
        site = nbformat.read(project.site_source_path(name, root), as_version=4)
        images = {k for k, v in glued_values(site).items() if "image/png" in v}
        shown = re.findall(
            r"\{glue:figure\}\s*(\S+)", "\n".join(c.source for c in site.cells if c.cell_type == "markdown")
        )
        assert figures == sum(n in images for n in shown), name  # every glued image, attached
        assert body.count("data:image/png;base64") >= figures, f"{name}: an attached figure is not shown"


def test_the_smoke_builds_tests_share_one_worker(built_book, request):
    """Under pytest-xdist every test of the smoke build runs in the group that keeps them on one
    worker, so the book is built once (a pytest that ignores the group would build it per worker)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not on a worker of pytest-xdist's --dist loadgroup (make test's default)")
    assert request.node.nodeid.endswith(f"@{BOOK_GROUP}"), request.node.nodeid
