"""Publishing the book: the links of the launch buttons, and the branch of executed chapters they open.

The site goes to GitHub Pages (``.github/workflows/book.yml``). Each chapter page carries Binder
and Colab buttons; both open ``book/chapters/<name>.ipynb`` in the repository ``repository.url``
of ``_config.yml`` (the one place the repository is named), at the branch ``repository.branch``.
That branch holds what nothing else does: ``.gitignore`` keeps executed chapters off every branch
people work on, so :func:`publish_notebooks` writes it after each build, as one commit on top of
the commit it built (its tree plus the executed chapters), pushed over the branch's last one
(only ever over a commit it made itself).

``python -m acebook.publish check --repository https://github.com/<owner>/<repo>`` refuses a
``_config.yml`` naming another repository (a fork that has not set its own);
``python -m acebook.publish notebooks --source-branch <branch built>`` writes and pushes the
branch; ``links <chapter>`` prints a chapter's launch links.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import yaml

from .project import CHAPTER_DIR, ConfigError, chapters, output_path, project_root, repository_url

__all__ = [
    "PUBLISHED_TRAILER",
    "LaunchSettings",
    "launch_settings",
    "launch_links",
    "notebook_path",
    "publish_notebooks",
    "main",
]

_INTERFACES = {"classic": "tree", "jupyterlab": "lab/tree"}  # Jupyter Book's notebook_interface values


@dataclass(frozen=True)
class LaunchSettings:
    """What the launch buttons are built from, all read from ``_config.yml``.

    ``url``: the repository, ``https://github.com/<owner>/<repo>``; ``branch``: the branch of
    executed chapters; ``path_to_book``: the book's folder in the repository ("" at its root);
    ``binderhub``, ``colab``: the services' addresses; ``interface``: the path prefix of the
    Jupyter interface Binder opens (``lab/tree`` or ``tree``).
    """

    url: str
    branch: str
    path_to_book: str
    binderhub: str
    colab: str
    interface: str

    @property
    def owner_repo(self) -> str:
        """``<owner>/<repo>`` of :attr:`url`."""
        return urlparse(self.url).path.strip("/").removesuffix(".git")


def _config(root: Path) -> dict:
    return yaml.safe_load((root / "_config.yml").read_text()) or {}


def launch_settings(root: str | os.PathLike | None = None) -> LaunchSettings:
    """The :class:`LaunchSettings` of the project at ``root``; a setting the buttons cannot work
    with is a :class:`ConfigError` naming the key and the fix."""
    root = project_root(root)
    url = repository_url(root)
    if url is None:
        raise ConfigError(f"no _config.yml in {root}: the launch buttons are configured there.")
    parsed = urlparse(url)
    if parsed.netloc != "github.com" or len(parsed.path.strip("/").split("/")) != 2:
        raise ConfigError(
            f"_config.yml: repository.url must be a GitHub repository, https://github.com/<owner>/<repo> "
            f"(Colab opens notebooks from GitHub only), got {url!r}."
        )
    config = _config(root)
    repository, buttons = config.get("repository") or {}, config.get("launch_buttons") or {}
    branch = repository.get("branch")
    if not isinstance(branch, str) or not branch.strip():
        raise ConfigError("_config.yml: set repository.branch, the branch of executed chapters the buttons open.")
    interface = buttons.get("notebook_interface", "classic")
    if interface not in _INTERFACES:
        raise ConfigError(
            f"_config.yml: launch_buttons.notebook_interface must be one of {sorted(_INTERFACES)}, got {interface!r}."
        )
    return LaunchSettings(
        url=url,
        branch=branch.strip(),
        path_to_book=str(repository.get("path_to_book") or "").strip("/"),
        binderhub=str(buttons.get("binderhub_url") or "").rstrip("/"),
        colab=str(buttons.get("colab_url") or "").rstrip("/"),
        interface=_INTERFACES[interface],
    )


def notebook_path(name: str, settings: LaunchSettings) -> str:
    """The repository path of chapter ``name``'s executed notebook, the file both buttons open."""
    return "/".join(p for p in (settings.path_to_book, CHAPTER_DIR, f"{name}.ipynb") if p)


def launch_links(name: str, root: str | os.PathLike | None = None) -> dict[str, str]:
    """The links of chapter ``name``'s launch buttons, ``{"Binder": url, "Colab": url}`` (a service
    without an address in ``_config.yml`` has no button), as Jupyter Book builds them."""
    settings = launch_settings(root)
    path = notebook_path(name, settings)
    links = {}
    if settings.binderhub:
        links["Binder"] = (
            f"{settings.binderhub}/v2/gh/{settings.owner_repo}/{settings.branch}?urlpath={settings.interface}/{path}"
        )
    if settings.colab:
        links["Colab"] = f"{settings.colab}/github/{settings.owner_repo}/blob/{settings.branch}/{path}"
    return links


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout.strip()


def _executed_chapters(root: Path) -> list[Path]:
    """Every chapter's executed notebook, in the order of ``_toc.yml``; refused if one is missing."""
    paths = [output_path(name, root) for name in chapters(root)]
    missing = [p.stem for p in paths if not p.is_file()]
    if missing:
        raise ConfigError(
            f"no executed notebook of {', '.join(missing)} in {CHAPTER_DIR}/: build the book first (`make book`)."
        )
    return paths


# The trailer that marks a commit of executed chapters made here: only such a commit is replaced.
PUBLISHED_TRAILER = "Published-by: acebook.publish"


def _remote_default_branch(root: Path, remote: str) -> str | None:
    """The branch ``remote``'s HEAD names (its default branch), or None where it names none."""
    for line in _git(root, "ls-remote", "--symref", remote, "HEAD").splitlines():
        if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
            return line[len("ref: refs/heads/") : -len("\tHEAD")]
    return None


def _refuse_work_branch(root: Path, branch: str, remote: str, source_branch: str | None, push: bool) -> None:
    """Refuse a ``repository.branch`` that is a branch people work on: the one checked out, the one
    the build came from, or ``remote``'s default branch (the push would replace its history)."""
    current = _git(root, "rev-parse", "--abbrev-ref", "HEAD")  # "HEAD" when detached
    try:
        default = _remote_default_branch(root, remote)
    except RuntimeError:
        if push:
            raise
        default = None  # a commit made without pushing needs no remote
    roles = [(current, "the branch checked out here"), (source_branch, "the branch this build came from"),
             (default, f"the default branch of {remote}")]  # fmt: skip
    for name, role in roles:
        if name and name != "HEAD" and name == branch:
            raise ConfigError(
                f"_config.yml: repository.branch is {branch!r}, {role}; name a branch of its own for the "
                "executed chapters (e.g. executed-chapters): publishing replaces that branch's commit."
            )


def _published_tip(root: Path, remote: str, branch: str) -> str:
    """The commit at ``branch`` of ``remote`` ("" where there is none), refused unless publishing made it."""
    listed = _git(root, "ls-remote", remote, f"refs/heads/{branch}").split()
    if not listed:
        return ""
    tip = listed[0]
    shallow = _git(root, "rev-parse", "--is-shallow-repository") == "true"
    _git(root, "fetch", "--quiet", "--no-tags", *(["--depth=1"] if shallow else []), remote, f"refs/heads/{branch}")
    message = _git(root, "log", "-1", "--format=%B", tip)
    if PUBLISHED_TRAILER not in message.splitlines():
        raise ConfigError(
            f"branch {branch!r} of {remote} is at {tip[:12]}, a commit publishing did not make (no "
            f"{PUBLISHED_TRAILER!r} line): it would be overwritten. Set repository.branch to a branch of its own, "
            f"or delete that branch on {remote} if it holds only executed chapters."
        )
    return tip


def publish_notebooks(
    root: str | os.PathLike | None = None,
    remote: str = "origin",
    push: bool = True,
    *,
    source_branch: str | None = None,
) -> str:
    """Commit the executed chapters on top of ``HEAD`` for the launch buttons, and push that commit
    to ``repository.branch`` of ``remote`` in place of the branch's last one; returns the commit.

    The commit is made through a temporary index: the checkout's own index, branch and files are
    left as they are. The buttons' branch must not be a branch people work on: not the one checked
    out, not ``source_branch`` (the branch the build came from; a CI checkout is detached, so pass
    it), not ``remote``'s default branch. The push replaces only a commit this function made (its
    message carries :data:`PUBLISHED_TRAILER`), and only if the branch is still there when it lands
    (``--force-with-lease``); a branch that does not exist yet is created.
    """
    root = project_root(root)
    branch = launch_settings(root).branch
    _refuse_work_branch(root, branch, remote, source_branch, push)
    notebooks = [str(p.relative_to(root)) for p in _executed_chapters(root)]
    head = _git(root, "rev-parse", "HEAD")
    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        _git(root, "read-tree", head, env=env)
        _git(root, "add", "--force", "--", *notebooks, env=env)
        tree = _git(root, "write-tree", env=env)
    message = f"The executed chapters of {head[:12]}, opened by the launch buttons\n\n{PUBLISHED_TRAILER}"
    commit = _git(root, "commit-tree", tree, "-p", head, "-m", message)
    if push:
        expected = _published_tip(root, remote, branch)
        _git(
            root, "push", f"--force-with-lease=refs/heads/{branch}:{expected}", remote, f"{commit}:refs/heads/{branch}"
        )
    return commit


def check_repository(expected: str, root: str | os.PathLike | None = None) -> None:
    """Refuse a ``repository.url`` that is not ``expected`` (the repository being built)."""
    url = launch_settings(root).url

    def norm(u: str) -> str:
        return u.rstrip("/").removesuffix(".git").lower()

    if norm(url) != norm(expected):
        raise ConfigError(
            f"_config.yml: repository.url is {url}, but this is {expected}: the launch buttons would open the "
            f"other repository's notebooks. Set repository.url to {expected}."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acebook.publish", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="refuse a _config.yml that names another repository")
    check.add_argument("--repository", required=True, help="https://github.com/<owner>/<repo> being built")
    notebooks = sub.add_parser("notebooks", help="push the executed chapters to repository.branch")
    notebooks.add_argument("--remote", default="origin")
    notebooks.add_argument("--no-push", action="store_true", help="make the commit only")
    notebooks.add_argument("--source-branch", help="the branch the build came from (refused as the target)")
    links = sub.add_parser("links", help="print a chapter's launch links")
    links.add_argument("chapter")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            check_repository(args.repository)
            print(f"repository.url is {args.repository}")
        elif args.command == "notebooks":
            commit = publish_notebooks(remote=args.remote, push=not args.no_push, source_branch=args.source_branch)
            print(f"executed chapters committed as {commit}" + ("" if args.no_push else f", pushed to {args.remote}"))
        else:
            for service, url in launch_links(args.chapter).items():
                print(f"{service}: {url}")
    except (ConfigError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
