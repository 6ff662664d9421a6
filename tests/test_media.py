"""Read-only books, read-only directories, read-only media and full disks (issue 11,
item 8); no ``-wal``/``-shm`` files left by finished commands (item 16); no
``.NAME.PID.tmp`` files left by killed exports (item 9).

Every case is real: bookgen runs in a fresh process as an unprivileged user
(``unshare -U``: the files keep their owner, but root's right to ignore their
permissions is gone, so ``chmod`` counts, as root in CI and as anyone
else), or in its own mount namespace (``unshare -m``, ``unshare -rm`` when not
root) on a read-only bind mount or a small tmpfs that fills up.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, ROOT, dump_book, integrity_ok, run_bookgen_process

SAMPLE = ROOT / "data" / "sample.db"
SIDE_FILES = ("-wal", "-shm", "-journal", "-lock")


def bookgen(*args: object) -> list[str]:
    return [PYTHON, "-m", "bookgen.cli", *map(str, args)]


def run_script(lines: list[str], wrapper: list[str], timeout: float = 600
               ) -> subprocess.CompletedProcess:
    """Run shell ``lines`` under ``wrapper`` (an ``unshare`` command line)."""
    proc = subprocess.run([*wrapper, "sh", "-c", "\n".join(lines)], capture_output=True,
                          text=True, cwd=str(ROOT), timeout=timeout)
    assert proc.returncode == 0, f"script failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def unprivileged() -> list[str]:
    return ["unshare", "-U"]


def own_mounts() -> list[str]:
    return ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]


def record(name: str, args: list[object], out: Path) -> str:
    """A shell line running ``bookgen ARGS``, keeping its exit code and output."""
    command = " ".join(shlex.quote(a) for a in bookgen(*args))
    base = shlex.quote(str(out / name))
    return f"{command} >{base}.out 2>{base}.err; echo $? >{base}.rc"


def outcome(out: Path, name: str) -> tuple[int, str]:
    return int((out / f"{name}.rc").read_text()), (out / f"{name}.err").read_text()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --------------------------------------------------------------------------
# the data


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A book (the sample), a second book, a results file and openings."""
    tmp = tmp_path_factory.mktemp("media")
    openings = tmp / "openings.txt"
    openings.write_text("startpos\nstartpos moves 7g7f\n")
    for args in (("import", SAMPLE, "-b", tmp / "book.sqlite"),
                 ("grow", "-b", tmp / "other.sqlite", "--positions", "30", "--playouts", "20"),
                 ("match", "--engine", "a=builtin", "--engine", "b=builtin", "--option",
                  "a:nodes=30", "--option", "b:nodes=60", "--openings", openings, "--games",
                  "2", "--nodes", "1", "--max-ply", "40", "-o", tmp / "results.sqlite")):
        done = run_bookgen_process(*args, timeout=300)
        assert done.returncode == 0, done.stderr
    big = tmp / "big.db"
    done = subprocess.run([PYTHON, str(ROOT / "benchmarks" / "generate_book.py"),
                           "--positions", "3000", "-o", str(big)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    done = run_bookgen_process("import", big, "-b", tmp / "big.sqlite", timeout=300)
    assert done.returncode == 0, done.stderr
    for name in ("book.sqlite", "other.sqlite", "results.sqlite", "big.sqlite"):
        assert [s for s in SIDE_FILES if Path(str(tmp / name) + s).exists()] == []
    return tmp


def copy_data(data: Path, target: Path) -> Path:
    target.mkdir()
    for name in ("book.sqlite", "results.sqlite"):
        shutil.copyfile(data / name, target / name)
    return target


# --------------------------------------------------------------------------
# read-only books, directories and media

def readers(d: Path, out: Path) -> dict[str, list[object]]:
    book = d / "book.sqlite"
    return {
        "stats": ["stats", "-b", book],
        "show": ["show", "-b", book, "startpos", "moves", "7g7f"],
        "export": ["export", "-b", book, "-o", out / "book.db"],
        "starts": ["starts", "-b", book, "-o", out / "starts.txt"],
        "suite": ["suite", "-b", book, "-o", out / "suite.txt", "--max-value", "300"],
        "rate": ["rate", d / "results.sqlite"],
        "report": ["report", d / "results.sqlite", "-b", book, "-o", out / "report.html"],
    }


def writers(d: Path, data: Path) -> dict[str, list[object]]:
    book = d / "book.sqlite"
    return {
        "grow": ["grow", "-b", book, "--positions", "2", "--playouts", "20"],
        "import": ["import", data / "big.db", "-b", book],
        "import-new": ["import", data / "big.db", "-b", d / "new.sqlite"],
        "merge": ["merge", "-o", book, data / "other.sqlite"],
        "refine-minimax": ["refine", "minimax", "-b", book],
        "refine-search": ["refine", "search", "-b", book, "--nodes", "100", "--limit", "1"],
        "refine-mistakes": ["refine", "mistakes", "-b", book],
        "match": ["match", "--engine", "a=builtin", "--engine", "b=builtin", "--openings",
                  data / "openings.txt", "--games", "4", "--nodes", "1", "--max-ply", "40",
                  "-o", d / "results.sqlite"],
    }


# What cannot be written, how, and what bookgen says about it.
MEDIA = {
    "file": "read-only file",            # chmod 444 on the book and the results file
    "directory": "read-only directory",  # chmod 555 on their directory
    "medium": "read-only file system",   # a read-only bind mount of the directory
}


@pytest.mark.parametrize("medium", sorted(MEDIA))
def test_read_only_books_are_read_and_refused_for_writing(data, tmp_path, medium):
    d = copy_data(data, tmp_path / "books")
    out = tmp_path / "out"
    out.mkdir()
    before = {name: digest(d / name) for name in files_in(d)}
    jobs = {**readers(d, out), **writers(d, data)}
    if medium != "medium":  # show, starts and suite read as stats does
        for name in ("show", "starts", "suite"):
            del jobs[name]
    if medium == "file":
        del jobs["import-new"]  # the directory is writable: that import succeeds
    lines = [record(name, args, out) for name, args in jobs.items()]
    if medium == "medium":
        lines = [f"mount --bind {d} {d}", f"mount -o remount,bind,ro {d}", *lines]
        wrapper = own_mounts()
    else:
        wrapper = unprivileged()
    targets = [d / "book.sqlite", d / "results.sqlite"] if medium == "file" else [d]
    for target in targets:
        target.chmod(0o444 if medium == "file" else 0o555)
    try:
        run_script(lines, wrapper)
    finally:
        for target in targets:
            target.chmod(0o644 if medium == "file" else 0o755)

    for name in readers(d, out):
        if name not in jobs:
            continue
        rc, err = outcome(out, name)
        assert rc == 0 and "Traceback" not in err, (name, rc, err)
    assert (out / "book.db").stat().st_size > 0 and (out / "report.html").exists()
    reason = MEDIA[medium] + (f" {d}" if medium == "directory" else "")
    for name, args in writers(d, data).items():
        if name not in jobs:
            continue
        rc, err = outcome(out, name)
        target = args[args.index("-o") + 1] if "-o" in args else args[args.index("-b") + 1]
        assert (rc, err) == (2, f"bookgen: error: {target}: {reason}, cannot write\n"), name
    # Nothing changed and nothing was left beside the books.
    assert {name: digest(d / name) for name in files_in(d)} == before


def test_train_refuses_a_read_only_output_before_training(data, tmp_path):
    """Training takes minutes: an output it could not write is said at once
    (found by benchmarks/fault_campaign.py: it trained, then failed to save)."""
    games = tmp_path / "games.hcpe"
    done = run_bookgen_process("selfplay", "--starts", data / "openings.txt", "--games", "1",
                               "-o", games, "--playouts", "2", "--max-ply", "20")
    assert done.returncode == 0, done.stderr
    d = tmp_path / "ro"
    d.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o777)
    d.chmod(0o555)
    try:
        run_script([record("train", ["train", "--data", games, "-o", d / "model.pt",
                                     "--blocks", "1", "--channels", "8"], out)],
                   unprivileged())
    finally:
        d.chmod(0o755)
    assert outcome(out, "train") == (
        2, f"bookgen: error: {d / 'model.pt'}: read-only directory {d}, cannot write\n")


# --------------------------------------------------------------------------
# full disks

# command, extra room (KiB) on the tmpfs beside the book and the results file
FULL = {
    "import": (lambda d, data: ["import", data / "big.db", "-b", d / "book.sqlite"], 64),
    "merge": (lambda d, data: ["merge", "-o", d / "book.sqlite", data / "big.sqlite"], 64),
    "refine-minimax": (lambda d, data: ["refine", "minimax", "-b", d / "book.sqlite"], 64),
    "grow": (lambda d, data: ["grow", "-b", d / "book.sqlite", "--positions", "2000",
                              "--playouts", "20"], 400),
    "export": (lambda d, data: ["export", "-b", data / "book.sqlite", "-o", d / "book.db"],
               16),
    "model-init": (lambda d, data: ["model", "init", "-o", d / "book.db", "--force",
                                    "--blocks", "2", "--channels", "16"], 16),
    "match-pgn": (lambda d, data: ["match", "--engine", "a=builtin", "--engine", "b=builtin",
                                   "--option", "a:nodes=30", "--option", "b:nodes=60",
                                   "--openings", data / "openings.txt", "--games", "100",
                                   "--nodes", "1", "--max-ply", "40", "-o",
                                   d.parent / "results.sqlite", "--pgn", d / "games.pgn"], 16),
    "match": (lambda d, data: ["match", "--engine", "a=builtin", "--engine", "b=builtin",
                               "--option", "a:nodes=30", "--option", "b:nodes=60",
                               "--openings", data / "openings.txt", "--games", "100",
                               "--nodes", "1", "--max-ply", "40", "-o",
                               d / "results.sqlite"], 160),
}


@pytest.mark.parametrize("command", sorted(FULL))
def test_a_full_disk_is_said_and_keeps_the_book(data, tmp_path, command):
    make_args, room_kib = FULL[command]
    d = tmp_path / "disk"        # the small file system
    d.mkdir()
    out = tmp_path / "out"       # what it held afterwards, copied out
    (out / "after").mkdir(parents=True)
    (d / "book.db").write_text("old export\n")
    files = [data / "book.sqlite", data / "results.sqlite"]
    size_kib = sum(f.stat().st_size for f in files) // 1024 + room_kib + 8
    lines = [f"mount -t tmpfs -o size={size_kib}k tmpfs {d}",
             *(f"cp {f} {d}/" for f in files),
             f"echo 'old export' > {d}/book.db",
             record(command, make_args(d, data), out),
             f"ls -a {d} > {out}/listing",
             f"cp {d}/* {out}/after/"]
    run_script(lines, own_mounts())

    rc, err = outcome(out, command)
    after = out / "after"
    listing = (out / "listing").read_text().split()
    if command in ("export", "model-init"):  # an output file written whole
        target = d / "book.db"
        assert (rc, err) == (2, f"bookgen: error: disk full while writing {target}; "
                                f"{target} is unchanged\n")
        assert (after / "book.db").read_text() == "old export\n"
        assert not [n for n in listing if n.endswith(".tmp")], listing
        return
    if command == "match-pgn":  # appended game by game
        pgn = d / "games.pgn"
        assert rc == 2 and err.startswith(f"bookgen: error: disk full while writing {pgn}; "
                                          "the games before the last one are kept in it ("), err
        assert (after / "games.pgn").read_text().startswith("[Event ")
        return
    if command == "match":
        results = d / "results.sqlite"
        assert rc == 2 and err.count("\n") == 1, err
        match = re.fullmatch(
            f"bookgen: error: disk full while writing {re.escape(str(results))}; the games "
            r"finished before are kept \(the (\d+) games finished in this run are in .*\)\n",
            err)
        assert match, err
        conn = sqlite3.connect(after / "results.sqlite")
        games = conn.execute("SELECT count(*) FROM games").fetchone()[0]
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
        assert games == 2 + int(match.group(1)) > 2
        return
    book = d / "book.sqlite"
    assert integrity_ok(after / "book.sqlite")
    if command == "grow":
        assert (rc, err) == (2, f"bookgen: error: disk full while writing {book}; the book "
                                "keeps what was committed before\n")
        assert len(dump_book(after / "book.sqlite")["positions"]) > 300
        return
    assert (rc, err) == (2, f"bookgen: error: disk full while writing {book}; the book is "
                            "unchanged\n")
    assert dump_book(after / "book.sqlite") == dump_book(data / "book.sqlite")


# Long runs stopped by a full disk (found by benchmarks/fault_campaign.py): the
# run's row counts what was committed, not the result whose commit failed.
RUN_COUNTS = {
    "grow": (["grow", "--positions", "2000", "--playouts", "20"], 400,
             "SELECT json_extract(counts, '$.expansions'), (SELECT count(*) FROM positions "
             "WHERE expanded_run = runs.id) FROM runs WHERE command = 'grow'"),
    "refine-search": (["refine", "search", "--nodes", "100"], 64,
                      "SELECT json_extract(counts, '$.analysed'), (SELECT count(*) FROM "
                      "analyses WHERE run_id = runs.id) FROM runs "
                      "WHERE command = 'refine search'"),
}


@pytest.mark.parametrize("command", sorted(RUN_COUNTS))
def test_a_full_disk_leaves_true_counts_in_the_run(data, tmp_path, command):
    args, room_kib, counts_sql = RUN_COUNTS[command]
    d = tmp_path / "disk"
    d.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    size_kib = (data / "book.sqlite").stat().st_size // 1024 + room_kib + 8
    run_script([f"mount -t tmpfs -o size={size_kib}k tmpfs {d}",
                f"cp {data / 'book.sqlite'} {d}/",
                record(command, [*args, "-b", d / "book.sqlite"], out),
                f"cp {d}/book.sqlite* {out}/"], own_mounts())  # with its -wal
    rc, err = outcome(out, command)
    assert rc == 2 and "disk full while writing" in err, err
    conn = sqlite3.connect(out / "book.sqlite")
    try:
        (counted, committed), = conn.execute(counts_sql).fetchall()
        status = conn.execute("SELECT status FROM runs ORDER BY id DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    assert committed > 0 and counted == committed, (counted, committed)
    assert status == ("failed",)


def test_a_match_that_cannot_create_its_results_file_leaves_none(data, tmp_path):
    """A full disk while a new results file is being set up: the match fails
    with one line and leaves no half-made file behind, so that the same command
    works once there is room (found by benchmarks/fault_campaign.py)."""
    d = tmp_path / "disk"
    d.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    match = ["match", "--engine", "a=builtin", "--engine", "b=builtin", "--option",
             "a:nodes=30", "--option", "b:nodes=60", "--openings", data / "openings.txt",
             "--games", "2", "--nodes", "1", "--max-ply", "40", "-o", d / "results.sqlite"]
    run_script([f"mount -t tmpfs -o size=12k tmpfs {d}",
                record("full", match, out),
                f"ls -a {d} > {out}/listing",
                f"mount -o remount,size=4096k {d}",
                record("again", match, out)], own_mounts())
    rc, err = outcome(out, "full")
    assert (rc, err) == (2, f"bookgen: error: disk full while writing {d / 'results.sqlite'}; "
                            "the games finished before are kept\n")
    assert (out / "listing").read_text().split() == [".", ".."]
    rc, err = outcome(out, "again")
    assert rc == 0, err


def test_a_disk_too_full_to_fold_the_log_in_is_said(data, tmp_path):
    """An import that commits but leaves no room to fold SQLite's write-ahead log
    into the book (found by benchmarks/fault_campaign.py: exit 0 and a book in
    three files, silently): it says so; nothing is lost, and the next command
    with room leaves one file again."""
    d = tmp_path / "disk"
    d.mkdir()
    out = tmp_path / "out"
    (out / "after").mkdir(parents=True)
    book = d / "book.sqlite"
    size_kib = (data / "book.sqlite").stat().st_size // 1024 + 1600 + 8
    run_script([f"mount -t tmpfs -o size={size_kib}k tmpfs {d}",
                f"cp {data / 'book.sqlite'} {d}/",
                record("import", ["import", data / "big.db", "-b", book], out),
                f"ls -a {d} > {out}/listing",
                f"mount -o remount,size={size_kib + 4096}k {d}",
                record("stats", ["stats", "-b", book], out),
                f"ls -a {d} > {out}/listing-after",
                f"cp {d}/* {out}/after/"], own_mounts())
    rc, err = outcome(out, "import")
    assert (rc, err.splitlines()[-1:]) == (0, [
        f"bookgen: warning: disk full: the last changes to {book} stay in book.sqlite-wal "
        "until there is room to fold them in; keep the files together"]), err
    assert (out / "listing").read_text().split() == [
        ".", "..", "book.sqlite", "book.sqlite-shm", "book.sqlite-wal"]
    assert outcome(out, "stats")[0] == 0
    assert (out / "listing-after").read_text().split() == [".", "..", "book.sqlite"]
    reference = tmp_path / "reference.sqlite"
    shutil.copyfile(data / "book.sqlite", reference)
    done = run_bookgen_process("import", data / "big.db", "-b", reference)
    assert done.returncode == 0, done.stderr
    assert dump_book(out / "after" / "book.sqlite")["moves"] == dump_book(reference)["moves"]


# --------------------------------------------------------------------------
# files left behind


def test_finished_commands_leave_no_wal_or_shm(data, tmp_path):
    """import, grow, export, stats, rate, report and readers of a read-only book
    end with the book (and the results file) as single files."""
    d = copy_data(data, tmp_path / "d")
    book = d / "book.sqlite"
    steps = [("import", SAMPLE, "-b", d / "fresh.sqlite"),
             ("grow", "-b", book, "--positions", "3", "--playouts", "20"),
             ("export", "-b", book, "-o", tmp_path / "book.db"),
             ("stats", "-b", book),
             ("rate", d / "results.sqlite"),
             ("report", d / "results.sqlite", "-b", book, "-o", tmp_path / "report.html")]
    for step in steps:
        done = run_bookgen_process(*step, timeout=300)
        assert done.returncode == 0, (step, done.stderr)
        assert files_in(d) == ["book.sqlite", "fresh.sqlite", "results.sqlite"], step
    # Read-only files in a writable directory: SQLite would create -wal/-shm files
    # that a read-only connection cannot remove.
    book.chmod(0o444)
    (d / "results.sqlite").chmod(0o444)
    out = tmp_path / "ro"
    out.mkdir()
    try:
        run_script([record("stats", ["stats", "-b", book], out),
                    record("rate", ["rate", d / "results.sqlite"], out)], unprivileged())
    finally:
        book.chmod(0o644)
        (d / "results.sqlite").chmod(0o644)
    assert outcome(out, "stats")[0] == 0 and outcome(out, "rate")[0] == 0
    assert files_in(d) == ["book.sqlite", "fresh.sqlite", "results.sqlite"]


def test_a_killed_export_leaves_a_temporary_file_that_the_next_export_removes(data, tmp_path):
    out = tmp_path / "book.db"
    out.write_text("old export\n")
    env = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
    killed = subprocess.Popen(bookgen("export", "-b", data / "book.sqlite", "-o", out),
                              cwd=str(ROOT), env={**env, "BOOKGEN_FAULT": "export-writing"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert killed.wait(timeout=120) == -signal.SIGKILL  # killed halfway through writing
    assert files_in(tmp_path) == [f".book.db.{killed.pid}.tmp", "book.db"]
    assert out.read_text() == "old export\n"
    # Not for the next export to remove: the temporary file of a live process
    # (another export of the same target) and those of other targets.
    live = tmp_path / f".book.db.{os.getpid()}.tmp"
    live.write_text("being written")
    other = tmp_path / f".other.db.{killed.pid}.tmp"
    other.write_text("another target")

    done = run_bookgen_process("export", "-b", data / "book.sqlite", "-o", out)
    assert done.returncode == 0, done.stderr
    assert files_in(tmp_path) == sorted([live.name, other.name, "book.db"])
    assert out.read_text().startswith("#YANEURAOU-DB2016")


def test_files_the_examples_create_are_ignored_by_git():
    """What the README's examples and `make demo` leave in a checkout (and the
    side files of books and results files anywhere) is git-ignored; the
    project's own files are not."""
    created = ["book.sqlite", "book.sqlite-wal", "book.sqlite-lock", "demo/book.sqlite",
               "demo/report.html", "other.sqlite", "all.sqlite", "results.sqlite",
               "rr.sqlite", "rr.sqlite-shm", "tests/x.sqlite-wal", "book.db", "book.bin",
               "board.svg", "model.pt", "model.onnx", "roots.hcp", "openings.txt",
               "mistakes.txt", "suite.txt", "games.hcpe", "games.pgn", "records/1.csa",
               "report.html", "report.md", "report_files/ratings.png", ".book.db.1234.tmp"]
    kept = ["data/sample.db", "README.md", "bookgen/store/book.py", "tests/test_media.py"]
    done = subprocess.run(["git", "check-ignore", "--no-index", "--verbose",
                           "--non-matching", *created, *kept], capture_output=True,
                          text=True, cwd=str(ROOT), timeout=60)
    assert done.returncode in (0, 1), done.stderr
    ignored = {line.split("\t")[1] for line in done.stdout.splitlines()
               if not line.startswith("::")}
    assert ignored == set(created)
