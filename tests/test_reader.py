"""The reader's copy of an executed chapter (acebook.reader): the prose with its numbers in it.

A small executed notebook is built by hand: glued values of several kinds, a glued figure, a
cited claim. Its reader's copy, rendered by nbconvert as Jupyter renders it, shows each value in
the format the site uses (myst-nb's), the figure as an attached image with its caption, and the
verdict as a link with its value in the tooltip.
"""

from __future__ import annotations

import base64
import io

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from acebook.citations import badge, claim_anchor
from acebook.reader import RAW_ROLE, glued_values, reader_copy

PREFIX = "application/papermill.record/"


def _glue(name: str, data: dict) -> dict:
    return new_output(
        "display_data",
        data={PREFIX + k: v for k, v in data.items()},
        metadata={"scrapbook": {"name": name, "mime_prefix": PREFIX}},
    )


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


ROW = {
    "id": "markov.rank",
    "claim": "core rank of each model (99.9 % energy)",
    "ours": "3",
    "paper": "3",
    "tolerance": "= 3",
    "within tolerance": "yes",
    "status": "reproduced",
}


@pytest.fixture
def executed():
    code = new_code_cell("glue(...)")
    code.outputs = [
        _glue("acc_min", {"text/plain": "0.987654"}),
        _glue("n_models", {"text/plain": "3"}),
        _glue("machine", {"text/plain": "'an AMD EPYC'"}),
        _glue("fig_a", {"text/plain": "<Figure>", "image/png": _png()}),
    ]
    md = new_markdown_cell(
        "The worst model keeps {glue:text}`acc_min:.3f` of its accuracy over {glue:text}`n_models` "
        "models on {glue:text}`machine`; the {term}`core <core>` has the paper's rank "
        "{claim}`markov.rank <reproduced>`. See {doc}`ace_method`.\n\n"
        "```{glue:figure} fig_a\n:name: fig-a\n\n**A figure.** Its caption.\n```\n"
    )
    return new_notebook(cells=[code, md])


def test_the_glued_values_are_read_from_the_outputs(executed):
    values = glued_values(executed)
    assert set(values) == {"acc_min", "n_models", "machine", "fig_a"}
    assert values["acc_min"]["text/plain"] == "0.987654" and "image/png" in values["fig_a"]


def test_the_reader_copy_writes_each_value_as_the_site_formats_it(executed):
    copy = reader_copy(executed, {"markov.rank": ROW})
    text = copy.cells[1].source
    assert "keeps 0.988 of its accuracy over 3 models on an AMD EPYC;" in text
    assert "the core has the paper's rank" in text and "See [ace_method](ace_method.ipynb)." in text
    b = badge(ROW, "reproduced")
    assert f'href="claims.ipynb#{claim_anchor("markov.rank")}"' in text and b.tooltip in text
    assert "✓ reproduced" in text
    assert "![fig_a](attachment:fig_a.png)" in text
    assert "**A figure.** Its caption." in text and ":name:" not in text
    assert copy.cells[1].attachments["fig_a.png"]["image/png"] == glued_values(executed)["fig_a"]["image/png"]
    assert executed.cells[1].source.count("{glue:text}") == 3  # the executed notebook is left alone


def test_nbconvert_shows_the_numbers_and_the_figure(executed):
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(reader_copy(executed, {"markov.rank": ROW}))
    assert not RAW_ROLE.search(body)
    assert "0.988" in body and "data:image/png;base64" in body
    assert 'title="core rank of each model (99.9 % energy): 3 · paper: 3 · holds when: = 3 · reproduced"' in body


def test_a_missing_value_is_named(executed):
    executed.cells[1].source += "\nAnd {glue:text}`nowhere:.2f`."
    with pytest.raises(KeyError, match="no value named 'nowhere'"):
        reader_copy(executed, {"markov.rank": ROW})


def test_the_badge_says_the_status_in_a_word_and_warns_on_a_broken_premise():
    assert badge(ROW, "reproduced").label == "✓ reproduced"
    broken = badge(ROW, "differs")
    assert broken.label == "✓ reproduced ⚠" and not broken.premise_holds
    differs = badge({**ROW, "status": "differs", "within tolerance": "no", "ours": "-53"}, "differs")
    assert differs.label == "≠ differs" and differs.css_class == "claim-differs" and ": -53 ·" in differs.tooltip
    none = badge({**ROW, "status": "not run in this profile", "paper": "— (the book's own)"}, None)
    assert none.label == "○ not run" and "paper:" not in none.tooltip
    assert claim_anchor("window_paper.kept_inflates") == "claim-window-paper-kept-inflates"


def test_nbformat_accepts_the_copy(executed):
    nbformat.validate(reader_copy(executed, {"markov.rank": ROW}))


LIVE = [
    "from myst_nb import glue\nacc = 2 / 3\nglue('acc', acc, display=False)\n"
    "glue('who', 'the third model', display=False)",
    "The best accuracy is {glue:text}`acc:.2f`, reached by {glue:text}`who`.",
]


def test_a_chapter_run_live_gets_its_numbers_from_the_reader_command(tmp_path, capsys):
    """A notebook executed cell by cell by a plain kernel (as JupyterLab does, no papermill), saved,
    then given to ``ace-book reader``: the copy shows the numbers; the original is untouched, and
    nothing that exists is overwritten."""
    from nbclient import NotebookClient

    from acebook import runner

    nb = new_notebook(cells=[new_code_cell(LIVE[0]), new_markdown_cell(LIVE[1])])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    saved = tmp_path / "my_run.ipynb"
    nbformat.write(nb, saved)
    assert runner.main(["reader", str(saved)]) == 0
    copy = nbformat.read(tmp_path / "my_run.read.ipynb", as_version=4)
    assert copy.cells[1].source == "The best accuracy is 0.67, reached by the third model."
    assert nbformat.read(saved, as_version=4).cells[1].source == LIVE[1]
    assert runner.main(["reader", str(saved)]) == 2
    assert "exists; choose a new file" in capsys.readouterr().err


def test_the_reader_command_refuses_what_it_cannot_read(tmp_path, capsys):
    from acebook import runner

    unrun = tmp_path / "unrun.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell(LIVE[0]), new_markdown_cell(LIVE[1])]), unrun)
    assert runner.main(["reader", str(unrun)]) == 2
    assert "no value named 'acc'; run every cell of the chapter" in capsys.readouterr().err
    link = tmp_path / "link.ipynb"
    link.symlink_to(unrun)
    assert runner.main(["reader", str(link)]) == 2
    assert "not a notebook file" in capsys.readouterr().err
    junk = tmp_path / "junk.ipynb"
    junk.write_text("{not json")
    assert runner.main(["reader", str(junk)]) == 2
    assert "not a readable notebook" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.read.ipynb"))


def test_boxes_read_as_quotes_solutions_as_pointers_and_tables_as_html(executed):
    executed.cells[0].outputs.append(
        _glue("tab", {"text/plain": "table", "text/html": "<table><tr><td>7</td></tr></table>"})
    )
    executed.cells[1].source = (
        "```{admonition} Details: the store\n:class: dropdown\n\nEvery file has a checksum.\n```\n\n"
        "```{exercise} Count it\n:label: ex-count\n\n🔴⚪⚪⚪⚪ · about 5 minutes\n\n"
        "Count {glue:text}`n_models` things.\n```\n\n"
        "````{solution} ex-count\n:class: dropdown\n\n```{include} ../solutions/markov_chain.md\n"
        ":start-after: <!-- ex-count -->\n```\n````\n\n"
        "```{glue:figure} tab\n:name: tab-a\n\nA table.\n```\n\n"
        "See {ref}`the table <tab-a>`, {numref}`tab-a` and {cite:p}`schiffman2025`; {math}`x^2`.\n"
    )
    text = reader_copy(executed, {"markov.rank": ROW}).cells[1].source
    assert "> **Details: the store**\n>\n> Every file has a checksum." in text and ":class:" not in text
    assert "> **Exercise: Count it**" in text and "> Count 3 things." in text and ":label:" not in text
    assert "> **Solution**: on the book's site, in a dropdown, and in `book/solutions/markov_chain.md`." in text
    assert "<table><tr><td>7</td></tr></table>\n\nA table." in text
    assert "See the table, the section and (schiffman2025); $x^2$." in text
    assert "{" not in text.replace("{glue", "")  # no role or directive left


def test_targets_includes_and_page_links_read_plainly_and_a_broken_premise_is_announced(executed):
    from acebook.reader import PREMISE_WARNING

    executed.cells[1].source = (
        "(sec-a)=\n## A section\n\nSee {numref}`fig-markov` and {ref}`ace-ex-core`, and {doc}`../rerun`.\n\n"
        "```{literalinclude} /corelib/experiments/own_model.py\n:pyobject: run\n```\n\n"
        "The rank is right {claim}`markov.rank <differs>`.\n"
    )
    copy = reader_copy(executed, {"markov.rank": ROW})
    text = copy.cells[2].source
    assert text.startswith("## A section") and "(sec-a)=" not in text
    assert "See the figure and the exercise, and [../rerun](../rerun.md)." in text
    assert "> The code shown here on the book's site is in `corelib/experiments/own_model.py`." in text
    assert "✓ reproduced ⚠" in text and copy.cells[0].source == PREMISE_WARNING
    assert nbformat.writes(copy) == nbformat.writes(reader_copy(executed, {"markov.rank": ROW}))  # one copy
    assert not RAW_ROLE.search(text)
    with pytest.raises(KeyError, match="no result is recorded for 'markov.rank'"):
        reader_copy(executed, {})


def test_a_chapter_citing_a_missing_value_fails_with_its_name_and_keeps_the_site_source(executed, tmp_path):
    from acebook import runner
    from acebook.project import RunnerError

    executed.cells[1].source += "\nAnd {glue:text}`nowhere:.2f`."
    site, target = tmp_path / "ch.mystnb", tmp_path / "ch.ipynb"
    nbformat.write(executed, site)
    with pytest.raises(RunnerError, match="no value named 'nowhere'; glue that value in the chapter"):
        runner.refresh_reader_copy(site, target, {"markov.rank": ROW})
    assert site.exists() and not target.exists() and not list(tmp_path.glob("*.writing"))
