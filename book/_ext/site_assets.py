"""Assets of the built site: MathJax served locally, and each inline script included once.

Math renders without a network: MathJax 3 (its components, TeX extensions and fonts) comes
from the PyPI package ``sphinx-mathjax-offline``, a dependency in pyproject.toml; only its files
are used (not its Sphinx extension, which would override ``mathjax_path``). This extension adds
the package's ``static`` folder to ``html_static_path``, so Sphinx copies it to
``_build/html/_static/mathjax``, and checks that ``mathjax_path`` (set in _config.yml, relative
to ``_static``) names one of those files.

Sphinx 7.4 puts some inline scripts of extensions on every page twice (sphinx-thebe's
``const THEBE_JS_URL = ...`` among them, which then fails in the browser with "Identifier
'THEBE_JS_URL' has already been declared"); the second copy of each is dropped.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

PACKAGE = "sphinx-mathjax-offline"


def mathjax_static_folder() -> Path:
    """The package folder holding ``mathjax/`` (MathJax's ``es5`` build)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ConfigError(
            f"MathJax is served from the Python package {PACKAGE!r}, which is not installed: pip install {PACKAGE}"
        )
    return Path(spec.origin).parent / "static"


def _configure(app: Sphinx, config: Config) -> None:
    folder = mathjax_static_folder()
    path = config.mathjax_path
    if "://" in path or path.startswith("/"):
        raise ConfigError(
            f"mathjax_path = {path!r} is not served locally; name a file of "
            f"{folder / 'mathjax'} relative to it, e.g. mathjax/tex-mml-chtml.js"
        )
    if not (folder / path).is_file():
        raise ConfigError(f"mathjax_path = {path!r}: no such file in {folder}")
    config.html_static_path.append(str(folder))


def _drop_duplicate_scripts(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        if not hasattr(script, "attributes"):  # a plain file name
            unique.append(script)
            continue
        # The same inline script comes once with filename None and once with '': compare bodies.
        key = (
            script.filename or "",
            tuple(sorted((k, str(v)) for k, v in script.attributes.items() if k != "priority")),
        )
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure)
    # after the other extensions have added their page scripts
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
