"""The generations of a cycle on disk: ``gen-000/``, ``gen-001/`` ... and their stages.

A generation runs :data:`STAGES` in order. A stage writes its outputs (each
atomically, :mod:`bookgen.files`), then its done marker
``stages/STAGE.json``, which holds the stage's summary; a stage without its
marker is run again from the start (its partial outputs are cleared first,
except what the stage itself resumes). The last stage, ``summary``, writes
``generation.json``; a generation with it is finished.

Each generation records the fingerprint of the config it started with in
``config.json`` (:meth:`bookgen.cycle.config.CycleConfig.fingerprint`) and
keeps it: rerunning with another config is refused with the first key that
differs (:meth:`Generation.check_config`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bookgen.cycle.config import CycleConfig
from bookgen.errors import BookgenError
from bookgen.files import atomic_write

__all__ = ["STAGES", "Generation", "generation_dirs", "read_json", "write_json"]

STAGES = ("network", "grow", "search", "mistakes", "starts", "selfplay", "train", "suite",
          "match", "summary")
"""A generation's stages, in the order they run."""

_GEN = re.compile(r"gen-(\d{3,})")


def write_json(path: Path, data: Any) -> None:
    atomic_write(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise BookgenError(f"{path}: cannot read: {error}") from None


def generation_dirs(directory: Path) -> list[Path]:
    """The generation folders of a cycle directory, in order."""
    if not directory.is_dir():
        return []
    found = sorted((int(m.group(1)), p) for p in directory.iterdir()
                   if p.is_dir() and (m := _GEN.fullmatch(p.name)))
    return [p for _, p in found]


def _first_difference(old: Any, new: Any, prefix: str = "") -> str | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            where = f"{prefix}.{key}" if prefix else key
            if key not in old or key not in new:
                return where
            found = _first_difference(old[key], new[key], where)
            if found:
                return found
        return None
    return None if old == new else prefix


@dataclass(frozen=True)
class Generation:
    """Generation ``number`` of the cycle in ``directory``."""

    directory: Path
    number: int

    @property
    def path(self) -> Path:
        return self.directory / f"gen-{self.number:03d}"

    @property
    def name(self) -> str:
        return f"gen-{self.number:03d}"

    def file(self, name: str) -> Path:
        return self.path / name

    def marker(self, stage: str) -> Path:
        return self.path / "stages" / f"{stage}.json"

    def done(self, stage: str) -> bool:
        return self.marker(stage).exists()

    def stage_summary(self, stage: str) -> dict[str, Any]:
        data = read_json(self.marker(stage))
        assert isinstance(data, dict)
        return data

    def mark_done(self, stage: str, summary: dict[str, Any]) -> None:
        """The stage's outputs are complete: write its marker (atomically)."""
        if stage not in STAGES:
            raise ValueError(stage)
        self.marker(stage).parent.mkdir(parents=True, exist_ok=True)
        write_json(self.marker(stage), summary)

    @property
    def finished(self) -> bool:
        return self.done("summary")

    def started(self) -> bool:
        return self.file("config.json").exists()

    def check_config(self, config: CycleConfig) -> None:
        """Record the config of a new generation; refuse another config than the one
        a started generation ran with."""
        path = self.file("config.json")
        new = config.results_dict()
        if not path.exists():
            self.path.mkdir(parents=True, exist_ok=True)
            write_json(path, {"fingerprint": config.fingerprint(), "config": new})
            return
        recorded = read_json(path)
        if recorded.get("fingerprint") == config.fingerprint():
            return
        key = _first_difference(recorded.get("config", {}), json.loads(json.dumps(new)))
        state = "finished" if self.finished else "started"
        source = config.source or "the config"
        raise BookgenError(
            f"{source}: {key or 'the config'} differs from the config {self.name} "
            f"{state} with ({path}); a generation keeps its config: restore it, or "
            "run the new config in another directory")
