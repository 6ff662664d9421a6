"""Packaging: the stage folders grow/, refine/, selfplay/ and analysis/ are
installed inside bookgen (bookgen.grow, bookgen.refine, bookgen.selfplay,
bookgen.analysis), so that installing bookgen adds no top-level import name but
``bookgen``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = {"grow": "bookgen.grow", "refine": "bookgen.refine",
          "selfplay": "bookgen.selfplay", "analysis": "bookgen.analysis"}


def _settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_of(folder: Path) -> str:
    parts = folder.relative_to(ROOT).parts
    return ".".join((STAGES.get(parts[0], parts[0]), *parts[1:]))


def test_every_package_folder_is_listed():
    """A folder with an __init__.py missing from ``packages`` would not be shipped; the
    other listed packages hold data only (``package-data``: the explorer's static files)."""
    listed = set(_settings()["packages"])
    data_only = set(_settings()["package-data"])
    found = {_package_of(init.parent)
             for top in ("bookgen", *STAGES) for init in (ROOT / top).rglob("__init__.py")}
    assert found == listed - data_only
    assert data_only <= listed
    for package in data_only:
        assert not (ROOT / package.replace(".", "/") / "__init__.py").exists()


def test_the_stage_folders_map_into_bookgen():
    assert _settings()["package-dir"] == {"bookgen": "bookgen", **{v: k for k, v in STAGES.items()}}


def test_the_wheel_holds_exactly_the_checkouts_modules(tmp_path):
    """The wheel is built from a copy of the checkout's files (a ``build/`` folder left
    by an older layout would otherwise ship modules that no longer exist) and holds
    every module of the five folders under bookgen/, and nothing else."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    source = tmp_path / "source"
    for name in files:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(tmp_path), str(source)], check=True)
    (wheel,) = tmp_path.glob("bookgen-*.whl")
    shipped = {n for n in zipfile.ZipFile(wheel).namelist()
               if not n.split("/")[0].endswith(".dist-info")}
    expected = set()
    for folder, package in {"bookgen": "bookgen", **STAGES}.items():
        for path in (ROOT / folder).rglob("*.py"):
            expected.add("/".join([*package.split("."),
                                   *path.relative_to(ROOT / folder).parts]))
    # package data: the explorer's script and style sheet (bookgen serve)
    for package, patterns in tomllib.loads((ROOT / "pyproject.toml").read_text())[
            "tool"]["setuptools"]["package-data"].items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            for path in folder.glob(pattern):
                expected.add("/".join([*package.split("."), *path.relative_to(folder).parts]))
    assert {"bookgen/explore/static/explorer.js", "bookgen/explore/static/explorer.css"
            } <= expected
    assert shipped == expected


def test_installed_bookgen_has_no_generic_top_level_names(tmp_path):
    """Outside the checkout, ``import analysis`` (and grow, refine, selfplay) fails, and
    the stages import as bookgen.*."""
    code = ("import importlib.util, bookgen.grow.run, bookgen.refine.minimax, "
            "bookgen.selfplay.starts, bookgen.analysis.match\n"
            "print([importlib.util.find_spec(n) is None "
            "for n in ('grow', 'refine', 'selfplay', 'analysis')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[True, True, True, True]"
