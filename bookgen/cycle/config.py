"""The settings of ``bookgen cycle``, read from a TOML file (``data/cycle.toml``).

:func:`load_config` reads the file with :mod:`tomllib` into a frozen
:class:`CycleConfig`: one section per stage, each a frozen dataclass whose
fields are the section's keys. Unknown keys, wrong types and bad values are
one-line :class:`CycleConfigError` s that name the file and the key
(``cycle.toml: selfplay.games: must be at least 1``). The stages' own settings
are built from these by the command line (:mod:`bookgen.cli.cycle`), which
names the key of a stage's error the same way.

:meth:`CycleConfig.fingerprint` is a hash of everything that decides what a
generation produces (the ``[run]`` section, how the work is spread over
processes, is left out): a generation keeps the fingerprint it started with
(:mod:`bookgen.cycle.generations`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bookgen.errors import BookgenError, SettingsError, at_least

__all__ = ["BlendRule", "CycleConfig", "CycleConfigError", "GrowStage", "MatchStage",
           "MistakesStage", "NetworkStart", "PromotionTest", "RefineEngine", "RunSettings",
           "SearchStage", "SelfplayStage", "StartsStage", "SuiteStage", "TrainStage",
           "config_error", "load_config"]

START_SOURCES = ("mistakes", "all", "leaves", "principal", "initial")
OPPONENTS_HELP = "'self', 'refine' (the refine engine) or a player spec (usi:COMMAND, mcts:...)"


class CycleConfigError(BookgenError):
    """A bad cycle config: one line naming the file and the key."""


def config_error(path: str | Path, error: SettingsError, section: str) -> CycleConfigError:
    """``error`` (of a section's settings, or of a stage's settings built from the
    section) as a config error naming ``section.key``."""
    return CycleConfigError(f"{path}: " + error.naming(f"{section}.{error.field}",
                                                       lambda f: f"{section}.{f}"))


def _positive(name: str, value: float | None) -> None:
    at_least(name, value, 1)


def _one_of(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise SettingsError(name, f"must be one of {', '.join(choices)}, not {value!r}")


@dataclass(frozen=True)
class NetworkStart:
    """The network of generation 0: ``start`` a model file (``.pt``, as ``bookgen train``
    and ``bookgen model init`` write it) or
    ``init``, a random dlshogi-shaped network of ``blocks`` x ``channels``
    initialised with ``seed``."""

    start: str = "init"
    blocks: int = 1
    channels: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if self.start != "init" and not self.start.endswith(".pt"):
            raise SettingsError("start", "must be 'init' or a bookgen model file (.pt, as "
                                f"'bookgen train' writes), not {self.start!r}")
        _positive("blocks", self.blocks)
        _positive("channels", self.channels)


@dataclass(frozen=True)
class RefineEngine:
    """The alpha-beta engine that refine search runs, and the opponent ``refine`` of
    self-play and matches: a ``usi:COMMAND`` or ``builtin`` with its USI ``options``
    and its limits per search (``nodes``, ``depth``, ``movetime_ms``)."""

    engine: str = "usi:/usr/games/fairy-stockfish"
    options: dict[str, str] = field(default_factory=dict)
    nodes: int | None = 20000
    depth: int | None = None
    movetime_ms: int | None = None

    def __post_init__(self) -> None:
        if not (self.engine == "builtin" or self.engine.startswith("usi:")
                and self.engine[4:].strip()):
            raise SettingsError("engine", f"must be builtin or usi:COMMAND, not {self.engine!r}")
        object.__setattr__(self, "options", {str(k): str(v) for k, v in self.options.items()})
        for name in ("nodes", "depth", "movetime_ms"):
            _positive(name, getattr(self, name))


@dataclass(frozen=True)
class GrowStage:
    """grow: ``positions`` expanded per generation with ``evaluator`` (``network``:
    the generation's network; else an evaluator spec such as ``builtin``),
    ``playouts`` MCTS playouts each, walks at most ``max_ply`` deep."""

    positions: int = 100
    evaluator: str = "network"
    playouts: int = 100
    max_ply: int = 32
    eval_threshold_cp: int = 400

    def __post_init__(self) -> None:
        _positive("positions", self.positions)
        _positive("playouts", self.playouts)
        _positive("max_ply", self.max_ply)
        at_least("eval_threshold_cp", self.eval_threshold_cp, 0)


@dataclass(frozen=True)
class SearchStage:
    """refine search: at most ``positions`` book positions (``select``) analysed by
    the refine engine per generation."""

    positions: int = 200
    select: str = "all"

    def __post_init__(self) -> None:
        _positive("positions", self.positions)
        _one_of("select", self.select, ("all", "leaves", "principal"))


@dataclass(frozen=True)
class MistakesStage:
    """refine mistakes: dlshogi's diff_eval rule (``threshold_cp``, ``diff_cp``).
    ``held_out_share`` of the mistakes (picked by a hash of the position, the same
    in every run) are never self-play starts: training reports its value loss on
    them."""

    threshold_cp: int = 150
    diff_cp: int = 200
    held_out_share: float = 0.5

    def __post_init__(self) -> None:
        at_least("threshold_cp", self.threshold_cp, 0)
        at_least("diff_cp", self.diff_cp, 0)
        if not 0 <= self.held_out_share <= 1:
            raise SettingsError("held_out_share", "must be between 0 and 1")

    def held_out(self, position: str) -> bool:
        """Whether the mistake at ``position`` (its position line) is held out."""
        digest = hashlib.blake2b(position.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") < self.held_out_share * 2.0 ** 64


@dataclass(frozen=True)
class StartsStage:
    """Self-play start positions: ``source`` (``mistakes``, book positions ``all``,
    ``leaves`` or ``principal``, or ``initial``: the initial position only), at most
    ``limit``; a book source without positions falls back to the initial position."""

    source: str = "mistakes"
    limit: int | None = None
    min_ply: int | None = None
    max_ply: int | None = None

    def __post_init__(self) -> None:
        _one_of("source", self.source, START_SOURCES)
        _positive("limit", self.limit)
        at_least("min_ply", self.min_ply, 0)
        at_least("max_ply", self.max_ply, 0)


@dataclass(frozen=True)
class SelfplayStage:
    """Self-play: ``games`` games against each of ``opponents`` (``self``: the
    network both sides; any other: half the games with each colour), MCTS with
    ``playouts`` per move, the first ``random_moves`` plies sampled, draws at
    ``max_ply``."""

    games: int = 16
    opponents: tuple[str, ...] = ("self",)
    playouts: int = 100
    random_moves: int = 4
    max_ply: int = 256
    resign_cp: int | None = None

    def __post_init__(self) -> None:
        _positive("games", self.games)
        object.__setattr__(self, "opponents", tuple(self.opponents))
        if not self.opponents:
            raise SettingsError("opponents", f"must name at least one: {OPPONENTS_HELP}")
        for opponent in self.opponents:
            if not isinstance(opponent, str) or not opponent.strip():
                raise SettingsError("opponents", f"must be strings: {OPPONENTS_HELP}")
        if len(set(self.opponents)) != len(self.opponents):
            raise SettingsError("opponents", "name an opponent twice")
        if any(o not in ("self", "refine") for o in self.opponents) and self.games % 2:
            raise SettingsError("games", "must be even with an opponent other than self "
                                "(half the games with each colour)")
        _positive("playouts", self.playouts)
        at_least("random_moves", self.random_moves, 0)
        _positive("max_ply", self.max_ply)
        _positive("resign_cp", self.resign_cp)


@dataclass(frozen=True)
class TrainStage:
    """train: ``epochs`` over the generation's games, from the generation's network."""

    epochs: int = 1
    batch_size: int = 256
    learning_rate: float = 0.01
    optimizer: str = "sgd"
    result_share_of_value_target: float = 0.5
    validation_share: float = 0.1

    def __post_init__(self) -> None:
        _positive("epochs", self.epochs)
        _positive("batch_size", self.batch_size)
        _one_of("optimizer", self.optimizer, ("sgd", "adam"))
        if not self.learning_rate > 0:
            raise SettingsError("learning_rate", "must be positive")
        if not 0 <= self.result_share_of_value_target <= 1:
            raise SettingsError("result_share_of_value_target", "must be between 0 and 1")
        if not 0 <= self.validation_share < 1:
            raise SettingsError("validation_share", "must be at least 0 and below 1")


@dataclass(frozen=True)
class BlendRule:
    """Book priors blended into the network (``blend:BOOK:INNER``, dlshogi's
    Use_Book_Policy) in ``selfplay`` and/or the ``match`` players, by ``rule``
    (dlshogi or yaneuraou) with ``weight``; the book is the generation's."""

    selfplay: bool = False
    match: bool = False
    rule: str = "dlshogi"
    weight: float = 0.5

    def __post_init__(self) -> None:
        _one_of("rule", self.rule, ("dlshogi", "yaneuraou"))
        if not 0 <= self.weight <= 1:
            raise SettingsError("weight", "must be between 0 and 1")

    def options(self) -> dict[str, Any]:
        return {"rule": self.rule, "weight": self.weight}


@dataclass(frozen=True)
class SuiteStage:
    """The match's openings: balanced book positions (``bookgen suite``)."""

    max_value_cp: int = 150
    min_ply: int = 1
    max_ply: int = 16
    limit: int | None = 50

    def __post_init__(self) -> None:
        at_least("max_value_cp", self.max_value_cp, 0)
        _positive("min_ply", self.min_ply)
        _positive("max_ply", self.max_ply)
        _positive("limit", self.limit)


@dataclass(frozen=True)
class PromotionTest:
    """Whether the trained network replaces the generation's: ``test = "sprt"``: a
    GSPRT (``elo0``, ``elo1``, ``alpha``, ``beta``) stopping the match, at most
    ``games`` games, promoted when it accepts H1; ``test = "fixed"``: ``games``
    games, promoted when the likelihood of superiority is at least ``min_los``
    per cent."""

    test: str = "fixed"
    games: int = 40
    min_los: float = 95.0
    elo0: float = 0.0
    elo1: float = 10.0
    alpha: float = 0.05
    beta: float = 0.05

    def __post_init__(self) -> None:
        _one_of("test", self.test, ("fixed", "sprt"))
        if self.games < 2 or self.games % 2:
            raise SettingsError("games", "must be a positive even number (games come in "
                                f"colour-swapped pairs), got {self.games}")
        if not 0 <= self.min_los <= 100:
            raise SettingsError("min_los", "must be between 0 and 100")
        if not self.elo0 < self.elo1:
            raise SettingsError("elo0", f"must be below {SettingsError.mention('elo1')}")
        for name in ("alpha", "beta"):
            if not 0 < getattr(self, name) < 1:
                raise SettingsError(name, "must be between 0 and 1")


@dataclass(frozen=True)
class MatchStage:
    """The matches of the trained network: against the generation's network (the
    promotion test), ``anchor_games`` against generation 0's and ``refine_games``
    against the refine engine, MCTS with ``playouts`` per move."""

    playouts: int = 100
    max_ply: int = 256
    anchor_games: int = 0
    refine_games: int = 0

    def __post_init__(self) -> None:
        _positive("playouts", self.playouts)
        _positive("max_ply", self.max_ply)
        for name in ("anchor_games", "refine_games"):
            value = getattr(self, name)
            if value < 0 or value % 2:
                raise SettingsError(name, "must be an even number of games (colour-swapped "
                                    f"pairs), got {value}")


@dataclass(frozen=True)
class RunSettings:
    """How the work is spread (not part of a generation's fingerprint): ``workers``
    processes for refine search, self-play and matches; torch ``threads`` of
    training (None: all cores)."""

    workers: int = 1
    threads: int | None = None

    def __post_init__(self) -> None:
        _positive("workers", self.workers)
        _positive("threads", self.threads)


@dataclass(frozen=True)
class CycleConfig:
    """A whole cycle: its ``directory`` (relative paths: from the config file's
    folder) and ``seed``, and one section per stage."""

    directory: Path
    seed: int = 1
    network: NetworkStart = NetworkStart()
    refine: RefineEngine = RefineEngine()
    grow: GrowStage = GrowStage()
    search: SearchStage = SearchStage()
    mistakes: MistakesStage = MistakesStage()
    starts: StartsStage = StartsStage()
    selfplay: SelfplayStage = SelfplayStage()
    train: TrainStage = TrainStage()
    blend: BlendRule = BlendRule()
    suite: SuiteStage = SuiteStage()
    match: MatchStage = MatchStage()
    promotion: PromotionTest = PromotionTest()
    run: RunSettings = RunSettings()
    source: Path | None = None   # the file read

    def results_dict(self) -> dict[str, Any]:
        """Everything that decides a generation's outputs, as JSON-ready values."""
        data = _plain(self)
        for key in ("directory", "run", "source"):
            data.pop(key)
        return data

    def fingerprint(self) -> str:
        text = json.dumps(self.results_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


_SECTIONS = {f.name: f for f in fields(CycleConfig)
             if f.name not in ("directory", "seed", "source")}


def _type_name(kind: Any) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "a table", tuple: "a list"}.get(kind, str(kind))


def _check_type(key: str, value: Any, annotation: Any) -> Any:
    """``value`` as the field's type wants it (ints accepted for floats); a
    SettingsError naming ``key`` when it is not."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) \
        else (annotation,)
    for option in options:
        if option is type(None):
            continue
        origin = typing.get_origin(option) or option
        if origin is bool and isinstance(value, bool):
            return value
        if origin is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if origin is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if origin is str and isinstance(value, str):
            return value
        if origin is tuple and isinstance(value, list):
            return tuple(value)
        if origin is dict and isinstance(value, dict):
            return value
    wanted = " or ".join(_type_name(typing.get_origin(o) or o) for o in options
                         if o is not type(None))
    raise SettingsError(key, f"must be {wanted}, not {value!r}")


def _section(path: Path, name: str, cls: type, table: Any) -> Any:
    if not isinstance(table, dict):
        raise CycleConfigError(f"{path}: {name}: must be a table ([{name}])")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    values = {}
    for key, value in table.items():
        if key not in known:
            raise CycleConfigError(f"{path}: {name}.{key}: unknown key (known: "
                                   f"{', '.join(sorted(known))})")
        try:
            values[key] = _check_type(key, value, hints[key])
        except SettingsError as error:
            raise config_error(path, error, name) from None
    try:
        return cls(**values)
    except SettingsError as error:
        raise config_error(path, error, name) from None


def load_config(path: str | Path) -> CycleConfig:
    """The cycle config in the TOML file ``path`` (see ``data/cycle.toml``)."""
    path = Path(path)
    try:
        with path.open("rb") as stream:
            data = tomllib.load(stream)
    except FileNotFoundError:
        raise CycleConfigError(f"{path}: no such file") from None
    except OSError as error:
        raise CycleConfigError(f"{path}: cannot read: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise CycleConfigError(f"{path}: not valid TOML: {error}") from None
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in _SECTIONS:
            values[key] = _section(path, key, _SECTIONS[key].default.__class__, value)
        elif key == "directory":
            if not isinstance(value, str) or not value.strip():
                raise CycleConfigError(f"{path}: directory: must be a folder name (a string)")
            values[key] = Path(os.path.normpath(path.parent / value))
        elif key == "seed":
            if not isinstance(value, int) or isinstance(value, bool):
                raise CycleConfigError(f"{path}: seed: must be an integer, not {value!r}")
            values[key] = value
        else:
            raise CycleConfigError(f"{path}: {key}: unknown key (known: directory, seed, "
                                   f"{', '.join(_SECTIONS)})")
    if "directory" not in values:
        raise CycleConfigError(f"{path}: directory: missing (the folder of the generations, "
                               "relative to the config file)")
    return CycleConfig(source=path, **values)
