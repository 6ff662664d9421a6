"""The settings of a player: everything needed to open one in any process (picklable).

:func:`bookgen.engines.players.open_player` opens the player they describe.
Self-play and matches build them from the command line and differ only in
their fields: the built-in player's strength (self-play: depth 4 / 40,000
nodes; a match: depth 64 / 20,000 nodes), and what a USI engine's failure
does (:attr:`PlayerSettings.restarts`, a
:class:`~bookgen.engines.restart.RestartPolicy`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bookgen.engines.builtin.alphabeta import PLAY_DEPTH, PLAY_NODES
from bookgen.engines.restart import RestartPolicy, SearchLimits
from bookgen.engines.spec import EngineSpec, parse_spec
from bookgen.errors import SettingsError

__all__ = ["RUNNER_GO_LIMITS", "BuiltinPlay", "MctsPlay", "PlayerSettings", "RandomOpening"]

RUNNER_GO_LIMITS = ("btime", "wtime", "binc", "winc", "byoyomi", "nodes", "movetime",
                    "ponder", "infinite", "mate")
"""``go`` tokens a player's ``go_options`` may not hold: the runner's time and node
controls (and modes that are not a move search)."""
_GO_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_FIELD = SettingsError.FIELD


@dataclass(frozen=True)
class BuiltinPlay:
    """The built-in alpha-beta player's strength: its depth and node budget per move."""

    depth: int = PLAY_DEPTH
    nodes: int = PLAY_NODES


@dataclass(frozen=True)
class RandomOpening:
    """An MCTS player samples the first ``random_moves`` plies of each game from visit
    counts, with weights ``visits ** (1 / temperature)``, among the moves whose win
    rate is at least ``random_cutoff`` of the most visited move's (dlshogi's
    ``--random``, ``--random_temperature``, ``--random_cutoff``)."""

    random_moves: int = 4
    temperature: float = 1.0
    random_cutoff: float = 0.9

    def __post_init__(self) -> None:
        if self.random_moves < 0:
            raise SettingsError("opening.random_moves", "must be at least 0")
        if not self.temperature > 0:
            raise SettingsError("opening.temperature", "must be positive")
        if not 0 <= self.random_cutoff <= 1:
            raise SettingsError("opening.random_cutoff", "must be between 0 and 1")


@dataclass(frozen=True)
class MctsPlay:
    """An MCTS player's search and its random opening moves (:class:`RandomOpening`).

    ``evaluator_options`` go to its evaluator's constructor.
    """

    playouts: int = 100
    batch_size: int = 1
    opening: RandomOpening = RandomOpening()
    evaluator_options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class PlayerSettings:
    """Everything needed to open a player in any process (picklable).

    ``name`` is the player's name in a match: messages then say ``player
    NAME``, and games record it; None (self-play) names the player after
    its engine. ``options`` are a USI engine's ``setoption`` pairs, or the
    built-in player's ``depth`` and ``nodes`` (as text, checked when the
    player opens). ``builtin`` is the built-in player's strength without
    those options, ``mcts`` an MCTS player's search. A USI engine without a
    clock searches with ``limits`` (none: byoyomi 1000) and waits
    ``engine_timeout_s`` at most (None: the client's default for the limits);
    gpsshogi refuses to start under limits it aborts on. ``restarts``: what a
    USI engine's crash, hang or broken protocol does: ``"retry"`` restarts it
    and searches again, up to ``retries`` times, then fails the run;
    ``"forfeit"`` loses the game
    (:class:`~bookgen.engines.protocols.PlayerFailure`) and restarts the
    engine before its next game. ``go_options`` are ``KEY VALUE`` tokens added
    to a USI engine's every ``go`` (not the limits the runner sets: see
    :data:`RUNNER_GO_LIMITS`); ``ponder``: a USI engine that declares
    ``USI_Ponder`` ponders (:class:`bookgen.engines.usi.player.UsiPlayer`).
    """

    spec: EngineSpec
    name: str | None = None
    options: tuple[tuple[str, str], ...] = ()
    builtin: BuiltinPlay = field(default_factory=BuiltinPlay)
    mcts: MctsPlay = field(default_factory=MctsPlay)
    limits: SearchLimits = field(default_factory=SearchLimits)
    engine_timeout_s: float | None = None
    restarts: RestartPolicy = field(default_factory=RestartPolicy)
    go_options: tuple[tuple[str, str], ...] = ()
    ponder: bool = False

    def __post_init__(self) -> None:
        for key, value in self.go_options:
            if not _GO_KEY.fullmatch(key):
                raise SettingsError("go_options", f"{_FIELD}: {key!r} is not a go option "
                                    "name (letters, digits and _)")
            if key in RUNNER_GO_LIMITS:
                raise SettingsError("go_options", f"{_FIELD}: {key!r} is set by the runner "
                                    "from the time control")
            if not value or any(c.isspace() for c in value):
                raise SettingsError("go_options", f"{_FIELD}: {key}={value!r} needs one "
                                    "value without spaces")

    @classmethod
    def parse(cls, text: str, **fields: Any) -> PlayerSettings:
        """Settings for the player spec ``text`` (a clear error when it is not one)."""
        return cls(parse_spec(text, role="player"), **fields)
