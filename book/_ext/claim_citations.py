"""The ``{claim}`` role: a sentence cites a claim of the paper or a finding of the book.

``{claim}`inflation.sufficient_stable <differs>``` renders as a small badge after the phrase it
supports: the status as a mark and a word ("≠ differs"), coloured by status, as the claims page
judges it (:func:`acebook.claims_page.citation_rows`, from the results the chapters recorded). Its
tooltip says what the number is, its value, the paper's value and the bound; it links to the
claim's row on the claims page (:func:`acebook.citations.badge`). The part in angle brackets is the
status the sentence assumes. When the run behind the page gives another status (a reader reran the
chapter with other parameters, say), the citation is marked and the page opens with a warning
that quotes each sentence whose premise no longer holds: prose is never silently wrong. An
unknown claim id or status is a Sphinx warning, which fails the book's build.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from acebook.citations import badge, parse_target
from acebook.claims_page import citation_rows

CLAIMS_PAGE = "book/chapters/claims"
STATIC = Path(__file__).parent / "static"

logger = logging.getLogger(__name__)


class claim_citation(nodes.inline):  # noqa: N801 - docutils names node classes in lower case
    """A cited claim, filled in when the page is written."""


def claim_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    try:
        claim_id, declared = parse_target(text)
    except (KeyError, ValueError) as exc:
        msg = inliner.reporter.warning(str(exc).strip('"'), line=lineno)
        return [inliner.problematic(rawtext, rawtext, msg)], [msg]
    node = claim_citation(rawtext, claim_id, classes=["claim-citation"])
    node["claim_id"], node["declared"] = claim_id, declared or ""
    return [node], []


def _rows(app: Sphinx) -> dict:
    if not hasattr(app, "_claim_rows"):
        app._claim_rows = citation_rows()
    return app._claim_rows


def _badge_node(app: Sphinx, docname: str, row: dict, declared: str) -> nodes.reference:
    """The badge of one citation: a link to the claim's row on the claims page, with a tooltip."""
    b = badge(row, declared or None)
    uri = "" if docname == CLAIMS_PAGE else app.builder.get_relative_uri(docname, CLAIMS_PAGE)
    classes = ["claim-badge", b.css_class] + ([] if b.premise_holds else ["claim-premise"])
    node = nodes.reference("", "", refuri=f"{uri}#{b.anchor}", reftitle=b.tooltip, classes=classes)
    node += nodes.inline(text=b.label)
    return node


def _sentence(paragraph: nodes.Node, marker: str) -> str:
    """The sentence of ``paragraph`` holding ``marker``, the marker shown as "[…]"."""
    text = " ".join(paragraph.astext().split())
    at = text.find(marker)
    before = text.rfind(". ", 0, at)
    start = before + 2 if before >= 0 else 0
    end = text.find(". ", at)
    return text[start : end + 1 if end >= 0 else len(text)].replace(marker, "[…]")


def _quoted(node: claim_citation) -> str:
    """The sentence around a citation, read before any citation of the page is filled in (the
    others show as their claim ids)."""
    saved, node.children = node.children, []
    node += nodes.Text(_MARK)
    try:
        return _sentence(node.parent, _MARK)
    finally:
        node.children = saved


_MARK = "\u2063CITED\u2063"


def _add_style(app: Sphinx) -> None:
    app.config.html_static_path.append(str(STATIC))
    app.add_css_file("claim_badges.css")


def _fill(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    cited = list(doctree.findall(claim_citation))
    if not cited:
        return
    rows, broken = _rows(app), []
    sentences = [_quoted(node) for node in cited]
    for node, sentence in zip(cited, sentences):
        row, declared = rows[node["claim_id"]], node["declared"]
        shown = _badge_node(app, docname, row, declared)
        if "claim-premise" in shown["classes"]:
            broken.append((node["claim_id"], declared, row, sentence))
        node.replace_self(shown)
    if broken:
        _warn_at_top(doctree, broken)


def _warn_at_top(doctree: nodes.document, broken: list) -> None:
    box = nodes.admonition(classes=["warning", "claim-premises"])
    box += nodes.title(text="This run changes what the text below assumes")
    box += nodes.paragraph(
        text=(
            "The sentences below were written for the book's results. The results behind this page "
            "(another profile, or your own parameters) give another status for what they cite, so read "
            "them with the values shown, marked ⚠ in the text:"
        )
    )
    items = nodes.bullet_list()
    for claim_id, declared, row, sentence in broken:
        item = nodes.list_item()
        item += nodes.paragraph(
            text=f"“{sentence}” cites {claim_id}, assumed {declared}; this run: {row['status']} ({row['ours']})."
        )
        items += item
    box += items
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is not None and section.children and isinstance(section[0], nodes.title):
        section.insert(1, box)
    else:
        doctree.insert(0, box)


def setup(app: Sphinx) -> dict:
    app.add_node(claim_citation)
    app.add_role("claim", claim_role)
    app.connect("builder-inited", _add_style)
    app.connect("doctree-resolved", _fill)
    return {"parallel_read_safe": True, "parallel_write_safe": False}
