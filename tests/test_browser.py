"""The smoke book in a real browser: headless Chromium opens every page of the built site.

The site is served from 127.0.0.1 by a local HTTP server, and Chromium runs with its background
networking off, so the pages must work without any network. For each page we check that

- the page and every resource it requests load (no failed request, no HTTP error, no request
  to any host but the local server, no uncaught script error),
- every image (figures included) is loaded and has a non-zero natural width,
- MathJax typeset every math element and no raw TeX delimiter is left in the text,
- no executed output shows a Python traceback.

A screenshot of the Markov chapter is saved to `_build/artifacts/markov_chain.png` of this
checkout (or `$ACE_ARTIFACTS_DIR`). Chromium is Debian's `chromium` package, which `make test`
installs; it is driven over the Chrome DevTools Protocol with `websocket-client`.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import posixpath
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.slow  # builds the whole book and drives Chromium

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("ACE_ARTIFACTS_DIR", ROOT / "_build" / "artifacts"))
SCREENSHOT_PAGE = "book/chapters/markov_chain.html"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
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
VIEWPORT = (1280, 1800)
PAGE_TIMEOUT = 60.0  # seconds for one page to load, typeset and settle


def chromium_executable() -> str:
    """Debian's chromium (or $CHROMIUM); fails, never skips, when there is none."""
    wanted = os.environ.get("CHROMIUM", "chromium")
    found = shutil.which(wanted)
    if found is None:
        pytest.fail(
            f"headless Chromium is needed for this test but {wanted!r} was not found. "
            "`make test` installs Debian's package (apt-get install chromium) when "
            "/usr/bin/chromium is missing; install it, or set CHROMIUM to a Chromium "
            "executable.",
            pytrace=False,
        )
    return found


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


# --------------------------------------------------------------------------- Chrome DevTools


class DevTools:
    """A minimal Chrome DevTools Protocol client for one page target."""

    def __init__(self, ws_url: str) -> None:
        import websocket  # websocket-client, a test dependency

        self._ws = websocket.create_connection(ws_url, timeout=PAGE_TIMEOUT, suppress_origin=True)
        self._timeout_error = websocket.WebSocketTimeoutException
        self._next_id = 0
        self.events: list[dict] = []

    def close(self) -> None:
        self._ws.close()

    def _receive(self, deadline: float) -> dict:
        self._ws.settimeout(max(0.05, deadline - time.monotonic()))
        return json.loads(self._ws.recv())

    def call(self, method: str, **params) -> dict:
        self._next_id += 1
        call_id = self._next_id
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        deadline = time.monotonic() + PAGE_TIMEOUT
        while True:
            message = self._receive(deadline)
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str):
        """Value of a JavaScript expression (promises are awaited)."""
        result = self.call(
            "Runtime.evaluate",
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
            timeout=PAGE_TIMEOUT * 1000,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def pump(self, until, timeout: float) -> bool:
        """Collect events until ``until(events)`` is true; False on time-out."""
        deadline = time.monotonic() + timeout
        while not until(self.events):
            if time.monotonic() >= deadline:
                return False
            try:
                message = self._receive(deadline)
            except self._timeout_error:
                return until(self.events)
            if "method" in message:
                self.events.append(message)
        return True


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A DevTools connection to the page of a fresh headless Chromium."""
    executable = chromium_executable()
    profile = tmp_path_factory.mktemp("chromium-profile")
    log = open(profile.parent / "chromium.log", "wb")
    process = subprocess.Popen(
        [
            executable,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
            "about:blank",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    devtools = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if process.poll() is not None or time.monotonic() > deadline:
                log.flush()
                raise RuntimeError(
                    f"chromium did not start (exit code {process.poll()}):\n"
                    + (profile.parent / "chromium.log").read_text()[-3000:]
                )
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as reply:
            targets = json.load(reply)
        page = next(t for t in targets if t["type"] == "page")
        devtools = DevTools(page["webSocketDebuggerUrl"])
        for domain in ("Page", "Network", "Runtime"):
            devtools.call(f"{domain}.enable")
        devtools.call("Network.setCacheDisabled", cacheDisabled=True)
        devtools.call(
            "Emulation.setDeviceMetricsOverride",
            width=VIEWPORT[0],
            height=VIEWPORT[1],
            deviceScaleFactor=1,
            mobile=False,
        )
        yield devtools
    finally:
        if devtools is not None:
            devtools.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


# --------------------------------------------------------------------------- one page

# Runs in the page once it has loaded: waits for images and MathJax, then reports.
_INSPECT = r"""
(async () => {
  await Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  const hasMath = document.querySelector('.math') !== null;
  if (hasMath && window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await document.fonts.ready;
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
  };
})()
"""


def _request_problems(events: list[dict], base: str) -> list[str]:
    """Failed requests, HTTP errors and requests to anything but the local server."""
    base = f"{urlsplit(base).scheme}://{urlsplit(base).netloc}/"
    host = urlsplit(base).netloc
    urls: dict[str, str] = {}
    problems = []
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            urls[params["requestId"]] = url
            if not url.startswith(("data:", "blob:", "about:")) and urlsplit(url).netloc != host:
                problems.append(f"request to another host: {url}")
        elif method == "Network.loadingFailed":
            url = urls.get(params["requestId"], params["requestId"])
            problems.append(
                f"failed request: {url} ({params.get('errorText')}"
                f"{', blocked: ' + params['blockedReason'] if params.get('blockedReason') else ''})"
            )
        elif method == "Network.responseReceived":
            status = params["response"]["status"]
            url = params["response"]["url"]
            # The browser itself asks every site for /favicon.ico; the book declares no icon.
            if status >= 400 and url != base + "favicon.ico":
                problems.append(f"HTTP {status}: {url}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            description = details.get("exception", {}).get("description") or details.get("text")
            problems.append(f"uncaught script error: {description}")
    return problems


def _settled(events: list[dict]) -> bool:
    """True once the load event fired and no request is still in flight."""
    if not any(e["method"] == "Page.loadEventFired" for e in events):
        return False
    pending = set()
    for event in events:
        request = event.get("params", {}).get("requestId")
        if event["method"] == "Network.requestWillBeSent":
            pending.add(request)
        elif event["method"] in ("Network.loadingFinished", "Network.loadingFailed"):
            pending.discard(request)
    return not pending


def open_page(browser: DevTools, url: str) -> tuple[dict, list[str]]:
    """Load ``url``, wait until it has settled; return (page report, request problems)."""
    browser.events.clear()
    result = browser.call("Page.navigate", url=url)
    if result.get("errorText"):
        return {}, [f"navigation failed: {result['errorText']}"]
    if not browser.pump(lambda ev: any(e["method"] == "Page.loadEventFired" for e in ev), PAGE_TIMEOUT):
        return {}, ["the page did not finish loading"]
    report = browser.evaluate(_INSPECT)
    # Late requests (MathJax fonts and extensions): let them finish, then a short quiet period.
    browser.pump(_settled, PAGE_TIMEOUT)
    browser.pump(lambda ev: False, 0.3)
    browser.pump(_settled, PAGE_TIMEOUT)
    return report, _request_problems(browser.events, url)


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


# --------------------------------------------------------------------------- the test


def test_every_page_in_headless_chromium(site, browser, built_book):
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
    failures: dict[str, list[str]] = {}
    start = time.perf_counter()
    for page in pages:
        report, problems = open_page(browser, base + page)
        if report:
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
                problems += [
                    f"MathJax loaded from elsewhere: {s}" for s in report["mathjaxSrc"] if not s.startswith(base)
                ]
            problems += [f"raw TeX delimiter {d!r} left in the text" for d in report["rawTex"]]
            problems += [f"Python traceback in an output: {t!r}" for t in report["tracebacks"]]
            if page in chapters and not report["launch"]:
                problems.append("no Binder/Colab launch buttons")
        if page == SCREENSHOT_PAGE:
            _screenshot(browser, ARTIFACTS / "markov_chain.png")
        if problems:
            failures[page] = problems
    seconds = time.perf_counter() - start
    print(f"opened {len(pages)} pages in {seconds:.1f} s; screenshot: {ARTIFACTS / 'markov_chain.png'}")
    assert not failures, "\n".join(f"{page}:\n  " + "\n  ".join(problems) for page, problems in failures.items())


def _image_outputs(notebook: Path) -> int:
    """Number of image outputs in an executed notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum(
        1
        for cell in cells
        for output in cell.get("outputs", [])
        if any(kind.startswith("image/") for kind in output.get("data", {}))
    )


def _screenshot(browser: DevTools, path: Path) -> None:
    """Screenshot of the current page, scrolled so that its first typeset equation shows."""
    browser.evaluate(r"""(() => {
      const math = document.querySelector('mjx-container[display="true"], mjx-container');
      window.scrollTo(0, math ? Math.max(0, math.getBoundingClientRect().top + window.scrollY - 300) : 0);
      return true;
    })()""")
    browser.evaluate("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
    data = browser.call("Page.captureScreenshot", format="png")["data"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(data))
