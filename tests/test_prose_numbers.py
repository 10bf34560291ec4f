"""Numbers in the chapters' prose are glued, unless the chapter declares them as written by hand
(a quote of the paper, a property of a model or task, a definition): acebook/prose.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from acebook.prose import declared, prose, undeclared, written_numbers

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_number_in_the_prose_is_glued_or_declared(chapter):
    source = ROOT / "notebooks" / f"{chapter}.py"
    typed = undeclared(prose(source), declared(source))
    assert not typed, (
        f"{chapter}: numbers typed into the prose; glue each one the book measures, or declare the phrase under "
        "written_numbers in the chapter's jupytext header when it quotes the paper, a model or a definition:\n"
        + "\n".join(f"  {n.number!r} in '…{n.context}…'" for n in typed)
    )


def test_what_is_not_prose_is_left_out(tmp_path):
    source = tmp_path / "chapter.py"
    source.write_text(
        "# %% [markdown]\n"
        "# ## Section 3\n"
        "#\n"
        "# **Time**: about 40 minutes.\n"
        "#\n"
        "# 1. A core of {glue:text}`dim` dimensions, $2/p$ and `n = 4`, as in Figure 2 and Table A6,\n"
        "#    in SmolLM2-135M with a rank-1 core; the paper reports 0.93 and 49 152 tokens.\n"
        "#\n"
        "# ```{exercise} Try\n"
        "# :label: ex-1\n"
        "#\n"
        "# **Expected result**: 1622 steps.\n"
        "# ```\n"
    )
    numbers = [n.number for n in written_numbers(prose(source))]
    assert numbers == ["0.93", "49 152"]
    assert undeclared(prose(source), ["the paper reports 0.93 and 49 152 tokens"]) == []


def test_a_declared_phrase_must_still_be_in_the_prose(tmp_path):
    source = tmp_path / "chapter.py"
    source.write_text("# %% [markdown]\n# The paper reports 0.93.\n")
    with pytest.raises(ValueError, match="'reports 0.81' is not in the chapter's prose"):
        undeclared(prose(source), ["reports 0.81"])
    (tmp_path / "bad.py").write_text("# ---\n# jupyter:\n#   written_numbers: 0.93\n# ---\n\n# %% [markdown]\n# x\n")
    with pytest.raises(ValueError, match="must be a list of phrases"):
        declared(tmp_path / "bad.py")
