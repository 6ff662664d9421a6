"""The README's examples run in order, as written, on a fresh clone.

``readme_steps`` reads README.md's ```console and ```python blocks; a console
command is a line starting with ``$ `` (with ``\\`` continuation lines), the
lines after it up to the next command are its shown output. The set-up block
(the one with ``make demo``) is left out: it is what builds the environment
this test runs in. Every other step runs in order in one temporary directory
holding a copy of ``data/`` (as a fresh clone has it), with the virtual
environment's ``bin`` first on PATH, as after ``. .venv/bin/activate``.

Each command must exit 0, or 2 when its shown output has a ``bookgen: error:``
line. Shown output is checked by ``output_matches``:

* ``...`` on a line of its own stands for omitted lines; the shown lines
  between two ``...`` must appear as consecutive lines of the real output
  (stdout then stderr, blank lines ignored), and the groups in order;
* within a line, words and punctuation must match exactly, any run of spaces
  matches any run of spaces, each number matches any number (times, counts
  and ratings vary with the machine and the engines), and ``...`` matches
  anything.

So a renamed column, a reworded message, a changed table layout or a move
that is no longer in the book fails the test; a different time does not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import ROOT

README = ROOT / "README.md"
BIN = (ROOT / ".venv" / "bin") if (ROOT / ".venv" / "bin" / "bookgen").exists() \
    else Path(sys.executable).parent
STEP_TIMEOUT = 600.0  # a hung example fails instead of blocking the suite


@dataclass
class Step:
    kind: str            # "console" or "python"
    code: str            # the shell command (continuation lines kept) or the Python source
    line: int            # where it starts in the README (1-based)
    shown: list[str] = field(default_factory=list)  # the output lines the README shows

    @property
    def expected_exit(self) -> int:
        return 2 if any(line.startswith("bookgen: error:") for line in self.shown) else 0


def readme_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """(language, line of the first content line, lines) of every fenced block."""
    blocks: list[tuple[str, int, list[str]]] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"```(\w*)\s*", lines[index])
        if opening is None:
            index += 1
            continue
        start = index + 1
        end = start
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        blocks.append((opening.group(1), start + 1, lines[start:end]))
        index = end + 1
    return blocks


def console_steps(lines: list[str], first_line: int) -> list[Step]:
    steps: list[Step] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            command = [line[2:]]
            start = first_line + index
            while command[-1].rstrip().endswith("\\") and index + 1 < len(lines):
                index += 1
                command.append(lines[index])
            steps.append(Step("console", "\n".join(command), start))
        elif line.strip():
            assert steps, f"README.md:{first_line + index}: output before any command: {line!r}"
            steps[-1].shown.append(line.rstrip())
        index += 1
    return steps


def is_setup(lines: list[str]) -> bool:
    return any(re.match(r"\$?\s*make demo\b", line) for line in lines)


def readme_steps(text: str) -> list[Step]:
    """Every step of the README in order, without the set-up block."""
    steps: list[Step] = []
    for language, first_line, lines in readme_blocks(text):
        if language == "console" and not is_setup(lines):
            steps += console_steps(lines, first_line)
        elif language == "python":
            steps.append(Step("python", "\n".join(lines), first_line))
    return steps


# --------------------------------------------------------------------------
# shown output against real output

# Any number where the README shows one: with a sign, thousands separators, a
# fraction or an exponent, a rating bound (">402.0"), an infinite Elo, or a
# value the command could not compute ("----"); and the README may show any of
# these where the output has another (an Elo error is infinite or not depending
# on how the example's games went).
_NUMBER = r"(?:[<>]?[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?|[-+]?inf|nan|-{2,4})"
_SHOWN_NUMBER = re.compile(r"(?<![\w.])(?:[-+]?\d+(?:[.,]\d+)*(?:e[-+]?\d+)?|[-+]?inf|nan)"
                           r"(?![\w])")


def line_pattern(shown: str) -> re.Pattern[str]:
    """The regular expression a real output line must match in full for ``shown``."""
    parts: list[str] = []
    for token in shown.split():
        pieces = re.split(r"(\.\.\.)", token)
        regex = ""
        for piece in pieces:
            if piece == "...":
                regex += ".*?"
                continue
            position = 0
            for number in _SHOWN_NUMBER.finditer(piece):
                regex += re.escape(piece[position:number.start()]) + _NUMBER
                position = number.end()
            regex += re.escape(piece[position:])
        parts.append(regex)
    return re.compile(r"\s+".join(parts))


def output_matches(shown: list[str], output: str) -> str | None:
    """None if ``output`` shows what ``shown`` says (see the module docstring),
    else the first shown line that could not be found."""
    real = [line.strip() for line in output.split("\n") if line.strip()]
    groups: list[list[str]] = [[]]
    for line in shown:
        if line.strip() == "...":
            groups.append([])
        elif line.strip():
            groups[-1].append(line.strip())
    position = 0
    for group in groups:
        if not group:
            continue
        patterns = [line_pattern(line) for line in group]
        for start in range(position, len(real) - len(group) + 1):
            if all(p.fullmatch(real[start + k]) for k, p in enumerate(patterns)):
                position = start + len(group)
                break
        else:
            # name the first line of the group that is not found anywhere after
            # ``position``, or the group if each line exists but not together
            for line, pattern in zip(group, patterns):
                if not any(pattern.fullmatch(r) for r in real[position:]):
                    return line
            return " / ".join(group) + "  (not as consecutive lines)"
    return None


def test_output_rule():
    """The rule is loose on numbers and spacing, strict on words and order."""
    shown = ["rr.sqlite: match 1: 48 games played (0 of 48 were already there) in 61.8 s",
             "  c: 27 / 32", "..."]
    real = "rr.sqlite: match 1: 12 games played (0 of 12 were already there) in 3.2 s\n" \
           "  c:  7 / 8\n  b: 5 / 8\n"
    assert output_matches(shown, real) is None
    assert output_matches(shown, real.replace("games played", "games run")) == shown[0]
    assert output_matches(["a: 1 / 2", "c: 1 / 2"], "a: 1 / 2\nb: 1 / 2\nc: 1 / 2\n") \
        == "a: 1 / 2 / c: 1 / 2  (not as consecutive lines)"
    assert output_matches(["a: 1 / 2", "...", "c: 1 / 2"], "a: 1 / 2\nb: 1 / 2\nc: 1 / 2\n") \
        is None
    assert output_matches(["c: 1", "...", "a: 1"], "a: 1\nc: 1\n") == "a: 1"
    assert output_matches(["7g7f  5a4b  228"], "7g7f 5a4b -12\n") is None
    assert output_matches(["7g7f  5a4b  228"], "2g2f 5a4b -12\n") == "7g7f  5a4b  228"
    assert output_matches(["p 1.216e-11, in 60.0 s (...)"], "p 3e-05, in 7 s (x)") is None
    assert output_matches(["value  depth"], "value depth count") == "value  depth"
    assert output_matches(["1 c : 402.0 140.2 15.0", "Elo: 12.5 +/- 3.1"],
                          "1 c : >402.0 ---- 16.0\nElo: inf +/- inf") is None
    assert output_matches(["Elo: 470.44 +/- inf, LOS: 100.00 %"],
                          "Elo: 338.04 +/- 423.53, LOS: 100.00 %") is None
    assert output_matches(["Elo: 1 +/- inf"], "Elo: 1 +/- information") == "Elo: 1 +/- inf"


def test_readme_tells_to_activate_the_venv():
    """The set-up block puts ``bookgen`` on PATH, and that command really does."""
    setup = [lines for language, _line, lines in readme_blocks(README.read_text())
             if language == "console" and is_setup(lines)]
    assert len(setup) == 1, "README.md has no console block with `make demo`"
    command = next((line[2:].split("#")[0].strip() for line in setup[0]
                    if "activate" in line and line.startswith("$ ")), None)
    assert command is not None, "the set-up block does not say how to put bookgen on PATH"
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["PATH"] = os.pathsep.join(  # as in a fresh shell: no environment active
        entry for entry in env.get("PATH", "").split(os.pathsep)
        if entry and Path(entry).resolve() not in (BIN.resolve(), (ROOT / ".venv/bin").resolve()))
    found = subprocess.run(["bash", "-c", f"{command} && command -v bookgen"], cwd=str(ROOT),
                           capture_output=True, text=True, timeout=60, env=env)
    assert found.returncode == 0 and found.stdout.strip() == str(ROOT / ".venv/bin/bookgen"), (
        f"{command!r} does not put .venv/bin/bookgen on PATH: {found.stdout}{found.stderr}")


def run_step(step: Step, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    if step.kind == "python":
        argv = [str(BIN / "python"), "-c", step.code]
    else:
        argv = ["bash", "-c", step.code]
    return subprocess.run(argv, cwd=str(workdir), env=env, capture_output=True, text=True,
                          timeout=STEP_TIMEOUT, stdin=subprocess.DEVNULL)


def run_readme(workdir: Path, steps: list[Step]) -> list[str]:
    """Run ``steps`` in ``workdir``; returns one message per failed step (all steps
    run, so that one stale example does not hide the next)."""
    shutil.copytree(ROOT / "data", workdir / "data")
    env = dict(os.environ)
    env.pop("BOOKGEN_FAULT", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(BIN.parent)
    failures: list[str] = []
    for step in steps:
        where = f"README.md:{step.line}: {step.code.splitlines()[0][:100]}"
        try:
            proc = run_step(step, workdir, env)
        except subprocess.TimeoutExpired:
            failures.append(f"{where}\n  did not finish in {STEP_TIMEOUT:.0f} s")
            continue
        output = proc.stdout + "\n" + proc.stderr
        problem = None
        if proc.returncode != step.expected_exit:
            problem = f"exit {proc.returncode}, expected {step.expected_exit}"
        elif (missing := output_matches(step.shown, output)) is not None:
            problem = f"shown output line not found: {missing!r}"
        if problem:
            failures.append(f"{where}\n  {problem}\n  output:\n    "
                            + "\n    ".join(output.strip().splitlines()[-15:]))
    return failures


def unignored_outputs(workdir: Path) -> list[str]:
    """What the examples wrote in ``workdir`` that, written in the repository's
    root (where the README runs them), would not be git-ignored or would land
    in a tracked directory (the README says .gitignore lists them)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=str(ROOT), capture_output=True,
                             text=True, check=True).stdout.split("\n")
    tracked_top = {path.split("/")[0] for path in tracked if path}
    problems = []
    for entry in sorted(workdir.iterdir()):
        if entry.name == "data":
            continue
        name = entry.name + ("/" if entry.is_dir() else "")
        if entry.name in tracked_top:
            problems.append(f"{name} (a tracked path of the repository)")
            continue
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", name],
                                 cwd=str(ROOT), capture_output=True)
        if ignored.returncode != 0:
            problems.append(f"{name} (not in .gitignore)")
    return problems


def test_readme_steps_are_found():
    steps = readme_steps(README.read_text())
    assert sum(step.kind == "python" for step in steps) >= 1
    commands = [step.code for step in steps if step.kind == "console"]
    assert len(commands) >= 30
    assert not any(command.startswith("make ") for command in commands)


@pytest.mark.timeout(1200)  # about 150 s alone, every example in turn
@pytest.mark.slow
def test_readme_examples_run_in_order(tmp_path):
    assert (BIN / "bookgen").exists(), f"no bookgen in {BIN}: run `make demo` or `make test`"
    workdir = tmp_path / "clone"
    workdir.mkdir()
    failures = run_readme(workdir, readme_steps(README.read_text()))
    assert not failures, f"{len(failures)} README example(s) failed:\n\n" + "\n\n".join(failures)
    assert not (problems := unignored_outputs(workdir)), (
        f"README examples write files that would clutter a checkout: {problems}")
