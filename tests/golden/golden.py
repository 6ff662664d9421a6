#!/usr/bin/env python3
"""Golden outputs: bookgen's output files, byte for byte, before and after a change.

Runs a fixed scenario of bookgen commands (import, refine, grow, stats, show,
merge, starts, suite, selfplay, match, rate, sprt, outcomes, report, every
--help) in a scratch directory, normalises what is volatile (times, pids,
temporary paths: see NORMALISATION below) and hashes every output. The hashes
are kept in manifest.json next to this file.

    golden.py check [--engines]              the working tree against manifest.json
    golden.py write [--engines] [--baseline REV]   rewrite manifest.json
    golden.py compare --baseline REV [--current REV] [--engines]
                                             two revisions against each other
    golden.py diff NAME                      unified diff of one output, last two runs
    golden.py run OUTDIR [--tree DIR]        run the scenario, keep everything in OUTDIR

This tool imports nothing from bookgen (only the standard library), so the
same file can judge any revision: the scenario runs bookgen in subprocesses
through the console-script entry point that the tree's pyproject.toml
declares (today ``bookgen = "bookgen.__main__:main"``), exactly as the installed
``bookgen`` command does, with relative paths from OUTDIR/work. A revision
other than the working tree is extracted with ``git archive`` and run with
PYTHONPATH pointing at it, in the same Python environment (see ``_shim``).

NORMALISATION (every source of run-to-run difference found, and what is done):

Fixed in the environment of every command (``command_env``):
- PYTHONHASHSEED=0: set and dict-of-str iteration order would otherwise vary
  between runs. (The scenario gave identical outputs with 0 and 1 when this
  was written; the seed is fixed so that no future set order can flake.)
- TZ=UTC, LC_ALL/LANG=C.UTF-8: dates and text encoding do not depend on the host.
- COLUMNS=80: click wraps --help text to the terminal width.
- OMP/OPENBLAS/MKL_NUM_THREADS=1: BLAS reductions (ratings, pandas) give the
  same last bits whatever the number of cores.
- MPLBACKEND=Agg, MPLCONFIGDIR=<state dir>/matplotlib, SOURCE_DATE_EPOCH=0: no
  user matplotlibrc restyles the report's figures, and no figure gets a
  creation date (matplotlib writes PNGs with only a 'Software' text chunk,
  which names its version: PNG bytes are compared for one matplotlib version,
  recorded in the manifest).
- BOOKGEN_* and PYTHON* variables of the caller are removed (a test's
  BOOKGEN_FAULT must not leak in).
- --workers 1 (the default) wherever results arrive in completion order; match
  --concurrency 1; seeds fixed; no time budgets (--positions, --games, --nodes).

Normalised in the outputs (``normalise_*``):
- Every text output: the absolute paths of the scratch directory and of the
  tree become <work> and <tree>; ISO-8601 timestamps
  (2024-01-02T03:04:05+00:00) become <time>; the program name click prints
  ('python -m bookgen.cli', a script path) becomes 'bookgen'.
- JSON (stdout of --json, JSON files, JSON in SQLite columns): keys for
  durations and rates are dropped: 'seconds' (a number or a dict of them),
  '*_seconds', '*_per_second', 'peak_memory_mb', 'overhead_per_game', 'pid',
  'outside_evaluator_share' (grow's share of time outside the evaluator).
  The rest is re-serialised in its own key order; the first line of a
  normalised JSON output names the layout the command printed (indent=2,
  compact, ...) so a change of layout still shows.
- SQLite files are dumped as text (schema, user_version, then every table
  ordered by primary key, values typed: NULL, ints, floats by repr, strings as
  JSON strings, blobs as hex), with volatile columns replaced by <time> /
  <ms> / <version> when not NULL: books' runs.started_at/ended_at/
  bookgen_version, analyses.created_at, mistakes.created_at, meta created_at/
  created_by; results' meta.created_at, matches.started_at/updated_at,
  games.started_at/finished_at/black_ms/white_ms, moves.time_ms. runs.params and runs.counts
  go through the JSON rule (so counts lose pid/seconds, and params keep
  everything, draw values included).
- PGN: the [Date "..."] tag line is dropped (the day the game was played).
- The report: 'report generated <time> by bookgen X' loses the version too.
- Binary outputs (apery .bin, hcpe, hcp, psfen, policy, .npy, PNG) are
  compared as they are.

After normalising, every text output is scanned for what still looks
volatile (today's date, the scratch path, /tmp/): such hits are printed as
warnings, never silently accepted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import difflib
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent                 # the checkout this tool belongs to
MANIFEST = HERE / "manifest.json"
STATE = ROOT / ".golden"                  # last outputs (for `diff`), matplotlib cache
FAIRY = "/usr/games/fairy-stockfish"
ENGINE_STEP = "G14"                       # the step that needs real engines
COMMAND_TIMEOUT = 600                     # seconds; a hang fails the run instead of blocking
LIBRARIES = ("cshogi", "numpy", "pandas", "scipy", "matplotlib", "click", "tqdm")


class GoldenError(Exception):
    """A scenario command failed or the tool was misused."""


# ---------------------------------------------------------------------------
# normalisation

_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
_PROG = re.compile(r"python3? -m bookgen(?:\.cli)?\b")
_GENERATED = re.compile(r"(generated <time> by bookgen) [^\s<]+?(\.?)(?=[\s<]|$)", re.M)
_VOLATILE_KEYS = {"seconds", "peak_memory_mb", "overhead_per_game", "pid",
                  "outside_evaluator_share"}
_VOLATILE_SUFFIXES = ("_seconds", "_per_second")


@dataclasses.dataclass(frozen=True)
class Paths:
    """Absolute paths that must not reach an output: replaced by placeholders."""

    work: str
    tree: str
    tmp: str = tempfile.gettempdir()

    def replace(self, text: str) -> str:
        for path, name in sorted(((self.work, "<work>"), (self.tree, "<tree>")),
                                 key=lambda p: -len(p[0])):
            text = text.replace(path + os.sep, name + "/").replace(path, name)
        return text


def normalise_text(text: str, paths: Paths) -> str:
    text = paths.replace(text)
    text = _TIME.sub("<time>", text)
    return _PROG.sub("bookgen", text)


def volatile_key(key: str) -> bool:
    return key in _VOLATILE_KEYS or key.endswith(_VOLATILE_SUFFIXES)


def drop_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: drop_volatile(v) for k, v in value.items() if not volatile_key(k)}
    if isinstance(value, list):
        return [drop_volatile(v) for v in value]
    return value


_LAYOUTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("indent=2", {"indent": 2, "ensure_ascii": False}),
    ("indent=2 ascii", {"indent": 2}),
    ("one line", {"ensure_ascii": False}),
    ("one line ascii", {}),
    ("compact", {"separators": (",", ":"), "ensure_ascii": False}),
    ("sorted indent=2", {"indent": 2, "ensure_ascii": False, "sort_keys": True}),
)


def normalise_json(text: str, paths: Paths) -> str:
    """JSON without its volatile keys, re-serialised; line 1 names the original layout."""
    data = json.loads(text)
    stripped = text.rstrip("\n")
    trailing = len(text) - len(stripped)
    layout = "other"
    for name, kwargs in _LAYOUTS:
        if json.dumps(data, **kwargs) == stripped:
            layout = name
            break
    body = json.dumps(drop_volatile(data), indent=2, ensure_ascii=False)
    return f"# json layout: {layout}, {trailing} trailing newline(s)\n" + \
        normalise_text(body, paths) + "\n"


def normalise_json_column(text: str, paths: Paths) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return normalise_text(text, paths)
    if not isinstance(data, (dict, list)):
        return normalise_text(text, paths)
    return normalise_text(json.dumps(drop_volatile(data), ensure_ascii=False), paths)


def normalise_pgn(text: str, paths: Paths) -> str:
    kept = [line for line in text.splitlines(keepends=True) if not line.startswith("[Date ")]
    return normalise_text("".join(kept), paths)


def normalise_report(text: str, paths: Paths) -> str:
    return _GENERATED.sub(r"\1 <version>\2", normalise_text(text, paths))


# (table, column) -> placeholder, for SQLite dumps. "meta" rows are keyed by
# their 'key' column instead (see _META_VOLATILE).
_VOLATILE_COLUMNS = {
    ("runs", "started_at"): "<time>", ("runs", "ended_at"): "<time>",
    ("runs", "bookgen_version"): "<version>",
    ("analyses", "created_at"): "<time>", ("mistakes", "created_at"): "<time>",
    ("matches", "started_at"): "<time>", ("matches", "updated_at"): "<time>",
    ("games", "started_at"): "<time>", ("games", "finished_at"): "<time>",
    ("games", "black_ms"): "<ms>", ("games", "white_ms"): "<ms>",
    ("moves", "time_ms"): "<ms>",
}
_JSON_COLUMNS = {("runs", "params"), ("runs", "counts"), ("matches", "settings"),
                 ("players", "options")}
_META_VOLATILE = {"created_at": "<time>", "created_by": "<version>"}


def _cell(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):           # not produced by sqlite3, kept for clarity
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return "x'" + value.hex() + "'"
    return json.dumps(value, ensure_ascii=False)


def dump_sqlite(path: Path, paths: Paths) -> str:
    """The content of a SQLite file as text: schema, then every table by primary key."""
    uri = f"file:{path}?mode=ro"
    connection = sqlite3.connect(uri, uri=True)
    try:
        out = [f"# user_version {connection.execute('PRAGMA user_version').fetchone()[0]}"]
        schema = connection.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
        out.append("## schema")
        out.extend("\t".join(_cell(v) for v in row) for row in schema)
        tables = [name for kind, name, _t, _s in schema if kind == "table"]
        for table in tables:
            info = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
            columns = [row[1] for row in info]
            keys = [row[1] for row in sorted(info, key=lambda r: r[5]) if row[5] > 0]
            order = ", ".join(f'"{c}"' for c in (keys or columns))
            out.append(f"## {table}")
            out.append("\t".join(columns))
            for row in connection.execute(f'SELECT * FROM "{table}" ORDER BY {order}'):
                cells = []
                for column, value in zip(columns, row):
                    placeholder = _VOLATILE_COLUMNS.get((table, column))
                    if table == "meta" and column == "value":
                        placeholder = _META_VOLATILE.get(row[0])
                    if placeholder is not None and value is not None:
                        cells.append(placeholder)
                    elif (table, column) in _JSON_COLUMNS and isinstance(value, str):
                        cells.append(_cell(normalise_json_column(value, paths)))
                    elif isinstance(value, str):
                        cells.append(_cell(normalise_text(value, paths)))
                    else:
                        cells.append(_cell(value))
                out.append("\t".join(cells))
        return "\n".join(out) + "\n"
    finally:
        connection.close()


def suspicious(text: str, paths: Paths) -> list[str]:
    """What still looks volatile after normalising (printed as warnings)."""
    today = datetime.datetime.now(datetime.UTC).date()
    needles = {today.isoformat(), today.strftime("%Y.%m.%d"), paths.work, paths.tmp + "/"}
    return sorted(n for n in needles if n and n in text)


# ---------------------------------------------------------------------------
# the scenario

Kind = str   # "text" | "json" | "pgn" | "report" | "binary" | "sqlite"


@dataclasses.dataclass
class Cmd:
    """One bookgen command; ``stdout`` names the output its stdout is hashed as."""

    args: list[str]
    stdout: str | None = None
    kind: Kind = "text"
    files: Sequence[tuple[str, str, Kind]] = ()   # (path in work dir, output name, kind)


@dataclasses.dataclass
class Parallel:
    """Commands that only read what earlier steps wrote: run side by side."""

    commands: list[Cmd]


@dataclasses.dataclass
class Action:
    """A step done by the tool itself (copying a book, generating an input)."""

    run: Callable[[Runner], None]
    label: str


Step = Cmd | Parallel | Action


def cmd(*args: str, out: str | None = None, kind: Kind = "text",
        files: Sequence[tuple[str, str, Kind]] = ()) -> Cmd:
    return Cmd(list(args), out, kind, list(files))


def dump(db: str, name: str) -> Action:
    return Action(lambda r: r.record(name, "sqlite", r.work / db), f"dump {db}")


def record_file(path: str, name: str, kind: Kind) -> Action:
    return Action(lambda r: r.record(name, kind, r.work / path), f"hash {path}")


def copy_book(src: str, dst: str) -> Action:
    def run(r: Runner) -> None:
        source = sqlite3.connect(f"file:{r.work / src}?mode=ro", uri=True)
        target = sqlite3.connect(r.work / dst)
        try:
            source.backup(target)
        finally:
            target.close()
            source.close()
    return Action(run, f"copy {src} -> {dst}")


def record_dir(directory: str, prefix: str, kind: Kind) -> Action:
    def run(r: Runner) -> None:
        base = r.work / directory
        if not base.is_dir():
            raise GoldenError(f"{directory}: no such directory after the scenario step")
        for path in sorted(p for p in base.rglob("*") if p.is_file()):
            r.record(f"{prefix}/{path.relative_to(base).as_posix()}", kind, path)
    return Action(run, f"hash {directory}/*")


def inputs(r: Runner) -> None:
    """gen.db (generated, seed 1) and data/sample.db, always from this tool's checkout."""
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate_book.py"),
                    "--positions", "3000", "--seed", "1", "-o", "gen.db"],
                   cwd=r.work, env=r.env, check=True, capture_output=True,
                   timeout=COMMAND_TIMEOUT)
    shutil.copyfile(ROOT / "data" / "sample.db", r.work / "sample.db")
    r.record("G1/gen.db", "text", r.work / "gen.db")
    r.record("G1/sample.db", "text", r.work / "sample.db")


EXPORTS = (("db2016", "db"), ("apery", "bin"), ("policy", "policy"), ("hcpe", "hcpe"))
_EXPORT_KIND = {"db2016": "text", "apery": "binary", "policy": "text", "hcpe": "binary"}


def exports(step: str, book: str, stem: str, values: str) -> list[Cmd]:
    commands = []
    for fmt, ext in EXPORTS:
        path = f"{stem}.{ext}"
        files = [(path, f"{step}/{path}", _EXPORT_KIND[fmt])]
        if fmt == "hcpe":
            files.append((f"{path}.policy.npy", f"{step}/{path}.policy.npy", "binary"))
        commands.append(cmd("export", "-b", book, "-o", path, "--format", fmt,
                            "--values", values, "--json",
                            out=f"{step}/export-{stem}-{fmt}.json", kind="json", files=files))
    return commands


def g1_g6() -> list[Step]:
    steps: list[Step] = [
        # G1 import
        Action(inputs, "inputs"),
        cmd("import", "sample.db", "-b", "sample.sqlite", "--json",
            out="G1/import-sample.json", kind="json"),
        cmd("import", "gen.db", "-b", "gen.sqlite", out="G1/import-gen.txt"),
        dump("sample.sqlite", "G1/sample.sqlite"),
        dump("gen.sqlite", "G1/gen.sqlite"),
        # G2 refine minimax over a generated book with transpositions, both methods
        copy_book("gen.sqlite", "gen-ns.sqlite"),
        cmd("refine", "minimax", "-b", "gen.sqlite", "--json", out="G2/minimax.json", kind="json"),
        cmd("refine", "minimax", "-b", "gen-ns.sqlite", "--method", "negascout",
            "--draw-value-black", "400", "--draw-value-white", "600", "--json",
            out="G2/negascout.json", kind="json"),
        dump("gen.sqlite", "G2/gen.sqlite"),
        dump("gen-ns.sqlite", "G2/gen-ns.sqlite"),
        Parallel([
            *exports("G2", "gen.sqlite", "gen-minimax", "minimax"),
            *exports("G2", "gen-ns.sqlite", "gen-ns-minimax", "minimax")[:1],
            cmd("export", "-b", "gen.sqlite", "-o", "gen-raw.db", "--values", "raw", "--noe",
                out="G2/export-gen-raw.txt", files=[("gen-raw.db", "G2/gen-raw.db", "text")]),
        ]),
        # G3 grow: three strategies, one colour, and growing an imported book
        cmd("grow", "-b", "grown.sqlite", "--playouts", "40", "--positions", "40",
            "--seed", "1", "--json", out="G3/grow-dlshogi.json", kind="json"),
        cmd("grow", "-b", "grown.sqlite", "--strategy", "book-mcts", "--playouts", "40",
            "--positions", "10", "--seed", "2", "--json", out="G3/grow-book-mcts.json",
            kind="json"),
        cmd("grow", "-b", "grown.sqlite", "--strategy", "dropout", "--playouts", "40",
            "--positions", "10", "--json", out="G3/grow-dropout.json", kind="json"),
        cmd("grow", "-b", "grown.sqlite", "--color", "black", "--playouts", "40",
            "--positions", "5", "--json", out="G3/grow-black.json", kind="json"),
        copy_book("sample.sqlite", "sample-grown.sqlite"),
        cmd("grow", "-b", "sample-grown.sqlite", "--playouts", "40", "--positions", "10",
            "--seed", "3", "--json", out="G3/grow-sample.json", kind="json"),
        dump("grown.sqlite", "G3/grown.sqlite"),
        dump("sample-grown.sqlite", "G3/sample-grown.sqlite"),
        Parallel(exports("G3", "grown.sqlite", "grown", "raw")),
    ]
    # G4 read-only commands on the three books, and merge
    g4: list[Cmd] = []
    for book in ("grown", "gen", "sample"):
        b = f"{book}.sqlite"
        g4 += [cmd("stats", "-b", b, out=f"G4/stats-{book}.txt"),
               cmd("stats", "-b", b, "--json", out=f"G4/stats-{book}.json", kind="json"),
               cmd("show", "-b", b, "--json", "startpos", out=f"G4/show-{book}.json",
                   kind="json"),
               cmd("show", "-b", b, "startpos moves 7g7f", out=f"G4/show-{book}-7g7f.txt")]
    g4.append(cmd("show", "-b", "grown.sqlite", "--svg", "board.svg", "startpos", "moves",
                  "7g7f", "3c3d", out="G4/show-svg.txt",
                  files=[("board.svg", "G4/board.svg", "text")]))
    steps += [
        Parallel(g4),
        cmd("merge", "-o", "merged.sqlite", "sample.sqlite", "grown.sqlite", "--json",
            out="G4/merge.json", kind="json"),
        dump("merged.sqlite", "G4/merged.sqlite"),
        # G5 refine minimax and refine search on the grown book, every selection
        cmd("refine", "minimax", "-b", "grown.sqlite", "--json", out="G5/minimax.json",
            kind="json"),
        cmd("refine", "search", "-b", "grown.sqlite", "--engine", "builtin", "--depth", "2",
            "--select", "principal", "--margin", "100", "--json",
            out="G5/search-principal.json", kind="json"),
        cmd("refine", "search", "-b", "grown.sqlite", "--engine", "builtin", "--depth", "1",
            "--select", "principal", "--json", out="G5/search-principal-default.json",
            kind="json"),
        cmd("refine", "search", "-b", "grown.sqlite", "--engine", "builtin", "--depth", "1",
            "--select", "leaves", "--json", out="G5/search-leaves.json", kind="json"),
        cmd("refine", "search", "-b", "grown.sqlite", "--engine", "builtin", "--depth", "3",
            "--select", "visits", "--min-visits", "10", "--json",
            out="G5/search-visits.json", kind="json"),
        cmd("refine", "search", "-b", "grown.sqlite", "--engine", "builtin", "--nodes", "500",
            "--select", "all", "--limit", "20", "--json", out="G5/search-all.json",
            kind="json"),
        dump("grown.sqlite", "G5/grown.sqlite"),
        # G6 refine mistakes: JSON to a file, the plain list, one --iterate round
        cmd("refine", "mistakes", "-b", "grown.sqlite", "--threshold", "0", "--diff", "0",
            "--json", "-o", "mistakes.json", out="G6/mistakes-json.txt",
            files=[("mistakes.json", "G6/mistakes.json", "json")]),
        cmd("refine", "mistakes", "-b", "grown.sqlite", "--threshold", "0", "--diff", "0",
            out="G6/mistakes.txt"),
        copy_book("grown.sqlite", "iterate.sqlite"),
        cmd("refine", "mistakes", "-b", "iterate.sqlite", "--iterate", "--max-iterations", "1",
            "--expand", "2", "--playouts", "20", "--threshold", "0", "--diff", "0", "--json",
            out="G6/mistakes-iterate.json", kind="json"),
        dump("grown.sqlite", "G6/grown.sqlite"),
        dump("iterate.sqlite", "G6/iterate.sqlite"),
    ]
    return steps


_START_KIND = {"usi": "text", "sfen": "text", "hcp": "binary", "psfen": "binary"}


def starts(book: str, source: str, values: str, fmt: str, *extra: str,
           label: str | None = None) -> Cmd:
    stem = label or f"{book}-{source}-{values}"
    path = f"starts/{stem}.{fmt}"
    return cmd("starts", "-b", f"{book}.sqlite", "-o", path, "--format", fmt,
               "--from", source, "--values", values, *extra, "--json",
               out=f"G7/{stem}-{fmt}.json", kind="json",
               files=[(path, f"G7/{stem}.{fmt}", _START_KIND[fmt])])


def g7_g13() -> list[Step]:
    g7: list[Cmd] = []
    for book in ("grown", "gen", "sample"):
        for source in ("all", "leaves", "principal", "mistakes"):
            for values in ("raw", "minimax"):
                if source == "mistakes" and book != "grown":
                    continue      # no mistakes recorded: one empty case below
                for fmt in ("usi", "sfen", "hcp", "psfen"):
                    g7.append(starts(book, source, values, fmt))
        if book != "grown":
            g7.append(starts(book, "mistakes", "raw", "usi"))
    g7 += [
        starts("grown", "all", "raw", "usi", "--weight", "visits", "--limit", "50", "--seed",
               "3", "--max-value", "300", "--min-ply", "2", label="grown-weighted"),
        starts("grown", "all", "minimax", "hcp", "--count-percentile", "50",
               label="grown-percentile"),
        starts("grown", "principal", "minimax", "usi", "--principal-margin", "50",
               label="grown-principal-margin"),
        starts("gen", "principal", "raw", "usi", "--principal-margin", "50", "--max-ply", "6",
               label="gen-principal-margin"),
        starts("grown", "all", "raw", "sfen", "--side", "white", "--min-count", "100",
               label="grown-white"),
        starts("gen", "leaves", "raw", "usi", "--limit", "100", "--seed", "5", "--max-value",
               "200", label="gen-sampled"),
    ]
    steps: list[Step] = [
        Action(lambda r: (r.work / "starts").mkdir(), "mkdir starts"),
        Parallel(g7),
        # G8 suites from the book
        cmd("suite", "-b", "grown.sqlite", "-o", "suite.txt", "--max-value", "150", "--min-ply",
            "3", "--max-ply", "9", "--limit", "8", "--seed", "1", "--json",
            out="G8/suite.json", kind="json", files=[("suite.txt", "G8/suite.txt", "text")]),
        cmd("suite", "-b", "grown.sqlite", "-o", "suite-minimax.txt", "--values", "minimax",
            "--plies", "3,5", "--per-line-cap", "2", "--json", out="G8/suite-minimax.json",
            kind="json", files=[("suite-minimax.txt", "G8/suite-minimax.txt", "text")]),
        # G9 self-play: MCTS both sides with CSA records, alpha-beta against MCTS,
        # resignation with short games to --out-min
        cmd("selfplay", "--starts", "suite.txt", "--games", "4", "-o", "selfplay.hcpe",
            "--playouts", "8", "--max-ply", "40", "--seed", "1", "--csa", "csa", "--json",
            out="G9/selfplay.json", kind="json",
            files=[("selfplay.hcpe", "G9/selfplay.hcpe", "binary")]),
        record_dir("csa", "G9/csa", "text"),
        cmd("selfplay", "--starts", "suite.txt", "--games", "2", "-o", "selfplay-ab.hcpe",
            "--playouts", "8", "--max-ply", "24", "--seed", "1", "--black", "alphabeta",
            "--white", "mcts:builtin", "--json", out="G9/selfplay-ab.json", kind="json",
            files=[("selfplay-ab.hcpe", "G9/selfplay-ab.hcpe", "binary")]),
        cmd("selfplay", "--starts", "suite.txt", "--games", "6", "-o", "selfplay-resign.hcpe",
            "--playouts", "8", "--max-ply", "60", "--seed", "2", "--resign", "150",
            "--resign-moves", "2", "--min-ply", "14", "--out-min", "short.hcp", "--json",
            out="G9/selfplay-resign.json", kind="json",
            files=[("selfplay-resign.hcpe", "G9/selfplay-resign.hcpe", "binary"),
                   ("short.hcp", "G9/short.hcp", "binary")]),
        # G8 (cont.) a suite from the self-play records
        cmd("suite", "--from-records", "csa", "-o", "suite-records.txt", "--min-moves", "10",
            "--ignore-values", "--plies", "5,9,13", "--json", out="G8/suite-records.json",
            kind="json", files=[("suite-records.txt", "G8/suite-records.txt", "text")]),
        # G10 matches of built-in players into one results file
        cmd("match", "--builtin", "a", "--builtin", "b", "--option", "a:nodes=300", "--option",
            "b:nodes=1500", "--openings", "suite.txt", "--games", "8", "--nodes", "1",
            "--max-ply", "120", "-o", "results.sqlite", "--pgn", "games.pgn", "--csa", "mcsa",
            "--json", "--quiet", out="G10/match-pairs.json", kind="json"),
        cmd("match", "--builtin", "a", "--builtin", "b", "--builtin", "c", "--option",
            "a:nodes=300", "--option", "b:nodes=1500", "--option", "c:depth=1", "--openings",
            "suite.txt", "--games", "2", "--nodes", "1", "--max-ply", "80", "-o",
            "results.sqlite", "--pgn", "games.pgn", "--csa", "mcsa", "--json", "--quiet",
            out="G10/match-round-robin.json", kind="json"),
        cmd("match", "--builtin", "a", "--builtin", "b", "--option", "a:nodes=300", "--option",
            "b:nodes=1500", "--openings", "suite.txt", "--games", "4", "--nodes", "1",
            "--max-ply", "120", "--resign", "800", "--resign-moves", "2", "-o",
            "results.sqlite", "--json", "--quiet", out="G10/match-resign.json", kind="json"),
        dump("results.sqlite", "G10/results.sqlite"),
        record_file("games.pgn", "G10/games.pgn", "pgn"),
        record_dir("mcsa", "G10/csa", "text"),
        # G11 ratings and tests on the results; G12 the report
        Parallel([
            cmd("rate", "results.sqlite", "--json", "-s", "100", "--seed", "1",
                out="G11/rate.json", kind="json"),
            cmd("rate", "results.sqlite", "-s", "100", "--seed", "1", out="G11/rate.txt"),
            cmd("rate", "results.sqlite", "-W", "-D", out="G11/rate-WD.txt"),
            cmd("rate", "results.sqlite", "--model", "bayeselo", "--json",
                out="G11/rate-bayeselo.json", kind="json"),
            cmd("rate", "results.sqlite", "--model", "bayeselo", out="G11/rate-bayeselo.txt"),
            cmd("rate", "results.sqlite", "--head-to-head", "-A", "a",
                out="G11/rate-head-to-head.txt"),
            cmd("rate", "games.pgn", out="G11/rate-pgn.txt"),
            cmd("sprt", "results.sqlite", "--engine", "b", "--vs", "a", "--elo0", "0",
                "--elo1", "10", "--json", out="G11/sprt.json", kind="json"),
            cmd("sprt", "results.sqlite", "--engine", "b", "--vs", "a", "--elo0", "0",
                "--elo1", "10", "--trinomial", out="G11/sprt-trinomial.txt"),
            cmd("outcomes", "results.sqlite", "--json", out="G11/outcomes.json", kind="json"),
            cmd("outcomes", "results.sqlite", "--naive", out="G11/outcomes.txt"),
            cmd("report", "results.sqlite", "-b", "grown.sqlite", "-o", "report.html",
                "--markdown", "report.md", "-s", "100", "--seed", "1", out="G12/report.txt",
                files=[("report.html", "G12/report.html", "report"),
                       ("report.md", "G12/report.md", "report")]),
        ]),
        record_dir("report_files", "G12/report_files", "binary"),
        # G13 every --help, and --version
        Action(help_texts, "help texts"),
    ]
    return steps


def g14() -> list[Step]:
    """Real engine at one thread and a fixed hash: deterministic at a node limit."""
    fsf = f"usi:{FAIRY}"
    one = ["--engine-option", "Threads=1", "--engine-option", "USI_Hash=16"]
    return [
        copy_book("grown.sqlite", "fsf-search.sqlite"),
        cmd("refine", "search", "-b", "fsf-search.sqlite", "--engine", fsf, "--nodes", "20000",
            *one, "--select", "principal", "--json", out="G14/search.json", kind="json"),
        dump("fsf-search.sqlite", "G14/fsf-search.sqlite"),
        cmd("grow", "-b", "fsf-grown.sqlite", "--evaluator", fsf, *one, "--nodes", "5000",
            "--positions", "5", "--json", out="G14/grow.json", kind="json"),
        dump("fsf-grown.sqlite", "G14/fsf-grown.sqlite"),
        cmd("match", "--engine", f"fsf={fsf}", "--option", "fsf:Threads=1", "--option",
            "fsf:USI_Hash=16", "--builtin", "bi", "--option", "bi:nodes=300", "--openings",
            "suite.txt", "--games", "4", "--nodes", "2000", "--max-ply", "120", "-o",
            "fsf-results.sqlite", "--pgn", "fsf.pgn", "--json", "--quiet",
            out="G14/match.json", kind="json"),
        dump("fsf-results.sqlite", "G14/fsf-results.sqlite"),
        record_file("fsf.pgn", "G14/fsf.pgn", "pgn"),
    ]


def help_texts(r: Runner) -> None:
    """--help of every command and subcommand (found from the help texts), --version."""
    r.run_cli(["--version"], "G13/version.txt", "text")
    level: list[list[str]] = [[]]
    with concurrent.futures.ThreadPoolExecutor(r.jobs) as pool:
        while level:
            texts = pool.map(lambda path: r.run_cli(
                [*path, "--help"], "G13/help" + "".join(f"-{p}" for p in path) + ".txt",
                "text"), level)
            level = [[*path, sub] for path, text in zip(level, texts)
                     for sub in _subcommands(text)]


def _subcommands(help_text: str) -> list[str]:
    names: list[str] = []
    lines = help_text.splitlines()
    if "Commands:" not in lines:
        return names
    for line in lines[lines.index("Commands:") + 1:]:
        if not line.startswith("  "):
            break
        if not line.startswith("   "):
            names.append(line.split()[0])
    return names


def scenario(engines: bool) -> list[Step]:
    steps = g1_g6() + g7_g13()
    return steps + g14() if engines else steps


# ---------------------------------------------------------------------------
# running it


def entry_point(tree: Path) -> tuple[str, str]:
    """(module, function) of the tree's `bookgen` console script."""
    with open(tree / "pyproject.toml", "rb") as f:
        spec = tomllib.load(f)["project"]["scripts"]["bookgen"]
    module, _, function = spec.partition(":")
    return module.strip(), function.strip()


def _shim(directory: Path) -> Path:
    """Stand-ins for the venv's editable-install finders, for a tree other than the checkout.

    A setuptools editable install appends a finder to sys.meta_path that maps
    bookgen, refine, ... to the checkout. PYTHONPATH wins for every module the
    extracted tree has, but a module the tree lacks would silently be loaded
    from the checkout. Modules of the same names placed first on PYTHONPATH,
    with an install() that does nothing, keep the run inside the tree.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for entry in sys.path:
        if not entry or not Path(entry).is_dir():
            continue
        for finder in Path(entry).glob("__editable__*finder.py"):
            (directory / finder.name).write_text(
                "MAPPING = {}\n\ndef install():\n    pass\n", encoding="utf-8")
    return directory


class Runner:
    """Runs the scenario for one tree and collects the normalised outputs."""

    def __init__(self, tree: Path, outdir: Path, *, installed: bool, jobs: int,
                 log: Callable[[str], None] = print) -> None:
        self.tree = tree.resolve()
        self.outdir = outdir.resolve()
        self.work = self.outdir / "work"
        self.out = self.outdir / "out"
        self.jobs = jobs
        self.log = log
        self.outputs: dict[str, bytes] = {}
        self.warnings: list[str] = []
        self.timings: list[tuple[str, float]] = []
        self.paths = Paths(str(self.work), str(self.tree))
        marker = self.outdir / ".golden-run"
        if self.outdir.exists() and any(self.outdir.iterdir()) and not marker.exists():
            raise GoldenError(f"{self.outdir} is not empty and not an earlier run's: "
                              f"give a new or empty directory")
        shutil.rmtree(self.outdir, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.out.mkdir(parents=True)
        marker.touch()
        self.module, self.function = entry_point(self.tree)
        self.env = command_env(None if installed else self.tree, self.outdir)
        self._check_import()

    def _check_import(self) -> None:
        probe = (f"import os, {self.module} as m; "
                 f"print(os.path.realpath(m.__file__)); getattr(m, {self.function!r})")
        result = subprocess.run([sys.executable, "-c", probe], cwd=self.work, env=self.env,
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        where = result.stdout.strip()
        if result.returncode != 0 or not where.startswith(str(self.tree) + os.sep):
            if "PYTHONPATH" not in self.env:       # not installed here: run it from the tree
                self.env = command_env(self.tree, self.outdir)
                return self._check_import()
            raise GoldenError(f"{self.module} does not come from {self.tree} "
                              f"({where or result.stderr.strip()})")
        self.log(f"bookgen from {where}")

    # -- outputs

    def record(self, name: str, kind: Kind, path: Path) -> None:
        if not path.is_file():
            raise GoldenError(f"{name}: {path.relative_to(self.work)} was not written")
        if kind == "sqlite":
            data = dump_sqlite(path, self.paths).encode()
        elif kind == "binary":
            data = path.read_bytes()
        else:
            data = normalise(kind, path.read_text(encoding="utf-8"), self.paths).encode()
        self._store(name, data, kind)

    def _store(self, name: str, data: bytes, kind: Kind) -> None:
        if name in self.outputs:
            raise GoldenError(f"{name}: recorded twice")
        self.outputs[name] = data
        target = self.out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if kind != "binary":
            for needle in suspicious(data.decode(), self.paths):
                self.warnings.append(f"{name}: still contains {needle!r} after normalising")

    # -- commands

    def argv(self, args: Sequence[str]) -> list[str]:
        code = (f"import sys; from {self.module} import {self.function} as main; "
                f"sys.argv[0] = 'bookgen'; sys.exit(main())")
        return [sys.executable, "-c", code, *args]

    def run_cli(self, args: Sequence[str], name: str | None, kind: Kind,
                files: Iterable[tuple[str, str, Kind]] = ()) -> str:
        start = time.perf_counter()
        result = subprocess.run(self.argv(args), cwd=self.work, env=self.env,
                                capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        self.timings.append((" ".join(args), time.perf_counter() - start))
        if result.returncode != 0:
            raise GoldenError(f"bookgen {' '.join(args)}: exit code {result.returncode}\n"
                              f"{result.stderr.strip()[-3000:]}")
        if name is not None:
            self._store(name, normalise(kind, result.stdout, self.paths).encode(), kind)
        for path, output, file_kind in files:
            self.record(output, file_kind, self.work / path)
        return result.stdout

    def run(self, steps: Sequence[Step]) -> dict[str, bytes]:
        for step in steps:
            if isinstance(step, Cmd):
                self.run_cli(step.args, step.stdout, step.kind, step.files)
            elif isinstance(step, Parallel):
                with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
                    futures = [pool.submit(self.run_cli, c.args, c.stdout, c.kind, c.files)
                               for c in step.commands]
                    for future in futures:
                        future.result()
            else:
                start = time.perf_counter()
                step.run(self)
                self.timings.append((step.label, time.perf_counter() - start))
        return dict(sorted(self.outputs.items()))


def normalise(kind: Kind, text: str, paths: Paths) -> str:
    if kind == "json":
        return normalise_json(text, paths)
    if kind == "pgn":
        return normalise_pgn(text, paths)
    if kind == "report":
        return normalise_report(text, paths)
    if kind == "text":
        return normalise_text(text, paths)
    raise GoldenError(f"unknown output kind {kind!r}")


def command_env(pythonpath: Path | None, outdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "BOOKGEN_", "MPL", "OMP_", "LC_"))}
    env.update(PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8", PYTHONDONTWRITEBYTECODE="1",
               TZ="UTC", LANG="C.UTF-8", LC_ALL="C.UTF-8", COLUMNS="80", LINES="24",
               TERM="dumb", MPLBACKEND="Agg", SOURCE_DATE_EPOCH="0",
               MPLCONFIGDIR=str(STATE / "matplotlib"), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if pythonpath is not None:
        shim = _shim(outdir / "shim")
        env["PYTHONPATH"] = os.pathsep.join((str(pythonpath), str(shim)))
    return env


def run_tree(tree: Path, outdir: Path, *, installed: bool, engines: bool, jobs: int,
             log: Callable[[str], None] = print) -> Runner:
    if engines and not os.access(FAIRY, os.X_OK):
        raise GoldenError(f"--engines needs {FAIRY}")
    start = time.perf_counter()
    runner = Runner(tree, outdir, installed=installed, jobs=jobs, log=log)
    runner.run(scenario(engines))
    elapsed = time.perf_counter() - start
    (outdir / "meta.json").write_text(json.dumps(
        {"tree": str(tree), "engines": engines, "seconds": round(elapsed, 1)}, indent=2))
    log(f"{len(runner.outputs)} outputs from {tree} in {elapsed:.0f} s")
    for warning in runner.warnings:
        log(f"warning: {warning}")
    return runner


def extract(rev: str, into: Path) -> tuple[Path, str]:
    """`git archive` of REV into a directory; returns (tree, full commit id)."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    tree = into / f"tree-{commit[:12]}"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = into / "tree.tar"
    with open(archive, "wb") as f:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit],
                       stdout=f, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree, commit


def git(*args: str) -> str:
    result = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise GoldenError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout.strip()


def head_state() -> tuple[str, bool]:
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", ".",
                     ":(exclude)tests/golden/manifest.json"))
    return commit, dirty


def libraries() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
    return found


def engine_version() -> str:
    try:
        result = subprocess.run([FAIRY], input="usi\nquit\n", capture_output=True, text=True,
                                timeout=30)
    except OSError:
        return "missing"
    for line in result.stdout.splitlines():
        if line.startswith("id name "):
            return line[len("id name "):].strip()
    return "unknown"


# ---------------------------------------------------------------------------
# comparing


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compare_table(expected: dict[str, str], now: dict[str, str], *, brief: bool,
                  left: str = "manifest", right: str = "now") -> tuple[int, list[str]]:
    """Print `file | LEFT | RIGHT | same`; returns (number of differences, their lines)."""
    names = sorted(set(expected) | set(now))
    width = max([len(n) for n in names] + [4])
    header = f"{'file':<{width}} | {left:<12} | {right:<12} | same"
    rows, bad = [], []
    for name in names:
        a, b = expected.get(name), now.get(name)
        same = "yes" if a == b else ("MISSING" if b is None else "NEW" if a is None else "NO")
        row = f"{name:<{width}} | {(a or '-')[:12]:<12} | {(b or '-')[:12]:<12} | {same}"
        rows.append(row)
        if a != b:
            bad.append(row)
    if not brief:
        print(header)
        print("-" * len(header))
        print("\n".join(rows))
    elif bad:
        print(header)
        print("\n".join(bad))
    print(f"{len(names) - len(bad)} of {len(names)} outputs identical, {len(bad)} differ")
    return len(bad), bad


def read_manifest() -> dict[str, Any]:
    if not MANIFEST.exists():
        raise GoldenError(f"{MANIFEST} does not exist: run `golden.py write`")
    data: dict[str, Any] = json.loads(MANIFEST.read_text(encoding="utf-8"))
    return data


def selected(hashes: dict[str, str], engines: bool) -> dict[str, str]:
    return {k: v for k, v in hashes.items() if engines or not k.startswith(ENGINE_STEP + "/")}


def cmd_check(args: argparse.Namespace) -> int:
    manifest = read_manifest()
    outdir = Path(args.out) if args.out else STATE / "now"
    runner = run_tree(ROOT, outdir, installed=True, engines=args.engines, jobs=args.jobs)
    now = {k: sha(v) for k, v in runner.outputs.items()}
    expected = selected(manifest["outputs"], args.engines)
    differ, _ = compare_table(expected, now, brief=args.brief)
    mismatched = {k: (v, libraries().get(k)) for k, v in manifest["libraries"].items()
                  if libraries().get(k) != v}
    if differ and mismatched:
        print("note: library versions differ from the manifest's: " + ", ".join(
            f"{k} {a} -> {b}" for k, (a, b) in mismatched.items()) +
            f"; regenerate the manifest at its commit {manifest['commit'][:12]} with "
            f"`golden.py write --baseline {manifest['commit'][:12]}`")
    if differ:
        print(f"outputs kept in {outdir}/out; `golden.py diff NAME` after "
              f"`golden.py compare --baseline {manifest['commit'][:12]}` shows a text diff")
    return 1 if differ else 0


def cmd_write(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bookgen-golden-") as scratch:
        if args.baseline:
            tree, commit = extract(args.baseline, Path(scratch))
            dirty, installed = False, False
        else:
            tree, installed = ROOT, True
            commit, dirty = head_state()
        runner = run_tree(tree, Path(scratch) / "run", installed=installed,
                          engines=args.engines, jobs=args.jobs)
    hashes = {k: sha(v) for k, v in runner.outputs.items()}
    old = json.loads(MANIFEST.read_text(encoding="utf-8")) if MANIFEST.exists() else {}
    if not args.engines:       # keep the engine outputs of an earlier `write --engines`
        hashes.update({k: v for k, v in old.get("outputs", {}).items()
                       if k.startswith(ENGINE_STEP + "/")})
    manifest = {
        "about": "sha256 of bookgen's normalised outputs: tests/golden/golden.py, README.md",
        "commit": commit,
        "dirty": dirty,
        "written": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "libraries": libraries(),
        "engine": engine_version() if args.engines else old.get("engine", "not run"),
        "outputs": dict(sorted(hashes.items())),
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    print(f"{MANIFEST}: {len(hashes)} outputs of {commit[:12]}{' (dirty)' if dirty else ''}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    STATE.mkdir(exist_ok=True)
    trees = STATE / "trees"
    base_tree, base_commit = extract(args.baseline, trees)
    print(f"baseline {args.baseline} = {base_commit}")
    base = run_tree(base_tree, STATE / "baseline", installed=False, engines=args.engines,
                    jobs=args.jobs)
    if args.current:
        cur_tree, cur_commit = extract(args.current, trees)
        print(f"current {args.current} = {cur_commit}")
        cur = run_tree(cur_tree, STATE / "now", installed=False, engines=args.engines,
                       jobs=args.jobs)
    else:
        cur = run_tree(ROOT, STATE / "now", installed=True, engines=args.engines,
                       jobs=args.jobs)
    shutil.rmtree(trees, ignore_errors=True)
    differ, _ = compare_table({k: sha(v) for k, v in base.outputs.items()},
                              {k: sha(v) for k, v in cur.outputs.items()}, brief=args.brief,
                              left="baseline", right="current")
    return 1 if differ else 0


def cmd_diff(args: argparse.Namespace) -> int:
    left, right = STATE / "baseline" / "out" / args.name, STATE / "now" / "out" / args.name
    if not (STATE / "baseline" / "out").is_dir() or not (STATE / "now" / "out").is_dir():
        raise GoldenError(f"no outputs in {STATE}: run `golden.py compare --baseline REV` "
                          f"first (the manifest holds only hashes)")
    for path in (left, right):
        if not path.is_file():
            raise GoldenError(f"{path}: no such output")
    a, b = left.read_bytes(), right.read_bytes()
    if a == b:
        print(f"{args.name}: identical")
        return 0
    try:
        a_text, b_text = a.decode(), b.decode()
    except UnicodeDecodeError:
        first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"{args.name}: binary, {len(a)} vs {len(b)} bytes, first difference at byte "
              f"{first}")
        return 1
    sys.stdout.writelines(difflib.unified_diff(
        a_text.splitlines(keepends=True), b_text.splitlines(keepends=True),
        f"baseline/{args.name}", f"now/{args.name}", n=args.context))
    return 1


def cmd_run(args: argparse.Namespace) -> int:
    tree = Path(args.tree) if args.tree else ROOT
    runner = run_tree(tree, Path(args.outdir), installed=tree.resolve() == ROOT,
                      engines=args.engines, jobs=args.jobs)
    if args.timings:
        for label, seconds in sorted(runner.timings, key=lambda t: -t[1])[:args.timings]:
            print(f"{seconds:7.2f} s  {label}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--engines", action="store_true",
                       help=f"also run {ENGINE_STEP} (fairy-stockfish at 1 thread, fixed hash)")
        p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                       help="read-only commands run side by side (default: up to 2)")
        return p

    p = common(sub.add_parser("check", help="working tree against manifest.json"))
    p.add_argument("--brief", action="store_true", help="print only the outputs that differ")
    p.add_argument("--out", help=f"keep the outputs here (default {STATE}/now)")
    p.set_defaults(func=cmd_check)
    p = common(sub.add_parser("write", help="rewrite manifest.json"))
    p.add_argument("--baseline", help="hash this revision's outputs instead of the tree's")
    p.set_defaults(func=cmd_write)
    p = common(sub.add_parser("compare", help="two revisions against each other"))
    p.add_argument("--baseline", required=True)
    p.add_argument("--current", help="a revision instead of the working tree")
    p.add_argument("--brief", action="store_true")
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("diff", help="unified diff of one output of the last compare")
    p.add_argument("name")
    p.add_argument("--context", type=int, default=3)
    p.set_defaults(func=cmd_diff)
    p = common(sub.add_parser("run", help="run the scenario into OUTDIR"))
    p.add_argument("outdir")
    p.add_argument("--tree", help="a tree to run (default: this checkout)")
    p.add_argument("--timings", type=int, default=0, metavar="N",
                   help="print the N slowest steps")
    p.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except GoldenError as error:
        print(f"golden: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
