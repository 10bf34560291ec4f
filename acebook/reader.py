"""The reader's copy of an executed chapter: its prose with the numbers, verdicts and figures in it.

A chapter's markdown cites its numbers with MyST roles (``{glue:text}`acc_min:.3f` ``), its
verdicts with ``{claim}`markov.rank <holds>` `` and its figures with ``{glue:figure}`` blocks.
Jupyter Book fills them in on the site; plain Jupyter, Colab or GitHub's preview show the raw
role text. So the runner writes two files per executed chapter:

- ``book/chapters/<name>.mystnb``: the executed notebook as papermill wrote it, roles intact. The
  site is rendered from it (``_config.yml`` reads ``.mystnb`` as a notebook).
- ``book/chapters/<name>.ipynb``: the reader's copy made by :func:`reader_copy`, the notebook a
  student opens (``ace-book run … -o`` writes it too; the Colab button opens it where the
  executed chapters are published at that path).
  Every glued value is written in the prose with the format the site uses, every verdict is a
  small link "✓ holds" with the value in its tooltip, every glued figure is an image attached to
  its cell with its caption below (a glued table: its HTML), boxes (admonitions, exercises, hints)
  are quoted blocks with a bold title, solutions are pointers to where they are kept, and roles
  (glossary terms, page links, references, citations) read as plain words.

Why a copy rather than an inline evaluation role (``{eval}`` of jupyterlab-myst): it works in
every notebook viewer, with no extension to install and no kernel to run, and it shows the
numbers of the run that produced them, not of whatever the kernel holds now.
"""

from __future__ import annotations

import copy
import html
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from .citations import badge, parse_target

__all__ = ["PREMISE_WARNING", "RAW_ROLE", "glued_values", "reader_copy"]

RAW_ROLE = re.compile(r"\{(?:glue[a-z:]*|claim|doc|ref|numref|term|eq|math|cite[a-z:]*|literalinclude)\}")
"""What must not be left in a reader's copy: the name of a MyST role or directive the copy rewrites."""

_GLUE_ROLE = re.compile(r"\{glue(?::text|:any)?\}`([^`]+)`")
_CLAIM_ROLE = re.compile(r"\{claim\}`([^`]+)`")
_FIGURE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{glue(?::figure)?\}\s*(?P<name>\S+)\s*\n(?P<body>.*?)^(?P=fence)\s*$", re.M | re.S
)
_TERM = re.compile(r"\{term\}`([^`<]+?)(?:\s*<[^`>]+>)?`")
_DOC = re.compile(r"\{doc\}`(?:([^`<]+?)\s*<([^`>]+)>|([^`]+))`")
_PREFIX = "application/papermill.record/"


def glued_values(nb: Any) -> dict[str, dict[str, Any]]:
    """Every value glued in an executed notebook, ``{name: mime bundle}`` (myst-nb's ``glue``)."""
    out = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("scrapbook")
            if meta:
                out[meta["name"]] = {k.removeprefix(_PREFIX): v for k, v in output.get("data", {}).items()}
    return out


def _text(bundle: Mapping[str, Any], spec: str) -> str:
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(bundle.get("text/plain", ""), spec)


def _glue_text(match: re.Match, values: Mapping[str, Mapping[str, Any]]) -> str:
    name, _, spec = match[1].strip().partition(":")
    if name not in values:
        raise KeyError(f"{{glue}}`{match[1]}`: the chapter glues no value named {name!r}")
    return _text(values[name], spec)


def _claim_link(match: re.Match, rows: Mapping[str, Mapping[str, Any]], broken: list) -> str:
    claim_id, declared = parse_target(match[1])
    if claim_id not in rows:
        raise KeyError(f"{{claim}}`{match[1]}`: no result is recorded for {claim_id!r}")
    b = badge(rows[claim_id], declared)
    if not b.premise_holds:
        broken.append(claim_id)
    return (
        f'<a href="claims.ipynb#{b.anchor}" title="{html.escape(b.tooltip, quote=True)}">'
        f"<b>{html.escape(b.label)}</b></a>"
    )


def _options_removed(body: str) -> str:
    return "\n".join(line for line in body.splitlines() if not re.match(r"^\s*:[\w-]+:", line)).strip()


def _figure(match: re.Match, *, values: Mapping[str, Mapping[str, Any]], attachments: dict) -> str:
    """A glued figure: an image attached to the cell, or a glued table's HTML, then its caption."""
    name = match["name"]
    if name not in values:
        raise KeyError(f"{{glue:figure}} {name}: the chapter glues no figure named {name!r}")
    bundle = values[name]
    if "image/png" in bundle:
        attachments[f"{name}.png"] = {"image/png": bundle["image/png"]}
        shown = f"![{name}](attachment:{name}.png)"
    elif "text/html" in bundle:
        shown = "".join(bundle["text/html"]).strip()
    else:
        shown = "```\n" + _text(bundle, "") + "\n```"
    caption = _options_removed(match["body"])
    return f"{shown}\n\n{caption}\n" if caption else f"{shown}\n"


_DIRECTIVE = re.compile(
    r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>[^\n]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S
)
_BOXES = {"admonition", "note", "tip", "hint", "important", "warning", "caution", "seealso", "dropdown", "exercise"}


def _quoted(title: str, body: str) -> str:
    lines = [f"**{title}**"] if title else []
    lines += ["", *_plain_directives(_options_removed(body)).splitlines()] if body.strip() else []
    return "\n".join(f"> {line}".rstrip() for line in lines) + "\n"


def _directive(m: re.Match) -> str:
    """A box (admonition, exercise, dropdown…) as a quoted block with its title in bold; a solution
    as a pointer to where it is kept (a reader's copy does not show solutions open); math as a
    display formula. Anything else is left as written."""
    name, arg = m["name"], m["arg"].strip()
    if name in _BOXES:
        title = arg or name.capitalize()
        return _quoted(f"Exercise: {title}" if name == "exercise" else title, m["body"])
    if name == "solution":
        found = re.search(r"\{include\}\s*(\S+)", m["body"])
        where = f" in `{found[1].replace('../', 'book/')}`" if found else ""
        return f"> **Solution**: on the book's site, in a dropdown, and{where}.\n"
    if name == "math":
        return f"$$\n{_options_removed(m['body'])}\n$$\n"
    if name == "literalinclude":
        return f"> The code shown here on the book's site is in `{arg.lstrip('/')}`.\n"
    return m[0]


def _plain_directives(text: str) -> str:
    return _DIRECTIVE.sub(_directive, text)


_REF = re.compile(r"\{(?:ref|numref|eq)\}`(?:([^`<]+?)\s*<[^`>]+>|([^`]+))`")
_CITE = re.compile(r"\{cite(?::[pt])?\}`([^`]+)`")
_MATH_ROLE = re.compile(r"\{math\}`([^`]+)`")


def _unnamed(label: str) -> str:
    """What a reference without a title points to, in words (the copy has no numbering)."""
    if label.startswith("fig"):
        return "the figure"
    return "the exercise" if "ex-" in label else "the section"


_TARGET = re.compile(r"^\([\w-]+\)=[ \t]*\n", re.M)


def _plain_roles(text: str) -> str:
    text = _TARGET.sub("", _TERM.sub(lambda m: m[1], text))
    text = _REF.sub(lambda m: m[1] or _unnamed(m[2].strip()), text)
    text = _CITE.sub(lambda m: f"({m[1]})", text)
    text = _MATH_ROLE.sub(lambda m: f"${m[1]}$", text)
    return _DOC.sub(lambda m: _doc_link(m[1] or m[3], (m[2] or m[3]).strip()), text)


def _doc_link(title: str, target: str) -> str:
    """A link to another chapter's reader's copy, or to a page of the book (a markdown file)."""
    return f"[{title}]({target}.md)" if target.startswith("../") else f"[{title}]({target}.ipynb)"


PREMISE_WARNING = (
    "> **⚠ This run changes what the text below assumes.** Each verdict marked ⚠ has another "
    "status than the sentence around it was written for (another profile, or your own parameters). "
    "Read those sentences with the values in the verdicts' tooltips."
)


def reader_copy(nb: Any, rows: Mapping[str, Mapping[str, Any]]) -> Any:
    """A copy of the executed notebook ``nb`` whose markdown shows the glued values, verdicts
    (judged by ``rows``, :func:`acebook.claims_page.citation_rows`) and figures; raises KeyError
    naming a role whose value the notebook does not hold."""
    out = copy.deepcopy(nb)
    values, broken = glued_values(nb), []
    for cell in out.cells:
        if cell.cell_type != "markdown":
            continue
        attachments: dict = dict(cell.get("attachments", {}))
        text = _FIGURE.sub(partial(_figure, values=values, attachments=attachments), cell.source)
        text = _GLUE_ROLE.sub(lambda m: _glue_text(m, values), text)
        text = _CLAIM_ROLE.sub(lambda m: _claim_link(m, rows, broken), text)
        cell.source = _plain_roles(_plain_directives(text))
        if attachments:
            cell["attachments"] = attachments
    if broken:
        from nbformat.v4 import new_markdown_cell

        warning = new_markdown_cell(PREMISE_WARNING)
        warning["id"] = "premise-warning"  # fixed, so that the same run writes the same copy
        out.cells.insert(0, warning)
    return out
