"""``bookgen selfplay``: games from start positions, written as dlshogi training data.

:func:`selfplay` takes the starts file, the output file and a
:class:`SelfplaySettings` (the players, :class:`bookgen.play.loop.GameRules`,
the outputs, games, workers, seed) and returns a
:class:`SelfplaySummary`. Each game starts at a start position drawn
uniformly at random from the starts file (dlshogi's self-play roots):
``startpos moves ...`` / ``sfen ...`` lines, or a ``.hcp`` file of
``cshogi.HuffmanCodedPos`` records
(:func:`bookgen.formats.positions.read_starts`). A player is named by a
player spec (:mod:`bookgen.engines.players`; :func:`selfplay_player` makes its
settings):

- ``mcts:EVALUATOR`` (the default, ``mcts:builtin``; a bare ``torch:PATH``,
  ``onnx:PATH`` or ``blend:BOOK:INNER`` means the same): MCTS over that
  evaluator with ``playouts`` playouts and dlshogi's random opening moves
  (:class:`bookgen.engines.mcts_player.MctsPlayer`;
  :class:`bookgen.engines.player_settings.RandomOpening`);
- ``usi:COMMAND``: a USI engine with its own search (``go nodes`` /
  ``byoyomi`` / ``movetime``); ``bestmove resign`` and ``bestmove win`` are
  resignation and declaration; a crash or hang restarts it and searches
  again, up to 3 times;
- ``alphabeta``: the built-in alpha-beta search, at depth 4 and 40,000
  nodes. It is a deprecated name of ``builtin``, which self-play refuses
  for one release: ``builtin`` used to mean ``mcts:builtin`` here, and now
  means the alpha-beta player everywhere, so games do not change silently.

Games end by :mod:`bookgen.play.rules` (checkmate, fourfold repetition,
perpetual check, declaration, maximum ply, illegal moves, resignation and
score adjudication).

Training records (``cshogi.HuffmanCodedPosAndEval``, 38 bytes, dlshogi's
hcpe): one per position where a player chose a move, in game order:
``hcp`` the position; ``eval`` the player's value of it in centipawns for
the side to move (MCTS: the most visited move's win rate converted with
756; engines: their score, mates as +-30000 minus the distance; 0 when the
engine gave none), clipped to +-30000; ``bestMove16`` the player's best
move (the most visited move, also when a different move was sampled); and
``gameResult`` the game's result, independent of the side to move
(``DRAW`` 0, ``BLACK_WIN`` 1, ``WHITE_WIN`` 2): dlshogi's convention, where
the trainer turns it into the side to move's target. Games shorter than
``output.min_ply`` plies give no records and their roots go to
``output.out_min`` as hcp records (dlshogi ``--min_move`` and
``--out_min_hcp``).

A worker may play several games at once (``parallel_games`` K, one
``mcts:`` player on both sides): the games run interleaved in one thread
(:func:`bookgen.play.loop.playing_game`, the game loop as a resumable game)
and their searches' leaves go to the player's evaluator together, in
batches of up to the player's ``batch_size``
(:class:`bookgen.engines.batching.SearchBatcher`; a worker's task holds
:data:`GROUPS_PER_TASK` times K games, the next one started as one ends),
each search gathering
``batch_size / K`` leaves (:func:`bookgen.engines.batching.search_batch`,
as ``grow --parallel-searches``). The games, and so the records, are those
of playing them one after another with that search batch.

Outputs are written to temporary files next to their targets and renamed at
the end, whole games at a time: an interrupted or failed run leaves the
targets as they were or with complete games only. CSA records (one file per
game, :func:`bookgen.formats.records.write_csa_record`) carry each move's score
as an ``'** N`` comment from black's point of view, the convention dlshogi's
``csa_to_hcpe.py`` reads back. Ctrl-C stops at once: the games written so far
are kept, the games in flight dropped.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import cshogi
import numpy as np

from bookgen.engines.batching import BatchStats, SearchBatcher, search_batch
from bookgen.engines.factory import default_batch_size
from bookgen.engines.mcts import SearchSteps
from bookgen.engines.player_settings import MctsPlay, PlayerSettings, RandomOpening
from bookgen.engines.players import close_players, open_player
from bookgen.engines.protocols import EvaluatorError, MoveChoice, Player
from bookgen.engines.restart import SearchLimits
from bookgen.engines.spec import EngineSpec, parse_spec
from bookgen.errors import BookgenError, SettingsError, at_least
from bookgen.files import AtomicFile, check_output, make_folder
from bookgen.formats.positions import read_starts
from bookgen.formats.records import write_csa_record
from bookgen.play.loop import GameRules, PlayedGame, playing_game
from bookgen.play.rules import GameState, Outcome, Result
from bookgen.progress import progress_bar
from bookgen.signals import stop_on_interrupt
from bookgen.values import clip_score
from bookgen.workers.cluster import ClusterSettings, RayRunner, WorkerLost
from bookgen.workers.pool import (
    BrokenProcessPool,
    GroupedRunner,
    LocalRunner,
    PoolRunner,
    TaskRunner,
)
from bookgen.workers.runcontrol import collect_or_abandon

__all__ = ["GameRecord", "SelfplayOutput", "SelfplayPlayers",
           "SelfplaySettings", "SelfplaySummary", "play_from_starts", "play_games",
           "player_spec", "playing_from_starts", "selfplay", "selfplay_player"]

if TYPE_CHECKING:
    from bookgen.engines.mcts_player import MctsPlayer

HCPE = cshogi.HuffmanCodedPosAndEval
HCP = cshogi.HuffmanCodedPos
ALPHABETA = "alphabeta"
BUILTIN_REFUSED = ("builtin now means the alpha-beta player everywhere; use mcts:builtin "
                   "(the old meaning)")


# --------------------------------------------------------------------------
# players


def player_spec(text: str) -> EngineSpec:
    """The player a self-play spec names (see the module docstring): ``builtin`` is
    refused, ``alphabeta`` warns on stderr and means ``builtin``."""
    if text == "builtin":
        raise BookgenError(BUILTIN_REFUSED)
    if text == ALPHABETA:
        print("bookgen: warning: 'alphabeta' is deprecated: the alpha-beta player is "
              "'builtin' everywhere (self-play refuses 'builtin' for one release, as it "
              "meant mcts:builtin)", file=sys.stderr)
        text = "builtin"
    return parse_spec(text, role="player")


def selfplay_player(spec: str | EngineSpec, *, options: tuple[tuple[str, str], ...] = (),
                    playouts: int = 100, batch_size: int | None = None,
                    evaluator_options: Mapping[str, Any] | None = None,
                    opening: RandomOpening | None = None,
                    limits: SearchLimits | None = None,
                    engine_timeout_s: float | None = None) -> PlayerSettings:
    """A self-play player: ``spec`` (text: read by :func:`player_spec`) with a USI
    engine's ``options``, ``limits`` and ``engine_timeout_s``, and an MCTS player's
    ``playouts``, ``batch_size`` (None: its evaluator's default on the device of
    ``evaluator_options``, :func:`bookgen.engines.factory.default_batch_size`),
    ``evaluator_options`` and
    random ``opening`` moves (None: dlshogi's defaults)."""
    if isinstance(spec, str):
        spec = player_spec(spec)
    if batch_size is None:
        batch_size = (default_batch_size(spec.evaluator, evaluator_options)
                      if spec.kind == "mcts" else 1)
    if spec.kind == "mcts" and spec.evaluator.base.is_network and batch_size > 1:
        # the network's batch: the search's (its own default may be smaller)
        evaluator_options = {"batch_size": batch_size, **(evaluator_options or {})}
    return PlayerSettings(
        spec, options=tuple(options),
        mcts=MctsPlay(playouts=playouts, batch_size=batch_size,
                      opening=opening if opening is not None else RandomOpening(),
                      evaluator_options=tuple(sorted((evaluator_options or {}).items()))),
        limits=limits if limits is not None else SearchLimits(),
        engine_timeout_s=engine_timeout_s)


def open_players(black: PlayerSettings, white: PlayerSettings) -> dict[int, Player]:
    """Players by colour; one instance when both sides use the same settings."""
    first = open_player(black)
    if white == black:
        return {cshogi.BLACK: first, cshogi.WHITE: first}
    try:
        second = open_player(white)
    except BaseException:
        first.close()
        raise
    return {cshogi.BLACK: first, cshogi.WHITE: second}


# --------------------------------------------------------------------------
# settings


def _usi_fields_given(player: PlayerSettings) -> list[str]:
    """The fields of ``player`` given that only a USI engine takes."""
    limits = player.limits
    return [name for name, value in (
        ("options", player.options), ("limits.nodes", limits.nodes),
        ("limits.byoyomi_ms", limits.byoyomi_ms), ("limits.movetime_ms", limits.movetime_ms),
        ("engine_timeout_s", player.engine_timeout_s)) if value]


def _default_player() -> PlayerSettings:
    return selfplay_player("mcts:builtin")


@dataclass(frozen=True)
class SelfplayPlayers:
    """Who plays black and who plays white (:func:`selfplay_player` makes them;
    :meth:`both` one player for both sides). Engine options, go limits and an
    engine timeout need a ``usi:`` player on at least one side."""

    black: PlayerSettings = field(default_factory=_default_player)
    white: PlayerSettings = field(default_factory=_default_player)

    @classmethod
    def both(cls, player: PlayerSettings) -> SelfplayPlayers:
        """``player`` on both sides."""
        return cls(player, player)

    def __post_init__(self) -> None:
        for side in ("black", "white"):
            player: PlayerSettings = getattr(self, side)
            at_least(f"players.{side}.mcts.playouts", player.mcts.playouts, 1)
            at_least(f"players.{side}.mcts.batch_size", player.mcts.batch_size, 1)
        if self.black.spec.is_usi or self.white.spec.is_usi:
            return
        for side in ("black", "white"):
            given = _usi_fields_given(getattr(self, side))
            if given:
                nodes, byoyomi, movetime, timeout = (
                    SettingsError.mention(f"players.{side}.{name}") for name in (
                        "limits.nodes", "limits.byoyomi_ms", "limits.movetime_ms",
                        "engine_timeout_s"))
                raise SettingsError(f"players.{side}.{given[0]}",
                                    f"engine options, {nodes}, {byoyomi}, {movetime} and "
                                    f"{timeout} apply to usi: players only")

    def for_workers(self, workers: int, parallel_games: int = 1
                    ) -> tuple[PlayerSettings, PlayerSettings]:
        """Black's and white's settings in each of ``workers`` processes: with an MCTS
        player over a network among them, each evaluator takes its share of the cores
        (``threads``) instead of all of them. With ``parallel_games`` K above 1 the
        (one) MCTS player searches with ``batch_size / K`` leaves
        (:func:`bookgen.engines.batching.search_batch`) and its network evaluates
        batches of up to ``batch_size`` (the batches of the K games together)."""
        players = (self.black, self.white)
        if parallel_games > 1:
            play = self.black.mcts
            per_search = replace(play, batch_size=search_batch(play.batch_size, parallel_games))
            if self.black.spec.evaluator.is_network:
                options = dict(play.evaluator_options)
                options.setdefault("batch_size", play.batch_size)
                per_search = replace(per_search,
                                     evaluator_options=tuple(sorted(options.items())))
            player = replace(self.black, mcts=per_search)
            players = (player, player)
        if workers == 1 or not any(p.spec.kind == "mcts" and p.spec.evaluator.is_network
                                   for p in players):
            return players
        threads = max(1, (os.cpu_count() or 1) // workers)

        def shared(player: PlayerSettings) -> PlayerSettings:
            options = dict(player.mcts.evaluator_options)
            options.setdefault("threads", threads)
            return replace(player, mcts=replace(
                player.mcts, evaluator_options=tuple(sorted(options.items()))))
        return shared(players[0]), shared(players[1])


@dataclass(frozen=True)
class SelfplayOutput:
    """What a run writes besides the hcpe file: a CSA record per game in ``csa_dir``;
    games shorter than ``min_ply`` plies give no records, and their start positions
    go to ``out_min`` as hcp records. Existing outputs are refused unless the run
    may ``append`` to them or ``replace`` them."""

    csa_dir: Path | None = None
    out_min: Path | None = None
    min_ply: int = 0
    append: bool = False
    replace: bool = False

    def __post_init__(self) -> None:
        for name in ("csa_dir", "out_min"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, Path(getattr(self, name)))
        at_least("output.min_ply", self.min_ply, 0)
        if self.out_min is not None and self.min_ply == 0:
            raise SettingsError("output.out_min",
                                f"{SettingsError.FIELD} needs "
                                f"{SettingsError.mention('output.min_ply')} (games shorter "
                                "than it are collected)")
        if self.append and self.replace:
            raise SettingsError("output.append",
                                f"{SettingsError.FIELD} and "
                                f"{SettingsError.mention('output.replace')} exclude each other")


@dataclass(frozen=True)
class SelfplaySettings:
    """Everything a self-play run does (see the module docstring and ``bookgen selfplay
    --help``): ``games`` games between ``players`` (MCTS players open with their
    random moves) under ``rules``, written as ``output`` says, by ``workers``
    processes; start positions and sampled moves depend only on ``seed`` and the
    game's number. ``parallel_games``: games each worker plays at once, their
    searches' leaves evaluated together (one ``mcts:`` player on both sides;
    see the module docstring)."""

    games: int
    players: SelfplayPlayers = field(default_factory=SelfplayPlayers)
    rules: GameRules = field(default_factory=GameRules)
    output: SelfplayOutput = field(default_factory=SelfplayOutput)
    workers: int = 1
    seed: int = 0
    cluster: ClusterSettings | None = None   # games in the actors of a Ray cluster
    parallel_games: int = 1

    def __post_init__(self) -> None:
        at_least("games", self.games, 1)
        at_least("workers", self.workers, 1)
        at_least("parallel_games", self.parallel_games, 1)
        players = self.players
        if self.parallel_games > 1 and (players.black != players.white
                                        or players.black.spec.kind != "mcts"):
            raise SettingsError("parallel_games", "needs one mcts: player on both sides (its "
                                "evaluator serves the games together); with other players "
                                "use workers")


# --------------------------------------------------------------------------
# one game


@dataclass(frozen=True)
class GameSettings:
    """What the games of a worker share: the rules, the seed, and, for games
    played together, the evaluator batch of their leaves (None: one game at a
    time, each player evaluating its own leaves)."""

    rules: GameRules = GameRules()
    seed: int = 0
    batch_size: int | None = None
    parallel_games: int | None = None   # games played at once (None: all given)


class _Records:
    """A game's training records, taken as the game loop sees each decision: one per
    position whose chosen best move is legal (see the module docstring)."""

    def __init__(self, size: int) -> None:
        self.records = np.zeros(size, HCPE)
        self.count = 0

    def __call__(self, game: GameState, choice: MoveChoice) -> None:
        best = game.legal_move(choice.best) if choice.best else None
        if best is None:
            return
        if self.count == len(self.records):
            self.records = np.concatenate([self.records, np.zeros(len(self.records), HCPE)])
        game.board.to_hcp(self.records["hcp"][self.count])
        self.records["eval"][self.count] = clip_score(choice.score_cp)
        self.records["bestMove16"][self.count] = cshogi.move16(best)
        self.count += 1

    def finish(self, outcome: Outcome) -> np.ndarray:
        """The records, with the game's result."""
        records = self.records[:self.count].copy()
        records["gameResult"] = int(outcome.result)
        return records


@dataclass
class GameRecord:
    """A finished game: where it started, the game and its training records."""

    index: int
    root_index: int
    root_hcp: bytes
    game: PlayedGame
    records: np.ndarray           # hcpe, gameResult filled in
    # Games played together: what their evaluator was sent (all on the group's first game).
    batch_stats: BatchStats | None = None

    @property
    def plies(self) -> int:
        return self.game.plies

    @property
    def outcome(self) -> Outcome:
        return self.game.outcome


def playing_from_starts(index: int, starts: np.ndarray, players: Mapping[int, Player],
                        settings: GameSettings, searching: bool = False
                        ) -> SearchSteps[GameRecord]:
    """Game number ``index`` from a start drawn from ``starts``, as a resumable game
    (:func:`bookgen.play.loop.playing_game`; ``searching``: its MCTS players yield
    their leaves); its start and random choices depend only on the seed and ``index``."""
    rng = np.random.default_rng([settings.seed, index])
    root_index = int(rng.integers(len(starts)))
    board = cshogi.Board()
    board.set_hcp(starts[root_index]["hcp"])   # move number 1: max ply counts from here
    records = _Records(min(settings.rules.max_ply, 1024))
    game = yield from playing_game(board, players, settings.rules, rng=rng,
                                   on_decision=records, searching=searching)
    return GameRecord(index, root_index, starts[root_index]["hcp"].tobytes(), game,
                      records.finish(game.outcome))


def play_from_starts(index: int, starts: np.ndarray, players: Mapping[int, Player],
                     settings: GameSettings) -> GameRecord:
    """Play game number ``index`` (:func:`play_games` of one)."""
    return play_games([index], starts, players, settings)[0]


def play_games(indices: Sequence[int], starts: np.ndarray, players: Mapping[int, Player],
               settings: GameSettings) -> list[GameRecord]:
    """Play the games numbered ``indices`` (:func:`playing_from_starts`): one after
    another, or, with ``settings.batch_size``, together (``settings.parallel_games``
    at a time, the next started as one ends), the leaves of their (one) MCTS
    player's searches evaluated in shared batches of up to that size
    (:class:`bookgen.engines.batching.SearchBatcher`; its ``batch_stats`` on the
    first record)."""
    if settings.batch_size is None:
        played = []
        for index in indices:
            steps = playing_from_starts(index, starts, players, settings)
            try:
                next(steps)
            except StopIteration as stop:
                played.append(stop.value)
                continue
            raise AssertionError("a game played without searching yields no leaves")
        return played
    evaluator = cast("MctsPlayer", players[cshogi.BLACK]).evaluator
    batcher: SearchBatcher[GameRecord] = SearchBatcher(evaluator, settings.batch_size)
    records = batcher.run([playing_from_starts(index, starts, players, settings, True)
                           for index in indices], settings.parallel_games)
    if records:
        records[0].batch_stats = batcher.stats
    return records


# --------------------------------------------------------------------------
# CSA


def write_csa(path: Path, record: GameRecord, comment: str = "") -> None:
    """Write ``record``'s game as a CSA record (see :func:`write_csa_record`)."""
    game = record.game
    write_csa_record(path, start_sfen=game.start_sfen, names=game.names, moves=game.moves,
                     scores=game.scores, outcome=game.outcome, comment=comment)


# --------------------------------------------------------------------------
# outputs


def _check_target(path: Path, output: SelfplayOutput, what: str) -> None:
    check_output(path)
    if path.exists() and not (output.replace or output.append):
        raise SettingsError("output.replace", f"{path}: {what} already exists (use "
                                              f"{SettingsError.mention('output.append')} to "
                                              f"add to it or {SettingsError.FIELD} to "
                                              "replace it)")


# --------------------------------------------------------------------------
# the run


@dataclass
class GameInfo:
    index: int
    root_index: int
    plies: int
    result: int
    reason: str
    records: int
    csa: str | None = None


@dataclass
class SelfplaySummary:
    output: str
    games: int = 0
    positions: int = 0
    black_wins: int = 0
    white_wins: int = 0
    draws: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    short_games: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    dropped: int = 0              # games in flight abandoned at Ctrl-C
    game_infos: list[GameInfo] = field(default_factory=list)
    # Games played together (parallel_games): what their evaluators were sent.
    network: BatchStats = field(default_factory=BatchStats)
    workers: int = 1

    @property
    def outside_evaluator_share(self) -> float:
        """The share of the workers' time spent outside the evaluator (games played
        together only: their batcher times the evaluator)."""
        busy = self.seconds * self.workers
        return max(0.0, 1 - self.network.seconds / busy) if busy else 0.0

    @property
    def positions_per_second(self) -> float:
        return self.positions / self.seconds if self.seconds else 0.0

    @property
    def mean_plies(self) -> float:
        return (sum(g.plies for g in self.game_infos) / len(self.game_infos)
                if self.game_infos else 0.0)

    def as_dict(self, games: bool = False) -> dict[str, Any]:
        data = {"output": self.output, "games": self.games, "positions": self.positions,
                "black_wins": self.black_wins, "white_wins": self.white_wins,
                "draws": self.draws, "reasons": dict(self.reasons),
                "mean_plies": round(self.mean_plies, 2), "short_games": self.short_games,
                "seconds": round(self.seconds, 3),
                "positions_per_second": round(self.positions_per_second, 2),
                "interrupted": self.interrupted, "dropped": self.dropped}
        if self.network.calls:
            data.update(network_batches=self.network.calls,
                        mean_batch=round(self.network.mean_batch, 2),
                        outside_evaluator_share=round(self.outside_evaluator_share, 4))
        if games:
            data["game_list"] = [vars(g) for g in self.game_infos]
        return data


_worker_players: dict[int, Player] = {}
_worker_starts: np.ndarray | None = None
_worker_settings: GameSettings | None = None


def _worker_init(black: PlayerSettings, white: PlayerSettings, starts: np.ndarray,
                 settings: GameSettings) -> None:
    global _worker_starts, _worker_settings
    _worker_starts, _worker_settings = starts, settings
    _worker_players.update(open_players(black, white))
    atexit.register(lambda: close_players(_worker_players.values()))


def _worker_play(index: int) -> GameRecord:
    assert _worker_starts is not None and _worker_settings is not None
    return play_from_starts(index, _worker_starts, _worker_players, _worker_settings)


def _worker_play_games(indices: list[int]) -> list[GameRecord]:
    assert _worker_starts is not None and _worker_settings is not None
    return play_games(indices, _worker_starts, _worker_players, _worker_settings)


def selfplay(starts: str | Path, output: str | Path, settings: SelfplaySettings, *,
             progress: bool = True) -> SelfplaySummary:
    """Play ``settings.games`` games from random start positions of ``starts``; write
    their records to ``output`` (see the module docstring and :class:`SelfplaySettings`).
    """
    games, written = settings.games, settings.output
    output = Path(output)
    _check_target(output, written, "output")
    if written.out_min is not None:
        _check_target(written.out_min, written,
                      f"{SettingsError.mention('output.out_min')} file")
    start_records = read_starts(starts)
    csa_path = written.csa_dir
    if csa_path is not None:
        make_folder(csa_path)
    parallel = settings.parallel_games
    black_config, white_config = settings.players.for_workers(
        settings.workers if settings.cluster is None else 1, parallel)
    game_settings = GameSettings(settings.rules, settings.seed,
                                 settings.players.black.mcts.batch_size if parallel > 1 else None,
                                 parallel)
    workers = settings.workers

    summary = SelfplaySummary(str(output), workers=workers if settings.cluster is None else 1)
    reasons: Counter[str] = Counter()
    start = time.perf_counter()
    runner: TaskRunner[int, GameRecord]
    try:
        if parallel > 1:
            runner = _grouped_runner(settings, black_config, start_records, game_settings)
        elif settings.cluster is not None:
            # (the workers start the players: the driver may not have the engine)
            runner = RayRunner(settings.cluster, _worker_play, _worker_init,
                               (black_config, white_config, start_records, game_settings),
                               most=games)
        elif workers == 1:
            players = open_players(black_config, white_config)
            runner = LocalRunner(
                lambda index: play_from_starts(index, start_records, players,
                                               game_settings),
                lambda: close_players(players.values()))
        else:
            # Fail on a bad player here, not as a broken pool in the workers.
            close_players(open_players(black_config, white_config).values())
            runner = PoolRunner(workers, _worker_play, _worker_init,
                                (black_config, white_config, start_records,
                                 game_settings))
    except EvaluatorError as error:
        raise BookgenError(str(error)) from None
    hcpe_file = AtomicFile(output, written.append)
    min_file = (AtomicFile(written.out_min, written.append) if written.out_min is not None
                else None)
    committed = False
    failure: BookgenError | None = None
    try:
        with stop_on_interrupt() as stop, progress_bar(
                total=games, unit="game", desc="selfplay",
                disable=None if progress else True) as bar:
            next_index = 0       # next game to start
            next_write = 0       # games are written in index order
            finished: dict[int, GameRecord] = {}
            in_flight = 0
            while True:
                while (not stop.is_set() and next_index < games
                       and in_flight < runner.capacity()):
                    runner.submit(next_index)
                    next_index += 1
                    in_flight += 1
                if in_flight == 0:
                    break
                try:
                    done = collect_or_abandon(runner, stop)
                except WorkerLost as error:
                    failure = BookgenError(f"a self-play worker died: {error}")
                    break
                except BrokenProcessPool:
                    failure = BookgenError("a self-play worker process died")
                    break
                except BookgenError as error:  # an engine that failed for good
                    failure = BookgenError(str(error))
                    break
                if done is None:  # Ctrl-C: games not yet written in order are lost too
                    summary.dropped = in_flight + len(finished)
                    break
                for record in done:
                    in_flight -= 1
                    finished[record.index] = record
                while next_write in finished:
                    record = finished.pop(next_write)
                    next_write += 1
                    _write_game(record, summary, reasons, hcpe_file, min_file, csa_path,
                                written.min_ply, settings.seed)
                    bar.update(1)
                    bar.set_postfix(pos=summary.positions, b=summary.black_wins,
                                    w=summary.white_wins, d=summary.draws,
                                    workers=runner.live_workers(), refresh=False)
            summary.interrupted = stop.is_set() and summary.games < games
        summary.seconds = time.perf_counter() - start
        summary.reasons = dict(reasons)
        hcpe_file.commit()
        if min_file is not None:
            min_file.commit()
        committed = True
    finally:
        if failure is not None or not committed:
            runner.terminate()  # do not wait for the other workers' games
        else:
            runner.close()
        if not committed:
            hcpe_file.discard()
            if min_file is not None:
                min_file.discard()
    if failure is not None:
        raise BookgenError(f"{failure} (the {summary.games} games finished before are in "
                           f"{output})")
    return summary


GROUPS_PER_TASK = 4
"""A worker's task holds this many times ``parallel_games`` games: K run at
once, a new one started as one ends, so that the batches stay full until the
task's last games (games differ in length). Ctrl-C drops a task's games."""


def _grouped_runner(settings: SelfplaySettings, player: PlayerSettings, starts: np.ndarray,
                    game_settings: GameSettings) -> TaskRunner[int, GameRecord]:
    """A runner of games in groups of :data:`GROUPS_PER_TASK` times
    ``settings.parallel_games``, each group played by one worker
    (:func:`play_games`), ``parallel_games`` at a time."""
    parallel = settings.parallel_games
    groups: TaskRunner[list[int], list[GameRecord]]
    if settings.cluster is not None:
        groups = RayRunner(settings.cluster, _worker_play_games, _worker_init,
                           (player, player, starts, game_settings),
                           most=-(-settings.games // (parallel * GROUPS_PER_TASK)))
    elif settings.workers == 1:
        players = open_players(player, player)
        groups = LocalRunner(lambda indices: play_games(indices, starts, players,
                                                        game_settings),
                             lambda: close_players(players.values()))
    else:
        close_players(open_players(player, player).values())
        groups = PoolRunner(settings.workers, _worker_play_games, _worker_init,
                            (player, player, starts, game_settings))
    return GroupedRunner(groups, parallel * GROUPS_PER_TASK)


def _write_game(record: GameRecord, summary: SelfplaySummary, reasons: Counter[str],
                hcpe_file: AtomicFile, min_file: AtomicFile | None, csa_path: Path | None,
                min_ply: int, seed: int) -> None:
    short = record.plies < min_ply
    written = 0 if short else len(record.records)
    if not short:
        hcpe_file.write(record.records.tobytes())
    elif min_file is not None:
        min_file.write(record.root_hcp)
    csa_name = None
    if csa_path is not None:
        target = csa_path / f"selfplay-{seed}-{record.index:06d}.csa"
        write_csa(target, record, comment=f"bookgen selfplay game {record.index} (seed {seed}, "
                                          f"start {record.root_index}): {record.outcome}")
        csa_name = str(target)
    summary.games += 1
    if record.batch_stats is not None:
        summary.network.calls += record.batch_stats.calls
        summary.network.boards += record.batch_stats.boards
        summary.network.seconds += record.batch_stats.seconds
    summary.positions += written
    summary.short_games += short
    result = record.outcome.result
    summary.black_wins += result is Result.BLACK_WIN
    summary.white_wins += result is Result.WHITE_WIN
    summary.draws += result is Result.DRAW
    reasons[str(record.outcome.reason)] += 1
    summary.game_infos.append(GameInfo(record.index, record.root_index, record.plies,
                                       int(result), str(record.outcome.reason), written,
                                       csa_name))
