"""Engine settings: what analyses positions, with which options and limits.

:class:`EngineSettings` is the one description of an engine for every
command that analyses positions: its spec (:class:`~bookgen.engines.spec.EngineSpec`),
USI ``setoption`` pairs, go limits, the search timeout, the restart policy,
for grow the MultiPV start and the network batch size, and for a network
where and how it runs (:class:`~bookgen.engines.network.device.NetworkSettings`:
device, fp16, onnxruntime providers). Settings are
picklable, so worker processes open their own engine from them
(:func:`bookgen.engines.factory.open_evaluator`).

:meth:`EngineSettings.key` is refine search's *analysis key*: the spec,
options and limits that make two analyses interchangeable. Books store it in
``runs.params``, and a run resumes from the analyses of earlier runs with
the same key, so its JSON must never change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bookgen.engines.builtin.alphabeta import PLAY_DEPTH, PLAY_NODES
from bookgen.engines.network.device import NetworkSettings
from bookgen.engines.restart import BEST_LINE_RETRIES, RestartPolicy, SearchLimits
from bookgen.engines.spec import EngineSpec, parse_spec
from bookgen.errors import BookgenError, SettingsError

__all__ = ["BEST_LINE_RETRIES", "EngineSettings", "engine_settings", "unknown_best_line_engine"]

_MAX_BUILTIN_DEPTH = 64    # builtin depth when only a node budget is given


@dataclass(frozen=True)
class EngineSettings:
    """An engine and how to run it.

    ``options`` are USI ``setoption`` pairs; ``limits`` the go limits (for
    the built-in search, ``depth`` and ``nodes``); ``timeout_s`` the longest
    wait for one USI search (None: automatic); ``restarts`` what a failed
    search does; ``multipv`` the MultiPV lines a USI evaluator starts with
    and ``batch_size`` a network's batch (grow; None: their defaults);
    ``network`` where a ``torch:`` or ``onnx:`` network runs (also under
    ``blend:``), not part of the analysis key.
    """

    spec: EngineSpec
    options: dict[str, str] = field(default_factory=dict)
    limits: SearchLimits = SearchLimits()
    timeout_s: float | None = None
    restarts: RestartPolicy = RestartPolicy()
    multipv: int | None = None
    batch_size: int | None = None
    network: NetworkSettings = NetworkSettings()

    def __post_init__(self) -> None:
        if self.network != NetworkSettings() and not self.spec.base.is_network:
            name = next(iter(self.network.options()))
            raise SettingsError(f"network.{name}", "applies to torch: and onnx: evaluators "
                                f"only, not to {self.spec.base.kind}")

    def key(self) -> dict[str, Any]:
        """The analysis key: ``{"engine", "options" (sorted), "nodes", "byoyomi",
        "movetime", "depth"}`` (limits in their USI names and units)."""
        limits = self.limits
        return {"engine": str(self.spec), "options": dict(sorted(self.options.items())),
                "nodes": limits.nodes, "byoyomi": limits.byoyomi_ms,
                "movetime": limits.movetime_ms, "depth": limits.depth}

    @classmethod
    def from_key(cls, key: dict[str, Any], timeout_s: float | None = None,
                 retries: int = BEST_LINE_RETRIES) -> EngineSettings:
        """The settings an analysis key describes (with this timeout and restarts)."""
        limits = SearchLimits(key.get("nodes"), key.get("byoyomi"), key.get("movetime"),
                              key.get("depth"))
        return cls(parse_spec(key["engine"]), dict(key.get("options") or {}), limits,
                   timeout_s, RestartPolicy(retries))

    def evaluator_options(self) -> dict[str, Any]:
        """The constructor options of the evaluator these settings name (for
        ``blend:BOOK:INNER``, of INNER), as grow records them in its runs: only
        those given, in this order."""
        kind = self.spec.base.kind
        limits = self.limits
        options: dict[str, Any] = {}
        if kind == "usi":
            options["options"] = dict(self.options)
            for name, value in (("nodes", limits.nodes), ("byoyomi", limits.byoyomi_ms),
                                ("movetime", limits.movetime_ms), ("multipv", self.multipv),
                                ("depth", limits.depth), ("timeout", self.timeout_s)):
                if value is not None:
                    options[name] = value
            if self.restarts != RestartPolicy():
                options["restarts"] = self.restarts.retries
        elif kind == "builtin":
            for name, value in (("depth", limits.depth), ("nodes", limits.nodes)):
                if value is not None:
                    options[name] = value
        elif kind in ("torch", "onnx"):
            if self.batch_size is not None:
                options["batch_size"] = self.batch_size
            options.update(self.network.options())
        return options


def engine_settings(engine: str = "builtin", engine_options: dict[str, str] | None = None,
                    nodes: int | None = None, byoyomi: int | None = None,
                    movetime: int | None = None, depth: int | None = None,
                    timeout: float | None = None,
                    retries: int = BEST_LINE_RETRIES) -> EngineSettings:
    """Validated settings for best-line analyses (refine search), with the defaults
    filled in (they are part of the key).

    ``engine`` is ``builtin`` or ``usi:COMMAND``. builtin: depth 4 with a
    40,000-node budget unless ``depth``/``nodes`` say otherwise (``nodes``
    alone deepens until the budget is spent). usi: byoyomi 1000 ms when no
    limit is given. Bad values raise :class:`~bookgen.errors.SettingsError` naming
    the field as refine search's settings nest it (``engine.limits.nodes``,
    ``engine.timeout_s``, ...).
    """
    for name, value in (("nodes", nodes), ("byoyomi_ms", byoyomi), ("movetime_ms", movetime),
                        ("depth", depth)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise SettingsError(f"engine.limits.{name}",
                                f"must be a positive integer, not {value!r}")
    if timeout is not None and timeout <= 0:
        raise SettingsError("engine.timeout_s", "must be positive")
    if retries < 0:
        raise SettingsError("engine.restarts.retries", "must be 0 or more")
    options = {str(k): str(v) for k, v in (engine_options or {}).items()}
    try:
        spec = parse_spec(engine)
    except BookgenError:
        spec = None
    if spec is not None and spec.kind == "builtin":
        if options or byoyomi is not None or movetime is not None or timeout is not None:
            other = SettingsError.mention
            raise SettingsError("engine.options",
                                f"{SettingsError.FIELD}, {other('engine.limits.byoyomi_ms')}, "
                                f"{other('engine.limits.movetime_ms')} and "
                                f"{other('engine.timeout_s')} apply to usi: engines only")
        if depth is None and nodes is None:
            depth, nodes = PLAY_DEPTH, PLAY_NODES
        elif depth is None:
            depth = _MAX_BUILTIN_DEPTH
        return EngineSettings(spec, {}, SearchLimits(nodes=nodes, depth=depth),
                              restarts=RestartPolicy(retries))
    if spec is not None and spec.is_usi and spec.argument.strip():
        limits = SearchLimits(nodes, byoyomi, movetime, depth).or_default()
        return EngineSettings(spec, options, limits, timeout, RestartPolicy(retries))
    raise BookgenError(unknown_best_line_engine(engine, spec))


def unknown_best_line_engine(text: str, spec: EngineSpec | None) -> str:
    """Why ``text`` (parsed: ``spec``) cannot analyse best lines (refine search).

    A network (``torch:``, ``onnx:``, ``blend:``) is refused with its reason:
    refine search stores an engine's own search, independent of the MCTS over
    the network that grew the book; run the network's search as a USI engine
    (dlshogi) for that."""
    if spec is not None and spec.base.is_network:
        return (f"refine search: {text} is a network, which has no search of its own (its "
                "MCTS values are what grow stores); use builtin or usi:COMMAND, e.g. a "
                "dlshogi USI engine for the network's search")
    return f"unknown engine {text!r} (use builtin or usi:COMMAND)"
