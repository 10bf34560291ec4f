"""The smoke book in a real browser: headless Chromium opens every page of the built site.

The site is served from 127.0.0.1 by a local HTTP server, and Chromium runs with its background
networking off, so the pages must work without any network. For each page we check that

- the page and every resource it requests load (no failed request, no HTTP error, no request
  to any host but the local server, no uncaught script error),
- every image (figures included) is loaded and has a non-zero natural width,
- MathJax typeset every math element and no raw TeX delimiter is left in the text,
- no executed output shows a Python traceback.

A screenshot of the Markov chapter is saved to `_build/artifacts/markov_chain.png` of this
checkout (or `$ACE_ARTIFACTS_DIR`). Playwright drives the system's Chromium (Debian's `chromium`
package, which `make chromium` installs, or `$CHROMIUM`); it never downloads a browser. Without
a Chromium that starts, the test is skipped, or fails when `$CI` is set.
"""

from __future__ import annotations

import functools
import json
import os
import posixpath
import re
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import pytest

from conftest import in_ci

try:
    from playwright.sync_api import Browser, Page, Request, Response, sync_playwright
    from playwright.sync_api import Error as PlaywrightError
except ImportError:
    if in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install -e '.[test]' (or make test)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("ACE_ARTIFACTS_DIR", ROOT / "_build" / "artifacts"))
SCREENSHOT_PAGE = "book/chapters/markov_chain.html"
# pages photographed for a reader of the test's artifacts (the clock and the window: the verdicts)
SCREENSHOT_PAGES = (SCREENSHOT_PAGE, "book/chapters/inflation_clock.html", "book/chapters/interpretability_window.html")
CLAIMS_PAGE = "book/chapters/claims.html"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
# Headless and without sandbox come from launch(); these keep Chromium off the network and
# quiet (Playwright passes most of them too, they are listed so the test does not rely on it).
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
]
VIEWPORT = {"width": 1280, "height": 1800}
PAGE_TIMEOUT = 60.0  # seconds for one page to load, typeset and settle
QUIET = 0.3  # seconds without a request in flight before a page counts as settled


# --------------------------------------------------------------------------- finding Chromium


def find_chromium(env: Mapping[str, str] = os.environ) -> str | None:
    """Path of $CHROMIUM (a name or a path) if set, else of the first Chromium on PATH."""
    wanted = env.get("CHROMIUM")
    if wanted:
        return shutil.which(wanted)
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


def no_browser(reason: str, env: Mapping[str, str] = os.environ, details: str = "") -> NoReturn:
    """Skip the test for want of a browser, or fail it in CI; the message names the fix.

    ``details`` (what the browser printed, say) follow the message on lines of their own.
    """
    required = in_ci(env)
    message = f"{reason}. Run `make chromium` (installs Debian's chromium package) or set CHROMIUM=/path/to/chromium."
    if required:
        message += f" CI={env['CI']!r}, so a missing browser fails the test."
    if details:
        message += "\n" + details
    if required:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def launch_failure(message: str, most: int = 30) -> str:
    """The telling lines of Playwright's launch error: its first line, then what the browser printed."""
    lines = message.splitlines()
    printed = [line.strip(" -") for line in lines if "][err]" in line or "process did exit" in line]
    return "\n".join([lines[0], *dict.fromkeys(printed)][:most])


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable; requested before the book build, so a missing one skips at once."""
    found = find_chromium()
    if found is None:
        wanted = os.environ.get("CHROMIUM")
        no_browser(
            f"CHROMIUM={wanted!r} is not an executable"
            if wanted
            else f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)})"
        )
    return found


@pytest.fixture(scope="module")
def browser(chromium) -> Iterator[Browser]:
    """The system's Chromium, headless, launched by Playwright."""
    with sync_playwright() as playwright:
        try:
            launched = playwright.chromium.launch(
                executable_path=chromium,
                args=CHROMIUM_ARGS,
                headless=True,
                chromium_sandbox=False,
                timeout=PAGE_TIMEOUT * 1000,
            )
        except PlaywrightError as error:
            no_browser(f"{chromium} did not start", details=launch_failure(error.message))
        try:
            yield launched
        finally:
            launched.close()


# --------------------------------------------------------------------------- local web server


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (signature of the base class)
        pass


@pytest.fixture(scope="module")
def site(built_book):
    """(base URL, html folder): the built smoke book served on 127.0.0.1."""
    root, index = built_book
    html = index.parent
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(html)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", html
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- one page

# Runs in the page once it has loaded: waits (at most `limit` ms each) for images and MathJax,
# then reports.
_INSPECT = r"""
async (limit) => {
  const within = promise => Promise.race([promise, new Promise(done => setTimeout(done, limit))]);
  await within(Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); }))));
  const hasMath = document.querySelector('.math') !== null;
  if (hasMath && window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await within(MathJax.startup.promise);
  }
  await within(document.fonts.ready);
  const text = el => (el.textContent || '').trim().slice(0, 120);
  const body = document.body.cloneNode(true);
  body.querySelectorAll('pre, code, script, style, textarea, mjx-container, .highlight')
      .forEach(el => el.remove());
  const prose = body.textContent;
  const outputs = [...document.querySelectorAll('.cell_output, .output')];
  return {
    title: document.title,
    content: (document.querySelector('article, main, [role=main]') || {innerText: ''}).innerText.trim().length,
    images: [...document.images].map(img => ({src: img.currentSrc || img.src,
        ok: img.complete && img.naturalWidth > 0})),
    figures: document.querySelectorAll('.cell_output img, figure img, img.figure').length,
    mathjax: typeof window.MathJax === 'object' && !!MathJax.startup,
    mathjaxSrc: [...document.scripts].map(s => s.src).filter(s => /mathjax/i.test(s)),
    math: document.querySelectorAll('.math').length,
    typeset: document.querySelectorAll('mjx-container').length,
    untypeset: [...document.querySelectorAll('.math')]
        .filter(el => el.tagName !== 'MJX-CONTAINER' && !el.querySelector('mjx-container'))
        .map(text),
    mathErrors: [...document.querySelectorAll('mjx-merror, [data-mjx-error]')].map(text),
    rawTex: ['$$', '\\(', '\\)', '\\[', '\\begin{'].filter(d => prose.includes(d)),
    tracebacks: outputs.filter(o => /Traceback|\btraceback\b/.test(o.className) ||
        /Traceback \(most recent call last\)|^\w+(Error|Exception)\s+Traceback/m.test(o.textContent))
        .map(text),
    launch: [...document.querySelectorAll('a[href]')].map(a => a.href)
        .filter(h => /mybinder\.org|colab\.research\.google\.com/.test(h)),
    badges: [...document.querySelectorAll('a.claim-badge')].map(a => ({
        text: a.textContent.trim(), title: a.title, href: a.href,
        background: getComputedStyle(a).backgroundColor,
        inSentence: !!a.closest('p, li')})),
    anchors: [...document.querySelectorAll('[id^="claim-"]')].map(el => el.id),
  };
}
"""

# Scrolls so that the first typeset equation shows, then waits for two frames to be painted.
_SCROLL_TO_MATH = r"""
async () => {
  const math = document.querySelector('mjx-container[display="true"], mjx-container');
  window.scrollTo(0, math ? Math.max(0, math.getBoundingClientRect().top + window.scrollY - 300) : 0);
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
}
"""


class RequestWatch:
    """Records, while a page loads, what goes wrong with its requests and scripts.

    `problems` collects failed requests, HTTP errors, requests to any host but the local server
    and uncaught script errors; `pending` holds the requests still in flight.
    """

    def __init__(self, page: Page, base: str) -> None:
        self.host = urlsplit(base).netloc
        self.problems: list[str] = []
        self.pending: set[Request] = set()
        page.on("request", self._request)
        page.on("requestfinished", self._finished)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)
        page.on("pageerror", self._script_error)

    def _request(self, request: Request) -> None:
        self.pending.add(request)
        url = request.url
        if not url.startswith(("data:", "blob:", "about:")) and urlsplit(url).netloc != self.host:
            self.problems.append(f"request to another host: {url}")

    def _finished(self, request: Request) -> None:
        self.pending.discard(request)

    def _failed(self, request: Request) -> None:
        self.pending.discard(request)
        self.problems.append(f"failed request: {request.url} ({request.failure})")

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status}: {response.url}")

    def _script_error(self, error: PlaywrightError) -> None:
        self.problems.append(f"uncaught script error: {error.stack or error.message}")

    def wait_until_settled(self, page: Page) -> bool:
        """Wait until no request has been in flight for QUIET seconds; False on time-out."""
        deadline = time.monotonic() + PAGE_TIMEOUT
        quiet_since = None
        while time.monotonic() < deadline:
            if self.pending:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= QUIET:
                return True
            page.wait_for_timeout(50)  # lets Playwright deliver the page's events
        return False


def open_page(browser: Browser, url: str, screenshot: Path | None = None) -> tuple[dict, list[str]]:
    """Load ``url`` in a fresh context and let it settle; return (page report, request and script problems).

    A fresh context per page has an empty cache, so every page requests all its resources.
    With ``screenshot``, a picture of the page (scrolled to its first equation) is saved there.
    """
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT * 1000)
        watch = RequestWatch(page, url)
        try:
            page.goto(url, wait_until="load")
            report = page.evaluate(_INSPECT, PAGE_TIMEOUT * 1000)
        except PlaywrightError as error:
            return {}, [
                *watch.problems,
                f"the page did not load or could not be inspected: {error.message.splitlines()[0]}",
            ]
        if not watch.wait_until_settled(page):
            watch.problems += [f"request still pending after {PAGE_TIMEOUT:.0f} s: {r.url}" for r in watch.pending]
        if screenshot is not None:
            page.evaluate(_SCROLL_TO_MATH)
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=screenshot)
        return report, watch.problems
    finally:
        context.close()


def page_problems(
    report: dict, page: str, base: str, chapters: list[str], figures_expected: dict[str, int]
) -> list[str]:
    """What the in-page report of ``page`` shows to be wrong."""
    problems = []
    if not report["title"] or not report["content"]:
        problems.append("the page has no title or no content")
    problems += [f"image not loaded: {img['src']}" for img in report["images"] if not img["ok"]]
    if page in figures_expected and not report["figures"]:
        problems.append(f"no figure shown, though the notebook has {figures_expected[page]} image outputs")
    if report["math"]:
        if not report["mathjax"]:
            problems.append("the page has math but MathJax did not start")
        problems += [f"math not typeset: {t!r}" for t in report["untypeset"]]
        problems += [f"MathJax error: {t!r}" for t in report["mathErrors"]]
        problems += [f"MathJax loaded from elsewhere: {s}" for s in report["mathjaxSrc"] if not s.startswith(base)]
    problems += [f"raw TeX delimiter {d!r} left in the text" for d in report["rawTex"]]
    problems += [f"Python traceback in an output: {t!r}" for t in report["tracebacks"]]
    if page in chapters and not report["launch"]:
        problems.append("no Binder/Colab launch buttons")
    problems += badge_problems(report["badges"])
    return problems


_BADGE = re.compile(r"^[✓≠✗≈○] (reproduced|holds|differs|does not hold|reduced settings|not run)( ⚠)?$")


def badge_problems(badges: list[dict]) -> list[str]:
    """A verdict badge shows a mark and a word, carries its value in a tooltip, is coloured, sits
    in its sentence, and links to a claim's row on the claims page."""
    problems = []
    for b in badges:
        if not _BADGE.match(b["text"]):
            problems.append(f"a badge reads {b['text']!r}, not a mark and a status word")
        if ": " not in b["title"] or " · " not in b["title"]:
            problems.append(f"badge {b['text']!r} has no value in its tooltip: {b['title']!r}")
        if not re.search(r"claims\.html#claim-[a-z0-9-]+$", b["href"]):
            problems.append(f"badge {b['text']!r} does not link to a row of the claims page: {b['href']}")
        if b["background"] in ("rgba(0, 0, 0, 0)", "transparent"):
            problems.append(f"badge {b['text']!r} is not styled (claim_badges.css not loaded)")
        if not b["inSentence"]:
            problems.append(f"badge {b['text']!r} is not inside a paragraph or list item")
    return problems


def site_pages(html: Path) -> tuple[list[str], dict[str, str]]:
    """(pages, redirects) of the built site, as paths relative to its root.

    A redirect is a file holding only a meta refresh (Jupyter Book's root index.html); it maps
    to its target, resolved against the site root.
    """
    pages, redirects = [], {}
    for path in sorted(html.rglob("*.html")):
        name = path.relative_to(html).as_posix()
        if name.startswith(("_static/", "_sources/")):
            continue
        refresh = re.fullmatch(r'\s*<meta http-equiv="Refresh" content="0; url=([^"]+)" />\s*', path.read_text(), re.I)
        if refresh:
            redirects[name] = posixpath.normpath(posixpath.join(posixpath.dirname(name), refresh[1]))
        else:
            pages.append(name)
    return pages, redirects


def _image_outputs(notebook: Path) -> int:
    """Number of image outputs in an executed notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum(
        1
        for cell in cells
        for output in cell.get("outputs", [])
        if any(kind.startswith("image/") for kind in output.get("data", {}))
    )


# --------------------------------------------------------------------------- the tests


@pytest.mark.slow  # builds the whole book and drives Chromium
def test_every_page_in_headless_chromium(chromium, built_book, site, browser):
    from acebook import project

    base, html = site
    pages, redirects = site_pages(html)
    assert pages, f"no HTML page in {html}"
    broken = {name: target for name, target in redirects.items() if target not in pages}
    assert not broken, f"redirects to missing pages: {broken}"
    chapters = [f"book/chapters/{name}.html" for name in project.chapters(built_book[0])]
    assert set(chapters) <= set(pages), f"chapters missing from the site: {set(chapters) - set(pages)}"
    assert SCREENSHOT_PAGE in pages

    figures_expected = {
        f"book/chapters/{name}.html": count
        for name in project.chapters(built_book[0])
        if (count := _image_outputs(project.output_path(name, built_book[0])))
    }
    screenshot = ARTIFACTS / "markov_chain.png"
    failures: dict[str, list[str]] = {}
    start = time.perf_counter()
    links, anchors = set(), set()
    for page in pages:
        shot = ARTIFACTS / f"{Path(page).stem}.png" if page in SCREENSHOT_PAGES else None
        report, problems = open_page(browser, base + page, shot)
        if report:
            problems += page_problems(report, page, base, chapters, figures_expected)
            links |= {b["href"].rsplit("#", 1)[1] for b in report["badges"] if "#" in b["href"]}
            if page == CLAIMS_PAGE:
                anchors = set(report["anchors"])
        if problems:
            failures[page] = problems
    assert links, "no verdict badge on any page"
    assert links <= anchors, f"badges link to rows the claims page lacks: {sorted(links - anchors)[:5]}"
    seconds = time.perf_counter() - start
    print(f"opened {len(pages)} pages in {seconds:.1f} s; screenshot: {screenshot}")
    assert not failures, "\n".join(f"{page}:\n  " + "\n  ".join(problems) for page, problems in failures.items())


@pytest.mark.parametrize(
    ("ci", "outcome"),
    [
        (None, pytest.skip.Exception),
        ("", pytest.skip.Exception),
        ("0", pytest.skip.Exception),
        ("false", pytest.skip.Exception),
        ("False", pytest.skip.Exception),
        ("true", pytest.fail.Exception),
        ("1", pytest.fail.Exception),
        ("yes", pytest.fail.Exception),
    ],
)
def test_missing_browser_skips_except_in_ci(ci, outcome):
    env = {} if ci is None else {"CI": ci}
    with pytest.raises(outcome, match=r"make chromium.*CHROMIUM=/path"):
        no_browser("no Chromium on PATH", env)


def test_launch_failure_keeps_what_the_browser_printed():
    message = (
        "BrowserType.launch: Target page, context or browser has been closed\nBrowser logs:\n\n"
        "<launching> /usr/bin/chromium --headless --no-sandbox\n[pid=7][err] cannot open display\n"
        "Call log:\n  - <launching> /usr/bin/chromium --headless --no-sandbox\n"
        "  - [pid=7][err] cannot open display\n  - [pid=7] <process did exit: exitCode=1, signal=null>\n"
    )
    assert launch_failure(message).splitlines() == [
        "BrowserType.launch: Target page, context or browser has been closed",
        "[pid=7][err] cannot open display",
        "[pid=7] <process did exit: exitCode=1, signal=null>",
    ]


def test_chromium_variable_names_the_executable():
    assert find_chromium({"CHROMIUM": "/nonexistent/chromium"}) is None
    assert find_chromium({"CHROMIUM": sys.executable}) == sys.executable
