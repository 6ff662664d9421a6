"""Starting USI engines and restarting them when they fail: one policy for every use.

Grow's evaluator, refine search, self-play and matches all run USI engines
(:class:`bookgen.engines.usi.client.UsiEngine`) the same way:

- :func:`start_engine` starts one. An option the engine refuses, an engine
  that cannot start, and go limits that gpsshogi (gpsusi) aborts on all
  raise one error class, in words that begin with the caller's
  :class:`EngineLabel` (each use keeps the texts it has always printed);
- :func:`run_with_restarts` makes one request (a search) under a
  :class:`RestartPolicy`: with ``on_failure="retry"`` a failed attempt
  restarts the engine and tries again, up to ``retries`` restarts, then
  raises :class:`EngineFailed`; with ``"forfeit"`` the first failure ends
  the request (a match player loses the game, and is restarted before its
  next one).

:class:`SearchLimits` holds the go limits, and :data:`DEFAULT_BYOYOMI` is
the byoyomi every use gives an engine that got no limit at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from bookgen.engines.usi.client import UsiEngine, UsiError, UsiOptionError
from bookgen.errors import BookgenError

__all__ = [
    "BEST_LINE_RETRIES", "DEFAULT_BYOYOMI", "EngineFailed", "EngineLabel", "RestartPolicy",
    "SearchLimits", "is_gpsshogi", "run_with_restarts", "search_stop_grace", "start_engine",
]

# restarts per position of a best-line analysis (refine search's --retries)
BEST_LINE_RETRIES = 2

T = TypeVar("T")

DEFAULT_BYOYOMI = 1000  # ms per move for a USI engine given no limit


@dataclass(frozen=True)
class SearchLimits:
    """The limits of one ``go``: ``nodes``, ``byoyomi_ms``, ``movetime_ms``, ``depth``
    (None: not given)."""

    nodes: int | None = None
    byoyomi_ms: int | None = None
    movetime_ms: int | None = None
    depth: int | None = None

    @property
    def given(self) -> bool:
        """Whether any limit is set."""
        return any(value is not None for value in
                   (self.nodes, self.byoyomi_ms, self.movetime_ms, self.depth))

    def or_default(self) -> SearchLimits:
        """These limits, or byoyomi :data:`DEFAULT_BYOYOMI` when none is given."""
        return self if self.given else SearchLimits(byoyomi_ms=DEFAULT_BYOYOMI)

    def go(self) -> dict[str, int | None]:
        """Keyword arguments of :meth:`UsiEngine.go <bookgen.engines.usi.client.UsiEngine.go>`."""
        return {"nodes": self.nodes, "byoyomi": self.byoyomi_ms, "movetime": self.movetime_ms,
                "depth": self.depth}

    @property
    def aborts_gpsshogi(self) -> bool:
        """Whether gpsshogi aborts on these limits (it does on go nodes, movetime and depth)."""
        return (self.nodes, self.movetime_ms, self.depth) != (None, None, None)


@dataclass(frozen=True)
class EngineLabel:
    """How one use of USI engines words what goes wrong when one starts.

    ``prefix`` begins an error the started engine gives (an option it refuses:
    ``"USI engine 'cmd'"``, ``"engine usi:cmd"``, ``"player a"``), followed by
    ``": "`` and the error; ``cannot_start`` begins a failure to start it
    (``"cannot start USI engine 'cmd'"``); ``gpsshogi`` is the whole refusal
    of go limits gpsshogi aborts on, ``{name}`` standing for the engine's
    name. ``error`` is the class raised.
    """

    prefix: str
    cannot_start: str
    gpsshogi: str
    error: type[BookgenError] = BookgenError

    def failure(self, error: BaseException) -> BookgenError:
        """``error`` (from the started engine), worded for this use."""
        return self.error(f"{self.prefix}: {error}")


def is_gpsshogi(name: str | None) -> bool:
    """Whether an engine's ``id name`` says it is gpsshogi (gpsusi)."""
    return (name or "").lower().startswith("gpsshogi")


def search_stop_grace(timeout_s: float | None) -> float:
    """Seconds an analysing engine gets to answer ``stop``: 5, or less with a shorter
    search timeout."""
    return 5.0 if timeout_s is None else min(5.0, timeout_s)


def start_engine(command: str, options: Mapping[str, object] | None, limits: SearchLimits,
                 label: EngineLabel, *, stop_grace_s: float | None = None,
                 quit_grace_s: float | None = None,
                 clock: Callable[[], float] | None = None) -> UsiEngine:
    """Start the USI engine ``command`` with ``options`` (``setoption`` pairs).

    Raises ``label.error`` when the engine refuses an option, cannot start,
    or is gpsshogi and ``limits`` hold a limit it aborts on (it is quit
    first). ``stop_grace_s``, ``quit_grace_s`` and ``clock`` go to the
    client (None: its defaults).
    """
    settings: dict[str, Any] = {}
    if stop_grace_s is not None:
        settings["stop_grace"] = stop_grace_s
    if quit_grace_s is not None:
        settings["quit_grace"] = quit_grace_s
    if clock is not None:
        settings["clock"] = clock
    try:
        engine = UsiEngine(command, options=dict(options or {}), **settings)
    except UsiOptionError as error:
        raise label.failure(error) from None
    except UsiError as error:
        raise label.error(f"{label.cannot_start}: {error}") from None
    if is_gpsshogi(engine.name) and limits.aborts_gpsshogi:
        engine.close()
        raise label.error(label.gpsshogi.replace("{name}", engine.name or command))
    return engine


@dataclass(frozen=True)
class RestartPolicy:
    """What a failed request does: ``"retry"`` restarts the engine and tries again,
    up to ``retries`` times; ``"forfeit"`` gives up at once (the caller restarts the
    engine before its next use)."""

    retries: int = 3
    on_failure: Literal["retry", "forfeit"] = "retry"

    @property
    def attempts(self) -> int:
        """How many times one request is tried."""
        return self.retries + 1 if self.on_failure == "retry" else 1


class EngineFailed(Exception):
    """Every attempt of one request failed. ``errors`` holds each attempt's error,
    ``restarts`` the restarts tried (a restart that failed counts)."""

    def __init__(self, errors: list[Exception], restarts: int) -> None:
        super().__init__(str(errors[-1]))
        self.errors = errors
        self.restarts = restarts

    @property
    def last(self) -> Exception:
        """The last attempt's error."""
        return self.errors[-1]


def run_with_restarts(engine: UsiEngine, attempt: Callable[[], T], policy: RestartPolicy, *,
                      retried: tuple[type[Exception], ...] = (UsiError,),
                      final: tuple[type[Exception], ...] = (),
                      after_restart: Callable[[], None] | None = None) -> tuple[T, int]:
    """``(attempt(), restarts)``: the request, tried until it succeeds.

    Under ``"retry"``, the engine is restarted before a retry, and before the
    first try when it is not running (then ``after_restart`` runs, for
    example ``usinewgame``); under ``"forfeit"`` it is tried once as it is.
    Errors of the ``retried`` classes (a restart's own included) are retried
    as ``policy`` allows; an error of the ``final`` classes ends the request
    at once; any other error propagates. A request that does not succeed
    raises :class:`EngineFailed`.
    """
    errors: list[Exception] = []
    restarts = 0
    for number in range(policy.attempts):
        try:
            if policy.on_failure == "retry" and (number > 0 or not engine.alive):
                restarts += 1
                engine.restart()
                if after_restart is not None:
                    after_restart()
            return attempt(), restarts
        except final as error:
            errors.append(error)
            break
        except retried as error:
            errors.append(error)
    raise EngineFailed(errors, restarts)
