"""bookgen's outputs are byte-identical to tests/golden/manifest.json.

The scenario (tests/golden/README.md) runs every output-writing command in
subprocesses, fairy-stockfish's part (G14) included. The other tests check the
tool's normalisation: it must hide exactly the volatile parts (times, pids,
temporary paths), no more.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT

GOLDEN = ROOT / "tests" / "golden" / "golden.py"
_spec = importlib.util.spec_from_file_location("golden", GOLDEN)
assert _spec is not None and _spec.loader is not None
golden = importlib.util.module_from_spec(_spec)
sys.modules["golden"] = golden
_spec.loader.exec_module(golden)


@pytest.mark.timeout(1200)  # about 80 s alone: every output-writing command
@pytest.mark.slow
def test_outputs_match_the_manifest(tmp_path: Path) -> None:
    result = subprocess.run([PYTHON, str(GOLDEN), "check", "--engines", "--brief",
                             "--out", str(tmp_path / "golden")],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, (result.stdout[-6000:], result.stderr[-3000:])
    assert "warning:" not in result.stdout, result.stdout
    manifest = json.loads((ROOT / "tests" / "golden" / "manifest.json").read_text())
    assert f"{len(manifest['outputs'])} of {len(manifest['outputs'])} outputs identical" \
        in result.stdout


PATHS = golden.Paths("/scratch/run/work", "/src/tree")


def test_json_drops_durations_and_pids_only() -> None:
    text = json.dumps({"book": "/scratch/run/work/b.sqlite", "run_id": 3, "seconds": {"graph": 1},
                       "eval_seconds": 0.5, "positions_per_second": 9.0, "pid": 12,
                       "peak_memory_mb": 70.1, "rounds": [{"seconds": 1, "mistakes": 2}],
                       "draw_value_black": 0.5}, indent=2) + "\n"
    lines = golden.normalise_json(text, PATHS).splitlines()
    assert lines[0] == "# json layout: indent=2, 1 trailing newline(s)"
    assert json.loads("\n".join(lines[1:])) == {
        "book": "<work>/b.sqlite", "run_id": 3, "rounds": [{"mistakes": 2}],
        "draw_value_black": 0.5}
    compact = golden.normalise_json(json.dumps({"a": 1}), PATHS)
    assert compact.splitlines()[0] == "# json layout: one line, 0 trailing newline(s)"


def test_text_times_and_program_name() -> None:
    text = ("Usage: python -m bookgen.cli grow [OPTIONS]\n"
            "roots mistakes:3:1:0 at 2026-01-02T03:04:05+00:00\n"
            "/src/tree/bookgen/cli.py 2026-01-02\n")
    assert golden.normalise_text(text, PATHS) == (
        "Usage: bookgen grow [OPTIONS]\nroots mistakes:3:1:0 at <time>\n"
        "<tree>/bookgen/cli.py 2026-01-02\n")
    report = "<p>16 games; report generated 2026-01-02T03:04:05+00:00 by bookgen 0.1.0.</p>"
    assert golden.normalise_report(report, PATHS) == \
        "<p>16 games; report generated <time> by bookgen <version>.</p>"
    pgn = '[Event "x"]\n[Date "2026.01.02"]\n[Round "1"]\n'
    assert golden.normalise_pgn(pgn, PATHS) == '[Event "x"]\n[Round "1"]\n'


def test_dump_hides_volatile_columns_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, params TEXT, counts TEXT, "
                   "started_at TEXT, ended_at TEXT, bookgen_version TEXT)")
        db.execute("CREATE TABLE moves (position_id INTEGER, move TEXT, value REAL, "
                   "PRIMARY KEY (position_id, move)) WITHOUT ROWID")
        db.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("schema_version", "2"), ("created_at", "2026-01-01T00:00:00+00:00"),
            ("created_by", "bookgen 0.1.0")])
        db.execute("INSERT INTO runs VALUES (1, ?, ?, '2026-01-01T00:00:00+00:00', NULL, "
                   "'0.1.0')", (json.dumps({"roots": "mistakes:3:1:0",
                                            "draw_value_black": 500}),
                                json.dumps({"pid": 7, "seconds": 1.5, "trials": 4})))
        db.executemany("INSERT INTO moves VALUES (?, ?, ?)",
                       [(2, "7g7f", 0.25), (1, "2g2f", 5.0), (1, "1g1f", None)])
    db.close()
    text = golden.dump_sqlite(path, PATHS)
    assert text.split("## meta\n")[1].split("## ")[0] == (
        'key\tvalue\n"created_at"\t<time>\n"created_by"\t<version>\n"schema_version"\t"2"\n')
    assert ('1\t"{\\"roots\\": \\"mistakes:3:1:0\\", \\"draw_value_black\\": 500}"\t'
            '"{\\"trials\\": 4}"\t<time>\tNULL\t<version>') in text
    assert ('## moves\nposition_id\tmove\tvalue\n1\t"1g1f"\tNULL\n'
            '1\t"2g2f"\t5.0\n2\t"7g7f"\t0.25\n## runs\n') in text


def test_a_changed_output_is_reported() -> None:
    differ, bad = golden.compare_table({"G1/a": "1" * 64, "G1/b": "2" * 64},
                                     {"G1/a": "1" * 64, "G1/b": "3" * 64, "G1/c": "4" * 64},
                                     brief=True)
    assert differ == 2
    assert [row.split(" | ")[-1] for row in bad] == ["NO", "NEW"]
