"""Players: the player that settings describe.

A player is named by a player spec (:func:`bookgen.engines.spec.parse_spec`
with ``role="player"``):

- ``builtin``: the built-in alpha-beta search
  (:class:`bookgen.engines.builtin.player.BuiltinPlayer`), at a depth and
  node budget that each use chooses
  (:class:`~bookgen.engines.player_settings.BuiltinPlay`);
- ``usi:COMMAND``: a USI engine with its own search
  (:class:`bookgen.engines.usi.player.UsiPlayer`);
- ``mcts:EVALUATOR`` (and a bare ``torch:``, ``onnx:`` or ``blend:`` spec):
  bookgen's MCTS over that evaluator
  (:class:`bookgen.engines.mcts_player.MctsPlayer`).

Each implements :class:`bookgen.engines.protocols.Player`; its settings are a
:class:`~bookgen.engines.player_settings.PlayerSettings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from bookgen.engines.player_settings import PlayerSettings
from bookgen.engines.protocols import Player

__all__ = ["close_players", "open_player"]


def open_player(settings: PlayerSettings,
                clock: Callable[[], float] = time.monotonic) -> Player:
    """The player ``settings`` describe, started. ``clock`` times a USI engine's
    moves (tests give a fake one)."""
    kind = settings.spec.kind
    if kind == "usi":
        from bookgen.engines.usi.player import UsiPlayer
        return UsiPlayer(settings, clock=clock)
    if kind == "builtin":
        from bookgen.engines.builtin.player import BuiltinPlayer
        return BuiltinPlayer(settings)
    if kind == "mcts":
        from bookgen.engines.mcts_player import MctsPlayer
        return MctsPlayer(settings)
    raise ValueError(f"{settings.spec} is not a player")


def close_players(players: Iterable[Player]) -> None:
    """Close each of ``players`` once (one object may play both sides); an error while
    closing is ignored, so that it cannot hide the error that ended the run."""
    for player in {id(p): p for p in players}.values():
        try:
            player.close()
        except Exception:
            pass
