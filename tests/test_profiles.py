"""The chapters' parameters cells hold the book profile's values, and the paper profile restores
the paper's settings (the defaults of each experiment's parameter class)."""

from __future__ import annotations

import dataclasses

import pytest

from acebook.project import chapters, profile_parameters
from acebook.runner import chapter_parameters
from corelib.experiments import grokking_sweeps, inflation_clock, markov_chain, modular_runs, subject_verb_agreement

# Chapters whose parameter class states the paper's settings as its defaults.
PAPER_CLASSES = {
    "markov_chain": markov_chain.MarkovParams,
    "modular_addition": modular_runs.ModularParams,
    "core_inflation": modular_runs.ModularParams,
    "grokking_sweeps": grokking_sweeps.SweepsParams,
    "subject_verb_agreement": subject_verb_agreement.SVAParams,
    "inflation_clock": inflation_clock.ClockParams,  # not a paper experiment: its defaults are its full settings
}


def _plain(value):
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


@pytest.mark.parametrize("name", chapters())
def test_the_parameters_cell_holds_the_book_values(name: str) -> None:
    """`Run all` in Jupyter, Binder or Colab runs the book profile: the profile sets nothing else."""
    cell = chapter_parameters(name, None)  # the cell's values alone
    book = profile_parameters(name, "book")
    assert {k: (v, cell.get(k)) for k, v in book.items() if cell.get(k) != v} == {}


@pytest.mark.parametrize("name", sorted(PAPER_CLASSES))
def test_the_paper_profile_restores_the_papers_settings(name: str) -> None:
    values = chapter_parameters(name, "paper")
    paper = PAPER_CLASSES[name]()
    fields = [f.name for f in dataclasses.fields(paper) if f.name in values]
    assert fields, f"{name} declares none of its parameter class's fields"
    differ = {f: (values[f], getattr(paper, f)) for f in fields if _plain(values[f]) != _plain(getattr(paper, f))}
    assert differ == {}, f"{name}: (paper profile, paper value) differ: {differ}"
    # and it sets only what the book reduces (an entry equal to the cell's value is noise)
    cell = chapter_parameters(name, None)
    same = [k for k, v in profile_parameters(name, "paper").items() if _plain(cell.get(k)) == _plain(v)]
    assert same == [], f"{name}: the paper profile repeats the cell's values of {same}"


@pytest.mark.parametrize("name", chapters())
def test_papermill_reads_every_line_of_the_parameters_cell(name: str) -> None:
    """A line papermill cannot parse (a comment with ':' or '=' in some forms) is silently dropped:
    the runner could then neither check nor override that parameter."""
    import re
    from pathlib import Path

    from acebook.runner import notebook_parameters

    text = (Path(__file__).resolve().parent.parent / "notebooks" / f"{name}.py").read_text()
    cell = text.split('# %% tags=["parameters"]', 1)[1].split("# %%", 1)[0]
    assigned = {m.group(1) for m in re.finditer(r"^([A-Za-z_]\w*)\s*=", cell, re.M)}
    assert assigned == set(notebook_parameters(name))
