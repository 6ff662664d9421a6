"""Engine specs: the one grammar for naming an evaluator, an analyser or a player.

Every command that takes an engine on the command line (``grow --evaluator``,
``refine search --engine``, ``selfplay --player``, ``match --engine``) parses
it here, into an :class:`EngineSpec`:

- ``builtin``: bookgen's own alpha-beta search (needs nothing installed). It
  analyses positions for grow and refine, and plays moves by itself in
  self-play and matches;
- ``usi:COMMAND``: any USI engine, through bookgen's USI client;
- ``torch:PATH`` / ``onnx:PATH``: a dlshogi-shaped network (analysers only;
  bookgen's ``.pt`` or dlshogi's ``.npz``/``.pth`` for torch, any dlshogi-layout
  ONNX file);
- ``blend:BOOK:INNER``: book priors blended into the analyser INNER;
- ``mcts:INNER``: a player that runs bookgen's MCTS over the analyser INNER
  (players only). As a player, a bare network or blend spec means the same:
  ``torch:M.pt`` plays as ``mcts:torch:M.pt``.

``str(spec)`` gives the canonical text back; for every analyser spec it is
the text that was parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bookgen.errors import BookgenError

__all__ = ["EngineSpec", "Role", "parse_spec"]

Role = Literal["analyser", "player"]
Kind = Literal["builtin", "usi", "torch", "onnx", "blend", "mcts"]

NETWORK_KINDS = ("torch", "onnx")
ANALYSER_HINT = "use builtin, usi:COMMAND, torch:PATH, onnx:PATH or blend:BOOK:INNER"
PLAYER_HINT = ("use builtin (alpha-beta), usi:COMMAND, or mcts:EVALUATOR with EVALUATOR one of "
               "builtin, torch:PATH, onnx:PATH or blend:BOOK:INNER")


@dataclass(frozen=True)
class EngineSpec:
    """A parsed engine name: its kind, its argument (a USI command, a model or
    book path) and, for ``blend`` and ``mcts``, the spec it wraps."""

    kind: Kind
    argument: str = ""
    inner: EngineSpec | None = None

    def __str__(self) -> str:
        if self.kind == "builtin":
            return "builtin"
        if self.kind == "mcts":
            return f"mcts:{self.inner}"
        if self.kind == "blend":
            return f"blend:{self.argument}:{self.inner}"
        return f"{self.kind}:{self.argument}"

    @property
    def is_usi(self) -> bool:
        """A USI engine (which searches by itself and takes go limits)."""
        return self.kind == "usi"

    @property
    def is_network(self) -> bool:
        """A network evaluator named directly (``torch:`` or ``onnx:``)."""
        return self.kind in NETWORK_KINDS

    @property
    def base(self) -> EngineSpec:
        """The spec under every ``blend``/``mcts`` wrapper: the one that evaluates."""
        spec = self
        while spec.inner is not None:
            spec = spec.inner
        return spec

    @property
    def evaluator(self) -> EngineSpec:
        """What an MCTS player searches over (itself for every other spec)."""
        return self.inner if self.kind == "mcts" and self.inner is not None else self


def parse_spec(text: str, role: Role = "analyser") -> EngineSpec:
    """Parse an engine name for ``role``; a :class:`BookgenError` names what is wrong.

    As an analyser: ``builtin``, ``usi:COMMAND``, ``torch:PATH``, ``onnx:PATH``
    and ``blend:BOOK:INNER``. As a player: ``builtin``, ``usi:COMMAND`` and
    ``mcts:ANALYSER``; a bare ``torch:``, ``onnx:`` or ``blend:`` spec is
    taken as ``mcts:`` over it.
    """
    if role == "player":
        return _parse_player(text)
    spec = _parse_analyser(text)
    if spec is None:
        raise BookgenError(f"unknown evaluator {text!r} ({ANALYSER_HINT})")
    return spec


def _parse_analyser(text: str) -> EngineSpec | None:
    kind, _, argument = text.partition(":")
    if kind == "builtin" and not argument and text == "builtin":
        return EngineSpec("builtin")
    if kind in ("usi", "torch", "onnx") and argument:
        return EngineSpec(kind, argument)  # type: ignore[arg-type]  # kind checked above
    if kind == "blend" and ":" in argument:
        book, _, inner_text = argument.partition(":")
        inner = _parse_analyser(inner_text)
        if inner is not None and book:
            return EngineSpec("blend", book, inner)
    return None


def _parse_player(text: str) -> EngineSpec:
    kind, _, argument = text.partition(":")
    if kind == "mcts":
        inner = _parse_analyser(argument)
        if inner is None:
            raise BookgenError(f"unknown player {text!r}: mcts: needs an evaluator after it "
                               f"({ANALYSER_HINT})")
        return EngineSpec("mcts", inner=inner)
    spec = _parse_analyser(text)
    if spec is None:
        raise BookgenError(f"unknown player {text!r} ({PLAYER_HINT})")
    if spec.kind in ("builtin", "usi"):
        return spec
    return EngineSpec("mcts", inner=spec)
