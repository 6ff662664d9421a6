"""The layers of the house (docs/architecture.md), checked on the source.

- The core (``bookgen``, without its command line) never imports a stage
  (``bookgen.grow``, ``bookgen.refine``, ``bookgen.selfplay``,
  ``bookgen.analysis``); a stage never imports another stage; only the command
  line (``bookgen.cli``, ``bookgen.__main__``) imports across, and nothing
  imports the command line.
- Inside the core, each layer imports only the layers below it.
- No import cycles between modules (an import inside a function counts).
- One place for each idea: ``os.replace`` only in the atomic-file helpers, SIGINT
  ignored only through :func:`bookgen.signals.ignore_interrupts`, process pools
  only in ``bookgen.workers``, SQL only in ``bookgen.store``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"bookgen": "bookgen", "grow": "bookgen.grow", "refine": "bookgen.refine",
           "selfplay": "bookgen.selfplay", "analysis": "bookgen.analysis"}
STAGES = ("bookgen.grow", "bookgen.refine", "bookgen.selfplay", "bookgen.analysis")
APP = ("bookgen.cli", "bookgen.__main__")

# Core layers, lowest first; a module may import its own layer and those listed.
CORE_LAYERS: dict[str, tuple[str, ...]] = {
    "foundation": (),
    "workers": ("foundation",),
    "play": ("foundation",),
    "store": ("foundation", "workers"),
    "formats": ("foundation", "workers", "play", "store"),
    "engines": ("foundation", "workers", "play", "formats", "store"),
    "game loop": ("foundation", "workers", "play", "formats", "store", "engines"),
    "bookfiles": ("foundation", "workers", "play", "formats", "store", "engines"),
    # bookgen serve's explorer: reads the book through the store, draws with the foundation
    "explore": ("foundation", "workers", "play", "store"),
    # bookgen cycle's config and generation folders: no stage, no engine (the loop that
    # runs the stages is bookgen.cli.cycle)
    "cycle": ("foundation",),
}
# Modules whose layer is not their package's: the game loop asks the engines' players,
# while the rest of bookgen.play (rules, clocks) lies below the engines.
MODULE_LAYERS = {"bookgen.play.loop": "game loop"}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """The project modules ``name`` imports (anywhere in the file), with line numbers."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target, node.lineno


EDGES = {name: sorted(set(_imports(name, path))) for name, path in MODULES.items()}


def _within(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _core_layer(name: str) -> str:
    if name in MODULE_LAYERS:
        return MODULE_LAYERS[name]
    parts = name.split(".")
    if len(parts) > 2 and parts[1] in CORE_LAYERS:
        return parts[1]
    if len(parts) == 2 and parts[1] in CORE_LAYERS and MODULES[name].name == "__init__.py":
        return parts[1]
    return "foundation"


def _stage(name: str) -> str | None:
    return next((s for s in STAGES if _within(name, (s,))), None)


def test_the_layout_is_known():
    """Every core subpackage has a layer (a new one must be placed in CORE_LAYERS)."""
    packages = {name.split(".")[1] for name, path in MODULES.items()
                if name.count(".") == 1 and path.name == "__init__.py"}
    assert packages <= set(CORE_LAYERS) | {s.split(".")[1] for s in STAGES} | {"cli"}


def test_imports_run_one_way():
    wrong = []
    for name, targets in EDGES.items():
        for target, line in targets:
            where = f"{MODULES[name].relative_to(ROOT)}:{line}: {name} -> {target}"
            if _within(target, APP) and not _within(name, APP):
                wrong.append(f"{where} (only the command line imports the command line)")
            elif _within(name, APP):
                continue
            elif _stage(target) and _stage(target) != _stage(name):
                wrong.append(f"{where} ({'a stage' if _stage(name) else 'the core'} imports "
                             f"another stage)")
            elif not _stage(name) and not _stage(target):
                source, dest = _core_layer(name), _core_layer(target)
                if dest != source and dest not in CORE_LAYERS[source]:
                    wrong.append(f"{where} (core layer {source} imports {dest})")
    assert not wrong, "\n".join(wrong)


def _cycles() -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in EDGES.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(EDGES):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    assert _cycles() == []


def _calls(attribute: str) -> Iterator[tuple[str, int]]:
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and node.attr == attribute:
                yield name, node.lineno


def _uses(names: tuple[str, ...]) -> set[str]:
    """Modules that import any of ``names`` (a standard-library module)."""
    found = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            imported = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                        [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(i == n or i.startswith(n + ".") for i in imported for n in names):
                found.add(name)
    return found


@pytest.mark.parametrize(("attribute", "home"), [
    ("replace", ("bookgen.files",)),          # os.replace: atomic writes
    ("SIG_IGN", ("bookgen.signals",)),        # ignoring Ctrl-C
])
def test_one_place_for(attribute, home):
    sites = sorted({name for name, _ in _calls(attribute)
                    if attribute != "replace" or _is_os_replace(name)} - set(home))
    assert sites == []


def _is_os_replace(name: str) -> bool:
    tree = ast.parse(MODULES[name].read_text())
    return any(isinstance(n, ast.Attribute) and n.attr == "replace"
               and isinstance(n.value, ast.Name) and n.value.id == "os" for n in ast.walk(tree))


def test_process_pools_live_in_workers():
    users = {name for name in _uses(("multiprocessing", "concurrent.futures"))
             if not _within(name, ("bookgen.workers",))}
    assert users == set()


def test_sql_lives_in_the_store():
    sites = sorted({name for attribute in ("execute", "executemany", "executescript")
                    for name, _ in _calls(attribute)
                    if not _within(name, ("bookgen.store",))})
    assert sites == []
