# make book [PROFILE=smoke|book|paper]   execute the notebooks and render _build/html
# make test                              run the test suite
# Both create .venv and install the project into it when needed.

PYTHON ?= python3
PROFILE ?= book
# e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu" where no CPU wheel is cached
TORCH_PIP_ARGS ?=
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: book test

book: $(STAMP)
	$(VENV)/bin/python -m corelib.runner build --profile $(PROFILE)

test: $(STAMP)
	$(VENV)/bin/python -m pytest

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# torch first, pinned, so that pip picks the CPU wheel and never pulls the CUDA stack.
$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install "torch==2.13.0" $(TORCH_PIP_ARGS)
	$(VENV)/bin/python -m pip install -e ".[test]"
	touch $(STAMP)
