# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BOOKGEN := $(VENV)/bin/bookgen
STAMP := $(VENV)/.installed

.PHONY: demo sample test lint engines bench clean golden golden-write cycle-demo

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU build of torch first, so the project's torch range installs nothing more.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[all,test]'
	touch $(STAMP)

# Debian packages the tests need: the engines of the engine tests and the
# README's examples, and the headless browser of the report tests. apt-get
# needs root, as in CI; as a user, install them first.
ENGINE_PACKAGES := fairy-stockfish gpsshogi chromium
engines:
	@if [ ! -x /usr/games/fairy-stockfish ] || [ ! -x /usr/games/gpsusi ] || [ ! -x /usr/bin/chromium ]; then \
		echo "make engines: installing $(ENGINE_PACKAGES) with apt-get (the engine tests and the README's examples play fairy-stockfish and gpsusi; the report tests render in chromium)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(ENGINE_PACKAGES); \
	fi

# Grow a book from the initial position with the built-in evaluator for a
# minute, show what it holds, then measure with it.
demo: $(STAMP)
	mkdir -p demo
	rm -f demo/book.sqlite demo/book.sqlite-wal demo/book.sqlite-shm demo/book.sqlite-lock
	$(BOOKGEN) grow -b demo/book.sqlite --time 60 --positions 100000 --playouts 100
	$(BOOKGEN) stats -b demo/book.sqlite
	$(BOOKGEN) show -b demo/book.sqlite startpos
	$(BOOKGEN) export -b demo/book.sqlite -o demo/book.db
	# Measure: balanced openings from the book, a match of two built-in players, a report.
	# The players differ by a full ply (depth 1 and 2): a node budget only counts after
	# the first iteration, so small budgets (300 and 1500 nodes) mostly search alike.
	rm -f demo/results.sqlite demo/results.sqlite-wal demo/results.sqlite-shm
	$(BOOKGEN) suite -b demo/book.sqlite -o demo/suite.txt --max-value 150 --min-ply 3 \
		--max-ply 9 --limit 8 --seed 1
	$(BOOKGEN) match --engine weak=builtin --option weak:depth=1 --engine strong=builtin \
		--option strong:depth=2 --openings demo/suite.txt --nodes 1 --max-ply 160 \
		--concurrency 2 -o demo/results.sqlite
	$(BOOKGEN) rate demo/results.sqlite -s 1000
	$(BOOKGEN) report demo/results.sqlite -b demo/book.sqlite -o demo/report.html

# The book's reinforcement-learning loop, two short generations end to end (data/cycle.toml:
# a random 1x16 network, Fairy-Stockfish as the refine engine; a few minutes on a laptop CPU),
# then the report across the generations.
cycle-demo: $(STAMP) engines
	rm -rf demo/cycle
	$(BOOKGEN) cycle -c data/cycle.toml --generations 2
	$(BOOKGEN) report --cycle demo/cycle -s 200

# Import the sample book analysed by Fairy-Stockfish and print its stats.
sample: $(STAMP)
	mkdir -p demo
	rm -f demo/sample.sqlite demo/sample.sqlite-wal demo/sample.sqlite-shm demo/sample.sqlite-lock
	$(BOOKGEN) import data/sample.db -b demo/sample.sqlite
	$(BOOKGEN) stats -b demo/sample.sqlite

test: $(STAMP) lint engines
	$(PY) -m pytest -n 2 -q

# Lint and types, before the tests (CI fails on any finding): ruff on the whole tree
# (pyproject.toml [tool.ruff]), mypy on the library as installed, with refine/, selfplay/
# and analysis/ inside bookgen ([tool.mypy]; .ci/typecheck.py says why it needs a helper).
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) .ci/typecheck.py

# Identical outputs (tests/golden/README.md): the tree against tests/golden/manifest.json,
# fairy-stockfish's part (G14) included; golden-write rewrites the manifest.
golden: $(STAMP) engines
	$(PY) tests/golden/golden.py check --engines

golden-write: $(STAMP) engines
	$(PY) tests/golden/golden.py write --engines

bench: $(STAMP) engines
	$(PY) benchmarks/bench_formats.py
	$(PY) benchmarks/bench_grow.py
	$(PY) benchmarks/bench_match.py
	$(PY) benchmarks/bench_ratings.py

clean:
	rm -rf $(VENV) demo .pytest_cache .hypothesis .golden .ruff_cache .mypy_cache build/typecheck
