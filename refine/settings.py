"""What ``refine search`` and ``refine mistakes`` do, as frozen settings objects.

:class:`SearchSettings` (:func:`bookgen.refine.book_search.search`) nests the
engine (:class:`bookgen.engines.settings.EngineSettings`; refine's defaults:
:func:`bookgen.engines.settings.engine_settings`) and the selection of positions
(:class:`PositionSelection`). :class:`MistakesSettings`
(:func:`bookgen.refine.mistakes.mistakes`) nests the detection rule
(:class:`DetectionSettings`, which :func:`bookgen.refine.mistakes.find_mistakes`
takes alone) and what each ``--iterate`` extension does
(:class:`ExtensionSettings`). Every class validates its fields when it is made
(:class:`bookgen.errors.SettingsError` names the field) and pickles. Their
``params()`` are the runs' ``runs.params``.

This module loads neither numpy nor cshogi (the CLI reads its defaults for
``--help``): the engine settings are imported where they are made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bookgen.errors import BookgenError, SettingsError, at_least

if TYPE_CHECKING:
    from bookgen.engines.settings import EngineSettings
    from bookgen.workers.cluster import ClusterSettings

__all__ = ["SELECTIONS", "DetectionSettings", "ExtensionSettings", "MistakesSettings",
           "PositionSelection", "SearchSettings"]

SELECTIONS = ("all", "leaves", "principal", "visits")


def _not_negative(field_name: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise SettingsError(field_name, "must be 0 or more")


# --------------------------------------------------------------------------
# refine search


@dataclass(frozen=True)
class PositionSelection:
    """Which book positions refine search analyses (see
    :mod:`bookgen.refine.book_search`): ``select`` one of :data:`SELECTIONS`;
    ``min_visits`` the least ``visits`` of ``visits``; ``margin_cp`` how far
    below the best move (cp) ``principal`` follows moves."""

    select: str = "all"
    min_visits: int | None = None
    margin_cp: int = 50

    def __post_init__(self) -> None:
        if self.select not in SELECTIONS:
            raise BookgenError(f"unknown selection {self.select!r} "
                               f"(choose from {', '.join(SELECTIONS)})")
        if self.select == "visits" and self.min_visits is None:
            raise SettingsError("selection.min_visits",
                                f"{SettingsError.mention('selection.select')} visits needs "
                                f"{SettingsError.FIELD} N")
        _not_negative("selection.min_visits", self.min_visits)
        _not_negative("selection.margin_cp", self.margin_cp)


def _refine_engine() -> EngineSettings:
    from bookgen.engines.settings import engine_settings

    return engine_settings()


@dataclass(frozen=True)
class SearchSettings:
    """Everything a refine search run does (see ``bookgen refine search --help``):
    the ``engine`` (default: the built-in search at depth 4 with a 40,000-node
    budget), the ``selection``, the engine processes (``workers``) and the most
    positions one run searches (``limit``; None: all); ``cluster``: the engines in
    the actors of a Ray cluster instead."""

    engine: EngineSettings = field(default_factory=_refine_engine)
    selection: PositionSelection = field(default_factory=PositionSelection)
    workers: int = 1
    limit: int | None = None
    cluster: ClusterSettings | None = None

    def __post_init__(self) -> None:
        spec = self.engine.spec
        if not (spec.kind == "builtin" or (spec.is_usi and spec.argument.strip())):
            from bookgen.engines.settings import unknown_best_line_engine

            raise BookgenError(unknown_best_line_engine(str(spec), spec))
        at_least("workers", self.workers)
        at_least("limit", self.limit)

    def params(self, only: int | None = None) -> dict[str, Any]:
        """The run's ``runs.params``, with ``only`` the number of position ids the
        run was restricted to (None: not restricted). ``key`` is the analysis key
        (:meth:`bookgen.engines.settings.EngineSettings.key`)."""
        engine, selection = self.engine, self.selection
        return {"engine": str(engine.spec), "key": engine.key(), "select": selection.select,
                "min_visits": selection.min_visits, "margin": selection.margin_cp,
                "workers": self.workers, "limit": self.limit,
                "engine_timeout": engine.timeout_s, "retries": engine.restarts.retries,
                "only": only,
                **({"cluster": self.cluster.params()} if self.cluster is not None else {})}


# --------------------------------------------------------------------------
# refine mistakes


@dataclass(frozen=True)
class DetectionSettings:
    """dlshogi's ``diff_eval`` rule and the analyses it compares with (see
    :mod:`bookgen.refine.mistakes`): those of the latest refine search run with
    analyses (by ``engine``, an engine spec, when given), or with the analysis
    key of run ``analysis_run``. ``threshold_cp`` is ``thr``,
    ``opp_threshold_cp`` ``opp`` (None: ``threshold_cp``), ``diff_cp`` the least
    ``|engine - book|`` of a flagged position."""

    engine: str | None = None
    analysis_run: int | None = None
    threshold_cp: int = 150
    opp_threshold_cp: int | None = None
    diff_cp: int = 200

    def __post_init__(self) -> None:
        at_least("detection.analysis_run", self.analysis_run)
        _not_negative("detection.threshold_cp", self.threshold_cp)
        _not_negative("detection.diff_cp", self.diff_cp)
        _not_negative("detection.opp_threshold_cp", self.opp_threshold_cp)

    @property
    def opp_cp(self) -> int:
        """``opp``: ``opp_threshold_cp``, else ``threshold_cp``."""
        return self.threshold_cp if self.opp_threshold_cp is None else self.opp_threshold_cp


@dataclass(frozen=True)
class ExtensionSettings:
    """What ``--iterate`` does: at most ``max_iterations`` extensions, each growing
    ``expand`` positions from each new mistake (one grow run per mistake with
    ``evaluator``, its constructor ``evaluator_options``, ``playouts`` and
    ``batch_size`` per leaf search; None: the evaluator's default), then
    searching what was added with ``workers`` engine processes (both on a Ray
    ``cluster`` when given). The grow runs' seeds derive from ``seed``."""

    max_iterations: int = 3
    expand: int = 2
    evaluator: str = "builtin"
    evaluator_options: Mapping[str, Any] | None = field(default=None, hash=False)
    playouts: int = 200
    batch_size: int | None = None
    workers: int = 1
    seed: int = 0
    cluster: ClusterSettings | None = None

    def __post_init__(self) -> None:
        if self.evaluator_options is not None:
            object.__setattr__(self, "evaluator_options", dict(self.evaluator_options))
        for name in ("max_iterations", "expand", "workers", "playouts", "batch_size"):
            at_least(f"extension.{name}", getattr(self, name))

    def mcts_batch_size(self) -> int:
        """``batch_size``, else the evaluator's default
        (:func:`bookgen.engines.factory.default_batch_size`)."""
        if self.batch_size is not None:
            return self.batch_size
        from bookgen.engines.factory import default_batch_size

        return default_batch_size(self.evaluator, self.evaluator_options)


@dataclass(frozen=True)
class MistakesSettings:
    """Everything a refine mistakes run does (see ``bookgen refine mistakes
    --help``): the ``detection`` rule and, with ``iterate``, the extensions
    (``extension``)."""

    detection: DetectionSettings = field(default_factory=DetectionSettings)
    iterate: bool = False
    extension: ExtensionSettings = field(default_factory=ExtensionSettings)

    def params(self, key: dict[str, Any], key_run: int) -> dict[str, Any]:
        """The run's ``runs.params``, with the analysis ``key`` compared with and
        the run ``key_run`` it was taken from; the extension's fields are None
        without ``iterate`` (but ``workers`` and ``seed``)."""
        detection, extension, iterate = self.detection, self.extension, self.iterate
        return {"engine": detection.engine, "analysis_run": key_run, "key": key,
                "threshold": detection.threshold_cp, "opp_threshold": detection.opp_cp,
                "diff": detection.diff_cp, "iterate": iterate,
                "max_iterations": extension.max_iterations if iterate else None,
                "evaluator": extension.evaluator if iterate else None,
                "evaluator_options": extension.evaluator_options if iterate else None,
                "playouts": extension.playouts if iterate else None,
                "batch_size": extension.mcts_batch_size() if iterate else None,
                "expand": extension.expand if iterate else None,
                "workers": extension.workers, "seed": extension.seed,
                **({"cluster": extension.cluster.params()}
                   if iterate and extension.cluster is not None else {})}
