# Token by Token — the two commands: `make book` and `make test`.
# Both first make sure .venv exists with the exact lock installed (reinstalled only when
# requirements/lock.txt changes) and tokenbook installed editable from lib/.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LOCK := requirements/lock.txt
STAMP := $(VENV)/.lock-$(shell sha256sum $(LOCK) 2>/dev/null | cut -c1-16)

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: book test unit venv notebooks nbval-refs clean-book clean-runs help

help:
	@echo "make book   execute every chapter at tiny scale (through the runner) and build _build/html"
	@echo "make test   unit tests, then every chapter at tiny scale + the strict book build (last test)"
	@echo "make unit   the fast tier: every test not marked slow (a few minutes at most)"
	@echo "make student  the student edition of the exercise pages (solutions stubbed) -> _build/student"
	@echo "make nbval-refs record the nbval references of the built pages (after make book)"
	@echo "make notebooks  regenerate notebooks/<chapter>.ipynb from the .py chapters (commit them)"

venv: $(STAMP)

$(STAMP): $(LOCK) pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -r $(LOCK)
	$(BIN)/python -m pip install --no-deps -e .
	rm -f $(VENV)/.lock-*
	touch $(STAMP)

# notebooks/<chapter>.ipynb (for papermill, Jupyter, Colab, Binder) are generated from the .py
# chapters; a test fails when one is out of date.
notebooks: $(STAMP)
	$(BIN)/python -m tokenbook.book.notebooks

# tests/nbval/<chapter>.ipynb: the nbval references of the built pages (after `make book`);
# review the diff and commit them.
nbval-refs: $(STAMP)
	$(BIN)/python -m tokenbook.book.nbcheck --update

book: $(STAMP)
	$(BIN)/tokenbook build

# the fast tier: every test not marked slow (slow: over a second measured on 2 cores; make test
# runs them all)
unit: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

# Two pytest runs. First every unit test, fast and slow, on two xdist processes (one torch
# thread each: many tests wait on a kernel or a subprocess, and two processes at two threads
# each spin-wait on two cores). Then, alone, the real book (REAL_BOOK, enabled by
# TOKENBOOK_TEST_BOOK=1): every chapter at tiny scale through the runner, the strict build, its
# pages and their nbval references; `make book` afterwards reuses those runs.
REAL_BOOK := tests/foundation/test_foundation_book_build_real.py \
	tests/foundation/test_foundation_book_build_real_html.py \
	tests/foundation/test_foundation_book_build_real_nbval.py
test: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 --dist loadfile \
		$(addprefix --ignore=,$(REAL_BOOK))
	TOKENBOOK_TEST_BOOK=1 $(BIN)/python -m pytest -p no:xdist $(REAL_BOOK)

clean-book:
	rm -rf _build/html _build/jupyter_execute _build/.doctrees _build/.jupyter_cache

clean-runs:
	rm -rf _build/runs _build/book_runs.json _build/scorecard.md

# The student edition of the exercise pages (notebooks/exercises/<chapter>.py with every
# solution replaced by a stub raising NotImplementedError), generated, never edited: see
# book/course.md.
.PHONY: student
student: $(STAMP)
	$(BIN)/tokenbook exercises student --all --out _build/student
