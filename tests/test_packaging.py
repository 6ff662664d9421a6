"""Packaging: the stage folders refine/, selfplay/ and analysis/ are installed
inside bookgen (bookgen.refine, bookgen.selfplay, bookgen.analysis), so that
installing bookgen adds no top-level import name but ``bookgen``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = {"refine": "bookgen.refine", "selfplay": "bookgen.selfplay",
          "analysis": "bookgen.analysis"}


def _settings() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_of(folder: Path) -> str:
    parts = folder.relative_to(ROOT).parts
    return ".".join((STAGES.get(parts[0], parts[0]), *parts[1:]))


def test_every_package_folder_is_listed():
    """A folder with an __init__.py missing from ``packages`` would not be shipped."""
    listed = set(_settings()["packages"])
    found = {_package_of(init.parent)
             for top in ("bookgen", *STAGES) for init in (ROOT / top).rglob("__init__.py")}
    assert found == listed


def test_the_stage_folders_map_into_bookgen():
    assert _settings()["package-dir"] == {"bookgen": "bookgen", **{v: k for k, v in STAGES.items()}}


def test_the_wheel_holds_only_bookgen(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(tmp_path), str(ROOT)], check=True)
    (wheel,) = tmp_path.glob("bookgen-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"bookgen"}
    for folder, package in STAGES.items():
        modules = {p.name for p in (ROOT / folder).glob("*.py")}
        shipped = {n.rsplit("/", 1)[1] for n in names
                   if n.startswith(package.replace(".", "/") + "/") and n.count("/") == 2}
        assert modules == shipped, folder


def test_installed_bookgen_has_no_generic_top_level_names(tmp_path):
    """Outside the checkout, ``import analysis`` (and refine, selfplay) fails, and the
    stages import as bookgen.*."""
    code = ("import importlib.util, bookgen.refine.minimax, bookgen.selfplay.starts, "
            "bookgen.analysis.match\n"
            "print([importlib.util.find_spec(n) is None "
            "for n in ('refine', 'selfplay', 'analysis')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "[True, True, True]"
