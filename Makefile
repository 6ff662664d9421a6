# Two commands on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BOOKGEN := $(VENV)/bin/bookgen
STAMP := $(VENV)/.installed

.PHONY: demo test engines bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# CPU build of torch first, so the project's torch range installs nothing more.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Debian engines used by the engine tests (needs root, as in CI).
engines:
	@if [ ! -x /usr/games/fairy-stockfish ] || [ ! -x /usr/games/gpsusi ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fairy-stockfish gpsshogi; \
	fi

demo: $(STAMP)
	mkdir -p demo
	rm -f demo/book.sqlite demo/book.sqlite-wal demo/book.sqlite-shm
	$(BOOKGEN) import data/sample.db -b demo/book.sqlite
	$(BOOKGEN) stats -b demo/book.sqlite
	$(BOOKGEN) show -b demo/book.sqlite startpos

test: $(STAMP) engines
	$(PY) -m pytest -n 2 -q

bench: $(STAMP)
	$(PY) benchmarks/bench_formats.py

clean:
	rm -rf $(VENV) demo .pytest_cache .hypothesis
