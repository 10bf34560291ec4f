"""Tests of acebook.runner and acebook.run_times on a small temporary project (real papermill executions)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acebook import run_times, runner
from acebook.project import PARAMETER_CLASSES, chapters
from acebook.runner import ConfigError, NotebookExecutionError
from corelib.results import save_json

ROOT = Path(__file__).resolve().parent.parent

REPO = Path(__file__).resolve().parent.parent

TOC = """\
format: jb-book
root: book/intro
chapters:
  - file: book/chapters/alpha
"""

PROFILES = """\
smoke:
  alpha: {n: 3}
book:
  alpha: {}
typo:
  alpha: {nn: 3}
"""

# Appends one line "<n> <label>" to runs.txt (relative: the kernel runs in the project root).
ALPHA = """\
# %% [markdown]
# # Alpha
#
# Twice n is {glue:}`twice_n`.

# %% tags=["parameters"]
n = 1  # how many
label = "x"

# %%
from myst_nb import glue
with open("runs.txt", "a") as f:
    f.write(f"{n} {label}\\n")
glue("twice_n", 2 * n)
"""

BROKEN = """\
# %% tags=["parameters"]
divisor = 0

# %%
a = 1

# %% [markdown]
# Now divide.

# %%
# divide a by divisor

ratio = a / divisor
"""

NO_PARAMETERS = """\
# %%
x = 1
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(autouse=True)
def _own_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run records and claims of the mini project go to its own results folder, not the checkout's."""
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "results"))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A mini project: _toc.yml, profiles.yml, three notebooks and a fake corelib (no acebook yet)."""
    write(tmp_path / "_toc.yml", TOC)
    write(tmp_path / "profiles.yml", PROFILES)
    write(tmp_path / "book" / "intro.md", "# Mini book\n\nSee {doc}`chapters/alpha`.\n")
    write(tmp_path / "notebooks" / "alpha.py", ALPHA)
    write(tmp_path / "notebooks" / "broken.py", BROKEN)
    write(tmp_path / "notebooks" / "noparams.py", NO_PARAMETERS)
    write(tmp_path / "corelib" / "__init__.py", "VALUE = 1\n")
    return tmp_path


def runs(project: Path) -> list[str]:
    path = project / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_profile_and_override_values_reach_the_notebook(project: Path) -> None:
    out = runner.run_notebook("alpha", "smoke", root=project)
    assert out == project / "book" / "chapters" / "alpha.ipynb"
    assert runs(project) == ["3 x"]
    runner.run_notebook("alpha", "smoke", {"label": "y z"}, root=project)
    assert runs(project) == ["3 x", "3 y z"]
    meta = json.loads(out.read_text())["metadata"][runner.METADATA_KEY]
    assert meta["parameters"] == {"n": 3, "label": "y z"}
    assert meta["profile"] == "smoke"
    runner.run_notebook("alpha", "book", root=project)  # not in the profile: defaults
    assert runs(project)[-1] == "1 x"


def test_unknown_override_is_an_error_listing_the_real_parameters(project: Path) -> None:
    with pytest.raises(ConfigError) as info:
        runner.run_notebook("alpha", "book", {"nn": 4}, root=project)
    message = str(info.value)
    assert "'nn'" in message and "'alpha'" in message
    assert "n (default 1)" in message and 'label (default "x")' in message
    assert runs(project) == []  # raised before execution


def test_unknown_profile_parameter_is_an_error(project: Path) -> None:
    with pytest.raises(ValueError, match=r"'nn'.*profile 'typo'.*n \(default 1\), label"):
        runner.run_notebook("alpha", "typo", root=project)
    assert runs(project) == []


def test_notebook_without_parameters_cell_is_an_error(project: Path) -> None:
    with pytest.raises(ConfigError, match="no cell tagged 'parameters'"):
        runner.run_notebook("noparams", root=project)


def test_unknown_profile_lists_the_profiles(project: Path) -> None:
    with pytest.raises(ValueError, match="unknown profile 'huge'.*smoke, book, typo"):
        runner.run_notebook("alpha", "huge", root=project)


def test_unknown_notebook(project: Path) -> None:
    with pytest.raises(ConfigError, match="no notebook 'gamma'.*alpha, broken, noparams"):
        runner.run_notebook("gamma", root=project)


@pytest.mark.slow  # two notebook executions and a traceback
def test_failing_cell_names_notebook_and_cell_and_keeps_partial_notebook(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    good = runner.run_notebook("broken", overrides={"divisor": 2}, root=project)
    assert good.exists()
    with pytest.raises(NotebookExecutionError) as info:
        runner.run_notebook("broken", root=project)
    err = info.value
    message = str(err)
    assert "'broken'" in message
    assert "cell 3" in message and "'# divide a by divisor'" in message
    assert "notebooks/broken.py:13" in message  # the line of `ratio = a / divisor`
    assert "ZeroDivisionError: division by zero" in message
    assert err.notebook == "broken" and err.cell_index == 3
    shown = message.rsplit(" at ", 1)[1].strip()
    assert (project / shown).resolve() == err.partial_path.resolve()
    partial = json.loads(err.partial_path.read_text())
    assert any(o.get("ename") == "ZeroDivisionError" for c in partial["cells"] for o in c.get("outputs", []))
    assert "ratio = a / divisor" in err.traceback
    assert not good.exists()  # the earlier success is not left in place


def test_cache_reuses_results_until_an_input_changes(project: Path) -> None:
    run = lambda **kw: runner.run_notebook("alpha", "smoke", root=project, **kw)  # noqa: E731
    run()
    run()
    assert len(runs(project)) == 1  # identical inputs: cached
    run(overrides={"n": 4})
    run(overrides={"n": 4})
    assert len(runs(project)) == 2  # a new parameter value runs once
    write(project / "corelib" / "extra" / "util.py", "X = 2\n")
    run(overrides={"n": 4})
    assert len(runs(project)) == 3  # a corelib change invalidates
    write(project / "acebook" / "claims_page.py", "X = 2\n")
    run(overrides={"n": 4})
    assert len(runs(project)) == 4  # so does a change of the book's code (chapters import it)
    run(overrides={"n": 4}, force=True)
    assert len(runs(project)) == 5  # force bypasses the cache
    source = project / "notebooks" / "alpha.py"
    source.write_text(source.read_text() + "# a comment\n")
    run(overrides={"n": 4})
    assert len(runs(project)) == 6  # a source change invalidates
    timings = json.loads((project / "_build" / "timings.json").read_text())
    assert timings["notebooks"]["alpha"]["cached"] is False


def test_build_without_render_and_overrides(project: Path) -> None:
    out = runner.build_book("smoke", overrides={"alpha.label": "z"}, render=False, root=project)
    assert (out / "alpha.ipynb").exists()
    assert runs(project) == ["3 z"]
    with pytest.raises(ConfigError, match="unknown parameter 'nope'.*alpha: n \\(default 1\\)"):
        runner.build_book("smoke", overrides={"nope": 1}, render=False, root=project)
    with pytest.raises(ConfigError, match="not a chapter of _toc.yml: broken"):
        runner.build_book("smoke", only=["broken"], render=False, root=project)


def test_chapters_are_read_from_the_toc(tmp_path: Path) -> None:
    write(
        tmp_path / "_toc.yml",
        textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - caption: One
            chapters:
              - file: book/chapters/a
                sections:
                  - file: book/chapters/b.ipynb
              - file: book/appendix
          - caption: Two
            chapters:
              - file: book/chapters/c
        """),
    )
    assert chapters(tmp_path) == ["a", "b", "c"]


def test_parse_value() -> None:
    assert runner.parse_value("10") == 10
    assert runner.parse_value("0.5") == 0.5
    assert runner.parse_value("1e-3") == 0.001
    assert runner.parse_value("[1, 2]") == [1, 2]
    assert runner.parse_value("true") is True
    assert runner.parse_value("adam") == "adam"
    assert runner.parse_value("[1e-4, 2e-4]") == [1e-4, 2e-4]


def test_cli_reports_user_errors_without_traceback(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["run", "alpha", "-p", "nn", "1", "--root", str(project)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown parameter 'nn'") and "Traceback" not in err
    assert runner.main(["build", "--root", str(project), "--profile", "nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err
    assert runner.main(["params", "alpha", "--root", str(project)]) == 0
    out = capsys.readouterr().out
    assert "n     = 1  # how many" in out and 'label = "x"' in out


def test_values_of_the_wrong_type_are_refused_before_a_kernel_starts(project: Path) -> None:
    for bad, fragment in (
        ({"n": "abc"}, "n must be a int like its default 1, got 'abc'"),
        ({"n": 1.5}, "got 1.5"),
        ({"n": True}, "got True"),
        ({"n": "[0, 1"}, "a YAML list needs its closing bracket"),
        ({"label": 3}, "label must be a str"),
    ):
        with pytest.raises(ConfigError, match=re.escape(fragment)):
            runner.run_notebook("alpha", "book", bad, root=project)
    assert runs(project) == []  # nothing executed
    runner.run_notebook("alpha", "book", {"label": None}, root=project)  # None: left to the parameter objects
    assert runs(project) == ["1 None"]


def test_unknown_names_get_a_suggestion(project: Path) -> None:
    with pytest.raises(ConfigError, match="did you mean 'alpha'"):
        runner.run_notebook("alpah", root=project)
    with pytest.raises(ConfigError, match="did you mean 'label'"):
        runner.run_notebook("alpha", "book", {"lable": "y"}, root=project)
    with pytest.raises(ConfigError, match="did you mean 'alpha'"):
        runner.build_book("book", only=["alfa"], render=False, root=project)


def test_cli_reads_a_parameters_file_lists_chapters_and_writes_the_output(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    params = write(tmp_path / "params.yaml", "n: 7\nlabel: from-file\n")
    write(tmp_path / "floats.yaml", "n: 1e3\n")  # YAML 1.1 reads 1e3 as a string; the runner as a float
    assert runner.main(["run", "alpha", "-f", str(tmp_path / "floats.yaml"), "--root", str(project)]) == 2
    assert "n must be a int like its default 1, got 1000.0" in capsys.readouterr().err
    out = tmp_path / "out" / "alpha-run.ipynb"
    argv = ["run", "alpha", "-f", str(params), "-p", "n", "8", "-o", str(out), "--device", "cpu"]
    monkeypatch.delenv("ACE_DEVICE", raising=False)
    assert runner.main([*argv, "--root", str(project)]) == 0
    assert runs(project) == ["8 from-file"]  # -p wins over the file
    assert json.loads(out.read_text())["metadata"][runner.METADATA_KEY]["parameters"] == {"n": 8, "label": "from-file"}
    assert os.environ["ACE_DEVICE"] == "cpu"
    write(tmp_path / "bad.yaml", "- 1\n- 2\n")
    assert runner.main(["run", "alpha", "-f", str(tmp_path / "bad.yaml"), "--root", str(project)]) == 2
    assert "must be a mapping of parameter names" in capsys.readouterr().err
    assert runner.main(["list", "--root", str(project)]) == 0
    assert capsys.readouterr().out.startswith("alpha  Alpha")


def test_a_chapters_progress_reaches_our_stderr_when_asked(
    project: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    write(
        project / "notebooks" / "talk.py",
        '# %% tags=["parameters"]\nn = 2\n\n# %%\nimport sys\n'
        'for i in range(n):\n    print(f"step {i + 1}/{n}", file=sys.stderr)\n',
    )
    monkeypatch.setenv("ACE_PROGRESS", "1")
    runner.run_notebook("talk", root=project)
    err = capfd.readouterr().err
    assert "talk: executing (book profile)" in err and "step 1/2" in err and "step 2/2" in err
    monkeypatch.setenv("ACE_PROGRESS", "0")
    runner.run_notebook("talk", "book", {"n": 3}, root=project)
    assert "step 3/3" not in capfd.readouterr().err


def test_executed_chapters_start_with_the_hidden_colab_install_cell(project: Path) -> None:
    write(project / "_config.yml", "title: x\nrepository:\n  url: https://example.org/someone/book\n")
    out = runner.run_notebook("alpha", "smoke", root=project)
    first = json.loads(out.read_text())["cells"][0]
    assert first["metadata"]["tags"] == ["remove-cell", "colab-install"] and first["outputs"] == []
    assert "google.colab" in "".join(first["source"])
    assert '"clone", "--depth", "1", "https://example.org/someone/book"' in "".join(first["source"])
    assert runs(project) == ["3 x"]  # ran, and did nothing else off Colab
    write(project / "_config.yml", "title: x\nrepository:\n  url: not-a-url\n")
    with pytest.raises(ConfigError, match="repository.url must be the book's public https URL"):
        runner.run_notebook("alpha", "smoke", root=project, force=True)


def test_ctrl_c_prints_one_line_and_keeps_the_partial_notebook(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import papermill

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    assert runner.main(["run", "alpha", "--root", str(project)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["interrupted; the partially executed notebook is kept at _build/failed/alpha.ipynb"] or (
        len(err) == 1 and err[0].endswith("failed/alpha.ipynb")
    )
    assert (project / "_build" / "failed" / "alpha.ipynb").exists()


def test_a_new_results_folder_is_not_read_as_cached(project: Path, tmp_path: Path, monkeypatch) -> None:
    runner.run_notebook("alpha", "book", root=project)
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path / "elsewhere"))
    runner.run_notebook("alpha", "book", root=project)
    assert runs(project) == ["1 x", "1 x"]


def test_cli_failing_notebook_exits_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["run", "broken", "--root", str(project)]) == 1
    err = capsys.readouterr().err
    assert "error: notebook 'broken' failed in cell 3" in err


@pytest.mark.slow  # runs jupyter-book
def test_build_renders_the_book(project: Path) -> None:
    """End to end with the repository's real _config.yml (Sphinx warnings are errors)."""
    shutil.copy(REPO / "_config.yml", project / "_config.yml")
    shutil.copy(REPO / "references.bib", project / "references.bib")  # its bibtex_bibfiles
    shutil.copytree(
        REPO / "book" / "_ext",
        project / "book" / "_ext",  # its local_extensions
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    index = runner.build_book("smoke", root=project)
    assert index == project / "_build" / "html" / "index.html" and index.exists()
    page = (project / "_build" / "html" / "book" / "chapters" / "alpha.html").read_text()
    assert "Twice n is" in page and ">6<" in page  # the glued value of 2 * n with n = 3
    assert json.loads((project / "_build" / "timings.json").read_text())["render"]["ok"]
    write(project / "book" / "intro.md", "# Mini book\n\nSee {doc}`chapters/missing`.\n")
    with pytest.raises(runner.RenderError):
        runner.build_book("smoke", root=project)


# Records which profile it ran with, and what it read from the results root's "inbox" folder.
READER = """\
# ---
# jupyter:
#   corelib_inputs: [inbox]
# ---

# %% tags=["parameters"]
n = 1

# %%
import os, pathlib
inbox = pathlib.Path(os.environ["ACE_RESULTS_DIR"]) / "inbox"
seen = sorted(p.read_text() for p in inbox.glob("*.txt")) if inbox.exists() else []
with open("runs.txt", "a") as f:
    f.write(f"{os.environ.get('ACE_PROFILE')} {seen}\\n")
"""


def test_declared_inputs_invalidate_the_cache_and_profile_reaches_the_kernel(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_RESULTS_DIR", str(project / "results"))
    monkeypatch.delenv("ACE_PROFILE", raising=False)
    write(project / "notebooks" / "reader.py", READER)
    run = lambda: runner.run_notebook("reader", "smoke", root=project)  # noqa: E731
    run()
    run()
    assert runs(project) == ["smoke []"]  # cached while the inbox is unchanged
    write(project / "results" / "inbox" / "a.txt", "hello")
    run()
    assert runs(project)[-1] == "smoke ['hello']"  # a new input file re-runs it
    run()
    assert len(runs(project)) == 2
    (project / "results" / "inbox" / "a.txt").write_text("changed")
    run()
    assert runs(project)[-1] == "smoke ['changed']"  # so does a changed one
    assert "ACE_PROFILE" not in __import__("os").environ  # restored after the run


def test_declared_inputs_must_be_folder_names(project: Path) -> None:
    write(project / "notebooks" / "reader.py", READER.replace("[inbox]", "[../elsewhere]"))
    with pytest.raises(ConfigError, match="corelib_inputs must be a list of folder names"):
        runner.run_notebook("reader", "smoke", root=project)


def test_each_execution_records_its_run_time_and_a_cached_run_keeps_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_RESULTS_DIR", str(project / "results"))
    runner.run_notebook("alpha", "smoke", root=project)
    first = run_times.recorded_run_times(project / "results" / run_times.RUN_TIMES)
    assert [(r["chapter"], r["profile"]) for r in first] == [("alpha", "smoke")]
    executed = json.loads((project / "book" / "chapters" / "alpha.ipynb").read_text())
    assert first[0]["seconds"] == executed["metadata"][runner.METADATA_KEY]["seconds"] > 0
    runner.run_notebook("alpha", "smoke", root=project)  # cached: the record is the run's, unchanged
    assert run_times.recorded_run_times(project / "results" / run_times.RUN_TIMES) == first
    runner.run_notebook("alpha", "book", root=project)
    assert [r["profile"] for r in run_times.recorded_run_times(project / "results" / run_times.RUN_TIMES)] == ["book"]


# Stores a result the first time; later runs read it back (as a chapter over its results/ cache).
STORE = """\
# %% tags=["parameters"]
n = 1

# %%
import os, time
from pathlib import Path
path = Path(os.environ["ACE_RESULTS_DIR"]) / "store" / f"{n}.txt"
if not path.exists():
    time.sleep(0.5)  # the "computation"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("done")
"""


@pytest.mark.slow  # six notebook executions
def test_a_run_on_stored_results_keeps_the_time_of_the_run_that_computed_them(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_RESULTS_DIR", str(project / "results"))
    write(project / "notebooks" / "store.py", STORE)
    times = project / "results" / run_times.RUN_TIMES
    runner.run_notebook("store", "smoke", root=project)
    [first] = run_times.recorded_run_times(times)
    assert first["computed"] is True and first["seconds"] >= 0.5
    runner.run_notebook("store", "smoke", root=project, force=True)  # reads back what it stored
    assert run_times.recorded_run_times(times) == [first]
    # Mark the stored record, so that rewriting it shows even when two runs take the same time.
    (times / "store.json").write_text(json.dumps({**json.loads((times / "store.json").read_text()), "seconds": -1.0}))
    runner.run_notebook("store", "smoke", root=project, force=True, overrides={"n": 2})  # new result
    [again] = run_times.recorded_run_times(times)
    assert again["computed"] is True and again["finished"] >= first["finished"] and again["seconds"] >= 0.5
    runner.run_notebook("store", "book", root=project)  # another profile: recorded even if read back
    [book] = run_times.recorded_run_times(times)
    assert (book["profile"], book["computed"]) == ("book", False)
    (times / "store.json").unlink()
    runner.run_notebook("store", "book", root=project, force=True)  # no record yet: written, flagged
    assert [r["computed"] for r in run_times.recorded_run_times(times)] == [False]


def test_a_run_time_record_names_the_code_that_ran(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACE_RESULTS_DIR", str(project / "results"))
    times = project / "results" / run_times.RUN_TIMES
    runner.run_notebook("alpha", "smoke", root=project)
    [record] = run_times.recorded_run_times(times, root=project)
    assert record["corelib"] == run_times.corelib_hash(project)[: run_times.CODE_DIGITS]
    assert record["commit"] is None  # the mini project is not a git checkout
    assert record["same_code"] is True and run_times.code_label(record) == f"corelib {record['corelib']}"
    write(project / "corelib" / "__init__.py", "VALUE = 2\n")  # the code moves on; results stay
    [record] = run_times.recorded_run_times(times, root=project)
    assert record["same_code"] is False
    assert run_times.code_label(record) == f"corelib {record['corelib']} (other corelib)"
    unversioned = {k: v for k, v in record.items() if k not in ("corelib", "commit", "same_code")}
    save_json(times / "alpha.json", unversioned)  # a record without a code version
    [record] = run_times.recorded_run_times(times, root=project)
    assert record["same_code"] is None and run_times.code_label(record) == "not recorded"


def test_git_commit_names_the_checkout_and_flags_changed_code(project: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(project), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    assert run_times.git_commit(project) is None
    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "mini")
    head = git("rev-parse", "--short", "HEAD")
    assert run_times.git_commit(project) == head
    write(project / "book" / "intro.md", "# Edited\n")  # prose only: the code is unchanged
    assert run_times.git_commit(project) == head
    write(project / "notebooks" / "alpha.py", ALPHA + "\n# edited\n")
    assert run_times.git_commit(project) == f"{head}+modified"
    git("checkout", "-q", "--", "notebooks")
    write(project / "corelib" / "extra.py", "X = 1\n")  # an untracked module counts too
    assert run_times.git_commit(project) == f"{head}+modified"


def test_a_reader_of_run_times_is_not_invalidated_by_its_own_run_time(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_RESULTS_DIR", str(project / "results"))
    write(project / "notebooks" / "reader.py", READER.replace("[inbox]", f"[{run_times.RUN_TIMES}]"))
    runner.run_notebook("reader", "smoke", root=project)
    runner.run_notebook("reader", "smoke", root=project)
    assert len(runs(project)) == 1  # its own record is not an input of it
    runner.run_notebook("alpha", "smoke", root=project)  # alpha ran: that is news for the reader
    runner.run_notebook("reader", "smoke", root=project)
    assert len(runs(project)) == 3


def test_a_chapter_that_stores_no_results_records_each_run_as_computed(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACE_RESULTS_DIR", str(project / "results"))
    times = project / "results" / run_times.RUN_TIMES
    header = "# ---\n# jupyter:\n#   corelib_stores_results: {}\n# ---\n\n"
    body = '# %% tags=["parameters"]\nn = 1\n'
    write(project / "notebooks" / "closed.py", header.format("false") + body)
    runner.run_notebook("closed", "smoke", root=project)
    assert [r["computed"] for r in run_times.recorded_run_times(times)] == [True]  # its time is its cost
    write(project / "notebooks" / "plain.py", body)  # writes nothing and does not say so: read back
    runner.run_notebook("plain", "smoke", root=project)
    assert {r["chapter"]: r["computed"] for r in run_times.recorded_run_times(times)} == {
        "closed": True,
        "plain": False,
    }
    write(project / "notebooks" / "closed.py", header.format("'no'") + body)
    with pytest.raises(ConfigError, match="corelib_stores_results must be true or false"):
        runner.run_notebook("closed", "smoke", root=project)


@pytest.mark.parametrize("chapter", sorted(PARAMETER_CLASSES))
def test_each_chapter_builds_the_parameter_class_the_runner_checks_with(chapter: str) -> None:
    """The runner refuses values with the class of ``PARAMETER_CLASSES``: the chapter must build that one."""
    tree = ast.parse((ROOT / "notebooks" / f"{chapter}.py").read_text())
    aliases = {a.asname or a.name: f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
               for a in n.names}  # fmt: skip
    built = [
        f"{aliases[call.func.value.value.id]}:{call.func.value.attr}"
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "from_namespace"
        and isinstance(call.func.value, ast.Attribute)
        and isinstance(call.func.value.value, ast.Name)
    ]
    assert built == [PARAMETER_CLASSES[chapter]]


@pytest.mark.parametrize("chapter", ["grokking_sweeps", "core_inflation", "inflation_clock", "modular_addition"])
def test_bf16_where_it_would_be_emulated_is_refused_before_a_kernel_starts(
    chapter: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import corelib.precision as precision

    monkeypatch.setenv("ACE_DEVICE", "cpu")
    monkeypatch.setenv("ACE_RESULTS_DIR", str(tmp_path))
    monkeypatch.setattr(precision, "_cpu_has_bf16", lambda: False)
    with pytest.raises(ConfigError, match=rf"notebook '{chapter}': precision 'bf16' would be emulated on cpu"):
        runner.run_notebook(chapter, "book", {"precision": "bf16"})
    assert not any(tmp_path.iterdir())  # no kernel ran, nothing was computed


def test_a_converted_chapter_is_never_read_half_written(monkeypatch):
    """Two runners converting one chapter at once (two terminals, two test workers): the notebook
    the other reads is moved into place whole, never written where it is read."""
    import threading

    import nbformat

    from acebook import parameters

    written = []
    real_write = nbformat.write
    monkeypatch.setattr(nbformat, "write", lambda nb, fp, **k: written.append(Path(fp)) or real_write(nb, fp, **k))
    path = parameters._convert("ace_method", ROOT)
    assert written and path not in written  # written aside, then moved
    assert not list(path.parent.glob(f".{path.name}.*"))  # nothing left beside it
    monkeypatch.undo()

    failures = []

    def convert_and_read():
        try:
            for _ in range(5):
                parameters.inspect_notebook("ace_method", ROOT)
        except Exception as exc:  # noqa: BLE001 - any failure to read is the defect
            failures.append(exc)

    threads = [threading.Thread(target=convert_and_read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_the_command_line_starts_without_torch():
    # `ace-book` and `acebook.publish` check their flags and refuse bad input before they load torch,
    # pandas or TransformerLens (seconds each on a small machine); the chapters' kernels load them.
    code = (
        "import sys, acebook.runner, acebook.publish;"
        "print(sorted({'torch', 'pandas', 'transformer_lens'} & set(sys.modules)))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]", run.stdout
