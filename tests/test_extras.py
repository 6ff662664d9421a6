"""bookgen without its extras: the core commands work, the others say which extra they need.

The command line runs in a fresh interpreter whose ``sitecustomize`` (first on
PYTHONPATH, so worker processes get it too) makes torch, onnx, onnxruntime,
matplotlib, starlette and uvicorn impossible to import, as on a ``pip install bookgen`` without
extras. With the built-in evaluator and players, the core commands succeed
and never even try to import one of them; the commands that need an extra
print one line naming it and exit 2.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON

BLOCKED = ("torch", "onnx", "onnxruntime", "matplotlib", "starlette", "uvicorn", "ray")

SITECUSTOMIZE = f"""
import os
import sys

BLOCKED = {BLOCKED!r}


class BlockExtras:
    \"\"\"The modules of bookgen's extras are not installed.\"\"\"

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in BLOCKED:
            return None
        log = os.environ.get("BOOKGEN_TEST_BLOCKED_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write(name + "\\n")
        raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)


sys.meta_path.insert(0, BlockExtras())
"""


class Bare:
    """A working directory and the command line without extras."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.work.mkdir()
        site = root / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.log = root / "blocked.log"
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith("BOOKGEN_")}
        self.env.update(PYTHONPATH=str(site), BOOKGEN_TEST_BLOCKED_LOG=str(self.log),
                        MPLBACKEND="Agg")

    def run(self, *args: str, expect: int = 0) -> subprocess.CompletedProcess:
        proc = subprocess.run([PYTHON, "-m", "bookgen", *args], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == expect, (
            f"bookgen {' '.join(args)}: exit {proc.returncode}, expected {expect}\n"
            f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}")
        return proc

    def attempts(self) -> list[str]:
        """The blocked modules something tried to import so far."""
        return self.log.read_text().split() if self.log.exists() else []


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Bare:
    """The built-in pipeline, run without extras: grow, refine, starts, suite, match..."""
    bare = Bare(tmp_path_factory.mktemp("bare"))
    bare.run("grow", "-b", "book.sqlite", "--playouts", "20", "--positions", "20",
             "--seed", "1")
    bare.run("refine", "minimax", "-b", "book.sqlite")
    bare.run("refine", "search", "-b", "book.sqlite", "--engine", "builtin", "--depth", "1",
             "--select", "principal")
    bare.run("stats", "-b", "book.sqlite")
    bare.run("export", "-b", "book.sqlite", "-o", "book.db")
    bare.run("starts", "-b", "book.sqlite", "-o", "starts.txt")
    bare.run("suite", "-b", "book.sqlite", "-o", "suite.txt", "--max-value", "1000",
             "--min-ply", "2", "--max-ply", "4", "--limit", "2", "--seed", "1")
    bare.run("selfplay", "--starts", "suite.txt", "--games", "2", "-o", "games.hcpe",
             "--playouts", "8", "--max-ply", "16", "--seed", "1")
    bare.run("match", "--builtin", "a", "--builtin", "b", "--option", "a:depth=1",
             "--option", "b:depth=2", "--openings", "suite.txt", "--games", "2",
             "--nodes", "1", "--max-ply", "24", "-o", "results.sqlite", "--quiet")
    bare.run("rate", "results.sqlite")
    bare.run("sprt", "results.sqlite", "--engine", "b", "--vs", "a", "--elo0", "0",
             "--elo1", "10")
    bare.run("outcomes", "results.sqlite")
    return bare


def test_the_extras_are_blocked(bare: Bare) -> None:
    env = {key: value for key, value in bare.env.items() if key != "BOOKGEN_TEST_BLOCKED_LOG"}
    for module in BLOCKED:
        proc = subprocess.run([PYTHON, "-c", f"import {module}"], cwd=bare.work, env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "ModuleNotFoundError" in proc.stderr, module


def test_the_core_commands_need_no_extra(bare: Bare) -> None:
    for name in ("book.sqlite", "book.db", "starts.txt", "suite.txt", "games.hcpe",
                 "results.sqlite"):
        assert (bare.work / name).stat().st_size > 0, name
    assert bare.attempts() == []
    rate = bare.run("rate", "results.sqlite")
    assert "a" in rate.stdout and "b" in rate.stdout


NN = "pip install 'bookgen[nn]'"
RAY = "pip install 'bookgen[ray]'"


@pytest.mark.parametrize(("args", "message"), [
    (("model", "init", "-o", "model.pt"),
     f"model init needs torch, which is not installed: {NN}"),
    (("model", "info", "model.pt"), f"model info needs torch, which is not installed: {NN}"),
    (("model", "export-onnx", "model.pt", "-o", "model.onnx"),
     f"model export-onnx needs torch, which is not installed: {NN}"),
    (("train", "--data", "data.hcpe", "-o", "trained.pt"),
     f"train needs torch, which is not installed: {NN}"),
    (("grow", "-b", "net.sqlite", "--evaluator", "torch:model.pt", "--positions", "2"),
     f"the torch:model.pt evaluator needs torch, which is not installed: {NN}"),
    (("grow", "-b", "net.sqlite", "--evaluator", "onnx:model.onnx", "--positions", "2"),
     f"the onnx:model.onnx evaluator needs onnxruntime, which is not installed: {NN}"),
    (("grow", "-b", "net.sqlite", "--evaluator", "blend:book.sqlite:torch:model.pt",
      "--positions", "2"),
     f"the torch:model.pt evaluator needs torch, which is not installed: {NN}"),
    (("selfplay", "--starts", "suite.txt", "--games", "2", "-o", "net.hcpe", "--player",
      "torch:model.pt"),
     f"the torch:model.pt evaluator needs torch, which is not installed: {NN}"),
    (("report", "results.sqlite", "-o", "report.html"),
     "report needs matplotlib, which is not installed: pip install 'bookgen[report]'"),
    (("serve", "-b", "book.sqlite", "--port", "0"),
     "serve needs starlette, which is not installed: pip install 'bookgen[serve]'"),
    *[(args, f"--cluster needs ray, which is not installed: {RAY}") for args in (
        ("grow", "-b", "book.sqlite", "--positions", "2", "--cluster", "local"),
        ("refine", "search", "-b", "book.sqlite", "--cluster", "auto"),
        ("refine", "mistakes", "-b", "book.sqlite", "--iterate", "--cluster", "local"),
        ("selfplay", "--starts", "suite.txt", "--games", "2", "-o", "ray.hcpe", "--cluster",
         "local"),
        ("match", "--builtin", "a", "--builtin", "b", "--openings", "suite.txt", "--nodes",
         "1", "-o", "ray.sqlite", "--cluster", "local"))],
])
def test_a_missing_extra_is_one_line(bare: Bare, args: tuple[str, ...], message: str) -> None:
    for name in ("model.pt", "model.onnx", "data.hcpe"):
        (bare.work / name).touch()
    runs = _runs(bare.work / "book.sqlite")
    proc = bare.run(*args, expect=2)
    assert proc.stderr.splitlines() == [f"bookgen: error: {message}"]
    assert not (bare.work / "report.html").exists()
    assert not (bare.work / "ray.hcpe").exists() and not (bare.work / "ray.sqlite").exists()
    assert _runs(bare.work / "book.sqlite") == runs   # nothing written


def _runs(book: Path) -> list[tuple]:
    conn = sqlite3.connect(book)
    try:
        return conn.execute("SELECT id, status FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()
