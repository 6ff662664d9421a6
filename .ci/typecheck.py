"""mypy on the library as it is installed (run by ``make lint``).

pyproject.toml's ``package-dir`` maps folders of the checkout into the bookgen
package (refine/ is bookgen.refine, ...). mypy cannot follow the editable
install's import hook, and from the checkout root it would find ./bookgen alone
and no bookgen.refine. So it runs in build/typecheck/, rebuilt on each run as the
installed layout made of symbolic links to the checkout's files. Its messages
name the checkout's files (refine/minimax.py, not bookgen/refine/minimax.py).
Arguments are passed on to mypy; the exit status is mypy's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
_LOCATION = re.compile(r"^([^:\s]+\.pyi?)(?=:)")


def build_tree(tree: Path) -> None:
    """``tree`` holds the packages as installed, as symbolic links into the checkout."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = setuptools.get("package-dir") or {"bookgen": "bookgen"}
    if tree.exists():
        shutil.rmtree(tree)
    # Parents first: a mapped subpackage gets its own folder inside its parent's.
    for package, folder in sorted(mapping.items(), key=lambda item: item[0].count(".")):
        target = tree.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for entry in sorted((ROOT / folder).iterdir()):
            if entry.name != "__pycache__" and not (target / entry.name).exists():
                (target / entry.name).symlink_to(entry)


def checkout_path(match: re.Match[str]) -> str:
    """A file named in mypy's output, as the checkout's path."""
    real = os.path.realpath(TREE / match.group(1))
    return os.path.relpath(real, ROOT) if real.startswith(str(ROOT) + os.sep) else match.group(1)


def main() -> int:
    build_tree(TREE)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), *sys.argv[1:]],
        cwd=TREE, stdout=subprocess.PIPE, text=True)
    for line in result.stdout.splitlines():
        print(_LOCATION.sub(checkout_path, line))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
