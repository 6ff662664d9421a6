"""``bookgen match``: engine matches from an openings file, with the rules enforced by the runner.

:func:`run_match` plays the players on the openings under a
:class:`MatchSettings` (the format and length, the clock and the rules every
game is played under, concurrency, extra outputs, an SPRT that may stop it).
Each opening is played twice with colours swapped (see
:mod:`bookgen.analysis.schedule`). The runner, not the engines, decides how a game
ends (:mod:`bookgen.play.rules`): an illegal move or a false declaration loses,
a side whose clock runs more than ``margin`` below zero loses on time
(:meth:`TimeControl.spend <bookgen.play.clock.TimeControl.spend>`), fourfold repetition
is a draw unless one side checked on every move (that side loses),
a declaration that meets the 27-point rule wins, ``max_ply`` plies from the
initial position (opening moves included) draw, and with ``resign`` a side
whose own score stays at or below ``-resign`` for ``resign_moves`` moves
resigns. An engine that crashes or hangs loses the game ("engine failure",
or "time forfeit" under a clock) and is restarted for its next game.

Each player may play under its own control (``controls``: time or node odds)
and with its own ``go`` options (:attr:`PlayerSettings.go_options
<bookgen.engines.player_settings.PlayerSettings.go_options>`); with
``ponder`` the engines that declare ``USI_Ponder`` ponder. Every engine is
sent ``gameover`` at the end of each game. With ``transcripts`` every line
sent to and received from the engines is kept, one gzip file per game
(:mod:`bookgen.engines.usi.transcript`), for every game or only for failed
ones (``transcripts_on``; a failed game always keeps its transcript).

Every finished game is written to the results file at once (its own
transaction; see :mod:`bookgen.store.results`), and optionally appended to a
PGN file (sente as "White") and written as a CSA record
(:mod:`bookgen.formats.records`). Rerunning the same
command plays only the games the results file lacks. Each game in flight keeps a
small file in ``RESULTS.live/`` up to date, move by move, for ``bookgen serve``'s
live view (:mod:`bookgen.store.live_games`). Ctrl-C stops at once:
the games in flight are dropped (their engines killed), the match is marked
``interrupted``, and a rerun plays them.
"""

from __future__ import annotations

import atexit
import hashlib
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import cshogi

from bookgen.analysis.pairstats import SprtResult, SprtSettings, SprtTest, verdict_sentence
from bookgen.analysis.schedule import FORMATS, GameTask, match_key, schedule
from bookgen.engines.player_settings import BuiltinPlay, PlayerSettings
from bookgen.engines.players import close_players, open_player
from bookgen.engines.protocols import MoveChoice, Player
from bookgen.engines.restart import RestartPolicy, SearchLimits
from bookgen.engines.usi.transcript import Transcript
from bookgen.errors import BookgenError, SettingsError
from bookgen.files import make_folder, write_error
from bookgen.formats.positions import read_openings
from bookgen.formats.records import write_csa_record, write_pgn_game
from bookgen.play.clock import TimeControl
from bookgen.play.loop import GameRules, PlayedGame, play_game
from bookgen.play.rules import GameState, Reason, Result
from bookgen.position import InvalidMove, InvalidPosition, parse_position_spec
from bookgen.progress import progress_bar
from bookgen.signals import fault_point, stop_on_interrupt
from bookgen.store.live_games import LiveFolder, clear_stale, live_folder, remove_folder
from bookgen.store.results import GameResult, MoveRow, ResultsFile
from bookgen.workers.cluster import ClusterSettings, RayRunner, WorkerLost
from bookgen.workers.pool import BrokenProcessPool, LocalRunner, PoolRunner, TaskRunner
from bookgen.workers.runcontrol import collect_or_abandon

__all__ = ["FAILED_REASONS", "MATCH_BUILTIN", "TRANSCRIPTS_ON", "FinishedGame",
           "MatchSettings", "MatchSprt", "MatchSummary", "match_player", "move_rows",
           "parse_control", "parse_match_sprt", "play_task", "run_match"]

_FIELD, _mention = SettingsError.FIELD, SettingsError.mention

RESULT_NAMES = {Result.BLACK_WIN: "black", Result.WHITE_WIN: "white", Result.DRAW: "draw"}
# The built-in player's strength in a match (self-play's is depth 4, 40,000 nodes).
MATCH_BUILTIN = BuiltinPlay(depth=64, nodes=20_000)


TRANSCRIPTS_ON = ("all", "failure")
FAILED_REASONS = frozenset({Reason.ENGINE_FAILURE, Reason.TIME_FORFEIT, Reason.ILLEGAL_MOVE,
                            Reason.ILLEGAL_DECLARATION})
"""The endings of a failed game, whose transcript is always kept."""
CONTROL_KEYS = ("byoyomi", "time", "inc", "nodes")


def match_player(name: str, spec: str, options: tuple[tuple[str, str], ...] = (),
                 go_options: tuple[tuple[str, str], ...] = ()) -> PlayerSettings:
    """The match player ``name``: ``builtin`` (depth 64, 20,000 nodes unless
    ``options`` set ``depth``/``nodes``) or ``usi:COMMAND`` (``options``: its USI
    options; ``go_options``: ``KEY VALUE`` tokens added to its every ``go``). An
    engine failure loses the game, and the engine restarts before its next game."""
    return PlayerSettings.parse(spec, name=name, options=options, builtin=MATCH_BUILTIN,
                                restarts=RestartPolicy(on_failure="forfeit"),
                                go_options=go_options)


def parse_control(text: str, *, margin: int = 1000,
                  engine_timeout: float | None = None) -> TimeControl:
    """A time control from ``KEY=VALUE[,KEY=VALUE...]`` with keys ``byoyomi``, ``time``,
    ``inc`` (milliseconds) and ``nodes`` (``byoyomi=1000``, ``time=60000,inc=1000``,
    ``nodes=100000``); ``margin`` and ``engine_timeout`` as given. Checked as a
    match's control when the settings are made."""
    values: dict[str, int] = {}
    for part in text.split(","):
        key, eq, value = (x.strip() for x in part.partition("="))
        if not eq or key not in CONTROL_KEYS or not value.isdigit() or key in values:
            raise SettingsError("controls", f"bad {_FIELD} {text!r}: expected KEY=VALUE[,...] "
                                f"with keys {', '.join(CONTROL_KEYS)} (milliseconds, or "
                                "nodes), for example byoyomi=1000 or time=60000,inc=1000")
        values[key] = int(value)
    return TimeControl(**values, margin=margin, engine_timeout=engine_timeout)


@dataclass(frozen=True)
class MatchSettings:
    """What a match plays and how (see ``bookgen match --help``).

    ``format``: ``pairs``, ``round-robin`` or ``gauntlet``; ``games`` per
    pairing (even: whole colour-swapped pairs) or ``rounds``, every opening that
    many times per pairing (one of the two; neither: one round). ``seed``
    shuffles the openings (file order without it). Every game is played under
    ``control`` (the clock) and ``rules``; ``concurrency`` games at once (one
    worker process each, which gets these settings). Games are also appended to
    the PGN file ``pgn`` and written as CSA records in ``csa_dir`` when given.
    ``sprt`` ends the match when its GSPRT accepts a hypothesis. ``record_moves``
    writes every move's data (score, depth, nodes, time, PV, book or search) to
    the results file's ``moves`` table; it does not change the games played.
    """

    control: TimeControl = TimeControl(byoyomi=1000)
    rules: GameRules = GameRules()
    format: str = "pairs"
    games: int | None = None
    rounds: int | None = None
    concurrency: int = 1
    seed: int | None = None
    pgn: str | Path | None = None
    csa_dir: str | Path | None = None
    sprt: SprtTest | None = None
    cluster: ClusterSettings | None = None   # games in the actors of a Ray cluster
    controls: tuple[tuple[str, TimeControl], ...] = ()
    ponder: bool = False
    transcripts: str | Path | None = None
    transcripts_on: str = "all"
    record_moves: bool = True

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise SettingsError("format", f"unknown {_FIELD} {self.format!r} (choose from "
                                f"{', '.join(FORMATS)})")
        if self.games is not None and self.rounds is not None:
            raise SettingsError("games", f"{_FIELD} and {_mention('rounds')} exclude each other")
        if self.games is not None and (self.games < 2 or self.games % 2):
            raise SettingsError("games", "must be a positive even number (games come in "
                                f"colour-swapped pairs), got {self.games}")
        for name, value in (("rounds", self.rounds), ("concurrency", self.concurrency)):
            if value is not None and value < 1:
                raise SettingsError(name, "must be at least 1")
        _check_control(self.control)
        names = [name for name, _ in self.controls]
        for name, control in self.controls:
            if names.count(name) > 1:
                raise SettingsError("controls", f"{_FIELD}: two controls for {name!r}")
            try:
                _check_control(control)
            except SettingsError as error:
                text = error.naming(error.field.rpartition(".")[2],
                                    lambda field: field.rpartition(".")[2])
                raise SettingsError("controls", f"{_FIELD} {name}: {text}") from None
        if self.transcripts_on not in TRANSCRIPTS_ON:
            raise SettingsError("transcripts_on", f"must be {' or '.join(TRANSCRIPTS_ON)}, "
                                f"not {self.transcripts_on!r}")

    def control_for(self, name: str) -> TimeControl:
        """The control the player ``name`` plays under."""
        return dict(self.controls).get(name, self.control)


@dataclass
class FinishedGame:
    """A played game of a match: its task and the game (:class:`PlayedGame`)."""

    task: GameTask
    played: PlayedGame

    @property
    def result(self) -> str:
        """``black``, ``white`` or ``draw``."""
        return RESULT_NAMES[self.played.outcome.result]

    @property
    def game(self) -> GameResult:
        return GameResult(self.task.black, self.task.white, self.result,
                          str(self.played.outcome.reason), self.played.plies,
                          str(self.task.pair), self.task.opening, "")


# --------------------------------------------------------------------------
# SPRT


@dataclass(frozen=True)
class MatchSprt(SprtTest):
    """The GSPRT that can stop a match (:class:`SprtTest`), as ``--sprt`` gave it:
    ``named`` False when it did not name the engine under test (the first player)."""

    named: bool = True


def _sprt_state(test: SprtTest, games: Sequence[GameResult]) -> SprtResult | None:
    """The test's state on ``games``, None before any game between the two."""
    try:
        return test.run(games)
    except BookgenError:
        return None


def parse_match_sprt(text: str, players: Sequence[str], *, alpha: float = 0.05,
                     beta: float = 0.05, model: str = "normalized") -> MatchSprt:
    """``ENGINE:ELO0,ELO1`` (ENGINE is the engine under test) or ``ELO0,ELO1`` (the
    first player is; ``named`` False) for a match between exactly two ``players``.
    Errors are :class:`SettingsError` of ``sprt`` (the test's own settings:
    ``sprt.settings.alpha``, ...)."""
    if len(players) != 2:
        raise SettingsError("sprt", "needs exactly two players")
    name, sep, bounds = text.rpartition(":")
    try:
        elo0, elo1 = (float(x) for x in bounds.split(","))
    except ValueError:
        raise SettingsError("sprt", f"bad {_FIELD} {text!r}: expected ENGINE:ELO0,ELO1, the "
                            f"engine under test and its Elo bounds (for example "
                            f"{players[0]}:0,5)") from None
    if elo0 >= elo1:
        raise SettingsError("sprt", f"{_FIELD}: ELO0 must be below ELO1")
    try:
        settings = SprtSettings(elo0, elo1, alpha=alpha, beta=beta, model=model)
    except SettingsError as error:
        raise error.within("sprt.settings") from None
    if not sep:
        return MatchSprt(players[0], players[1], settings, named=False)
    name = name.strip()
    if name not in players:
        raise SettingsError("sprt", f"{_FIELD} {text!r}: no player named {name!r} (players: "
                            f"{', '.join(players)})")
    opponent = players[1] if name == players[0] else players[0]
    return MatchSprt(name, opponent, settings)


# --------------------------------------------------------------------------
# one game


def play_task(task: GameTask, players: dict[str, Player], settings: MatchSettings,
              live: LiveFolder | None = None, match_key: str = "") -> FinishedGame:
    """Play ``task`` between two players (by name) under the runner's rules
    (:func:`bookgen.play.loop.play_game`), each under its control. With ``live``,
    the game's live file there follows it move by move
    (:mod:`bookgen.store.live_games`); with ``settings.transcripts`` the game's
    USI transcript is written there (named after ``match_key`` and the task) when
    it is to be kept."""
    sides = {cshogi.BLACK: players[task.black], cshogi.WHITE: players[task.white]}
    controls = {cshogi.BLACK: settings.control_for(task.black),
                cshogi.WHITE: settings.control_for(task.white)}
    side_controls = controls if controls[cshogi.BLACK] != controls[cshogi.WHITE] else None
    transcript = None
    if settings.transcripts is not None:
        transcript = Transcript()
        transcript.note(f"bookgen match {match_key[:8]} game {task.key} pair {task.pair}: "
                        f"{task.black} (black) vs {task.white} (white) from {task.opening}")
        for colour, name in ((cshogi.BLACK, task.black), (cshogi.WHITE, task.white)):
            transcript.note(f"{name}: {controls[colour].describe()}")
        _attach(sides, transcript)
    on_decision: Callable[[GameState, MoveChoice], None] | None = None
    writer = None
    if live is not None:
        writer = live.writer(task.key, task.pair, task.round, task.opening_index, task.opening,
                             _start_sfen(task.opening), task.black, task.white)
        live_game = writer

        def on_decision(game: GameState, choice: MoveChoice) -> None:
            if not live_game.game.start_sfen:
                live_game.game.start_sfen = game.start_sfen
            live_game.move(choice.move or "", choice.score_cp)
            fault_point("match-live-move")

        writer.start()
    try:
        played = play_game(task.opening, sides, settings.rules, clock=controls[cshogi.BLACK],
                           side_controls=side_controls, on_decision=on_decision)
    except Exception as error:
        if transcript is not None:
            transcript.note(f"the game failed: {error}")
            _attach(sides, None)
            transcript.save(_transcript_path(settings, match_key, task))
        raise
    finally:
        if writer is not None:
            writer.end()
    if transcript is not None:
        _attach(sides, None)
        outcome = played.outcome
        if settings.transcripts_on == "all" or outcome.reason in FAILED_REASONS:
            transcript.note(f"result: {RESULT_NAMES[outcome.result]} ({outcome.reason}"
                            f"{': ' + outcome.detail if outcome.detail else ''})")
            transcript.save(_transcript_path(settings, match_key, task))
    return FinishedGame(task, played)


def _start_sfen(opening: str) -> str:
    """The sfen of an opening line ("": not a position; the game loop then says why)."""
    try:
        board, _moves = parse_position_spec(opening)
    except (InvalidPosition, InvalidMove):
        return ""
    return str(board.sfen())


def _attach(sides: Mapping[int, Player], transcript: Transcript | None) -> None:
    """Give the players that keep a transcript (USI engines) their sink, or none."""
    for player in sides.values():
        if hasattr(player, "transcript"):
            player.transcript = None if transcript is None else transcript.sink(player.name)


def _transcript_path(settings: MatchSettings, match_key: str, task: GameTask) -> Path:
    assert settings.transcripts is not None
    return Path(settings.transcripts) / _game_file(match_key, task, ".usi.gz")


# --------------------------------------------------------------------------
# running games: in this process, or in worker processes


class _Players:
    """Players by name, built when first needed."""

    def __init__(self, specs: dict[str, PlayerSettings]) -> None:
        self.specs = specs
        self.built: dict[str, Player] = {}

    def for_task(self, task: GameTask) -> dict[str, Player]:
        for name in (task.black, task.white):
            if name not in self.built:
                self.built[name] = open_player(self.specs[name])
        return self.built

    def close(self) -> None:
        close_players(self.built.values())
        self.built.clear()


_worker: tuple[_Players, MatchSettings, LiveFolder | None, str] | None = None


def _worker_init(specs: dict[str, PlayerSettings], settings: MatchSettings,
                 live: LiveFolder | None = None, match_key: str = "") -> None:
    global _worker
    players = _Players(specs)
    _worker = (players, settings, live, match_key)
    atexit.register(players.close)


def _worker_play(task: GameTask) -> FinishedGame:
    assert _worker is not None
    players, settings, live, match_key = _worker
    return play_task(task, players.for_task(task), settings, live, match_key)


# --------------------------------------------------------------------------
# the match


@dataclass
class MatchSummary:
    results: str
    match_id: int = 0
    scheduled: int = 0
    previously_played: int = 0
    played: int = 0
    points: dict[str, float] = field(default_factory=dict)
    games_by_player: dict[str, int] = field(default_factory=dict)
    results_by_colour: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    engine_seconds: float = 0.0
    game_seconds: float = 0.0
    interrupted: bool = False
    dropped: int = 0               # games in flight abandoned at Ctrl-C
    stopped_by: str | None = None
    sprt: dict[str, Any] | None = None   # the SPRT's last state (SprtResult.as_json())

    @property
    def overhead_per_game(self) -> float:
        """Seconds per game spent outside the engines' searches (inside the game loop)."""
        return (self.game_seconds - self.engine_seconds) / self.played if self.played else 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["overhead_per_game"] = round(self.overhead_per_game, 4)
        for key in ("seconds", "engine_seconds", "game_seconds"):
            data[key] = round(data[key], 3)
        return data


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _game_file(key: str, task: GameTask, suffix: str) -> str:
    """A game's file name: the match key, its pair, colour swap and players."""
    names = "-vs-".join(_UNSAFE.sub("_", n)[:40] for n in (task.black, task.white))
    return f"{key[:8]}-{task.pair:06d}-{int(task.swapped)}-{names}{suffix}"


def _csa_name(key: str, game: FinishedGame) -> str:
    return _game_file(key, game.task, ".csa")


def _open_pgn(path: Path) -> TextIO:
    if path.is_dir() or not path.parent.is_dir():
        raise BookgenError(f"{path}: cannot write a PGN file there")
    try:
        return open(path, "a", encoding="utf-8")
    except OSError as error:
        raise write_error(path, error) from None


def _check_player_specs(players: Sequence[PlayerSettings]) -> dict[str, PlayerSettings]:
    specs: dict[str, PlayerSettings] = {}
    for spec in players:
        name = spec.name or ""
        if not name or any(c in name for c in ":=\n\"\\"):
            raise BookgenError(f"bad player name {name!r} (no ':', '=', quotes or "
                               "backslashes)")
        if name in specs:
            raise BookgenError(f"two players are named {name!r}")
        specs[name] = spec
    return specs


def run_match(players: Sequence[PlayerSettings], openings: str | Path, results: str | Path,
              settings: MatchSettings | None = None, *,
              stop_when: Callable[[list[GameResult]], str | None] | None = None,
              progress: bool = True) -> MatchSummary:
    """Play a match of ``players`` on the start positions of ``openings`` under
    ``settings`` (None: the defaults) and record it in ``results``; see ``bookgen
    match --help``.

    ``stop_when`` is called with all games of the match after each game; a
    non-None answer (a reason) ends the match early. ``settings.sprt`` ends it
    when its GSPRT accepts a hypothesis; it is recorded with the match in the
    results file (``settings.sprt``, with its last state) and its last state is
    in the summary.
    """
    settings = settings if settings is not None else MatchSettings()
    control, rules, sprt = settings.control, settings.rules, settings.sprt
    seed, games, rounds = settings.seed, settings.games, settings.rounds
    specs = _check_player_specs(players)
    for name, _control in settings.controls:
        if name not in specs:
            raise SettingsError("controls", f"{_FIELD}: no player named {name!r} (players: "
                                f"{', '.join(specs)})")
    if sprt is not None:
        if {sprt.engine, sprt.opponent} != set(specs) or sprt.engine == sprt.opponent:
            raise SettingsError("sprt", f"{_FIELD}: {sprt.engine} vs {sprt.opponent} is not "
                                f"this match's pair ({', '.join(specs)})")
        stop_when = _sprt_stop(sprt, stop_when)

    lines = read_openings(openings)
    order = list(enumerate(lines))
    if seed is not None:
        random.Random(seed).shuffle(order)
    pairs_per_pairing = games // 2 if games is not None else len(lines) * (rounds or 1)
    tasks = schedule(list(specs), order, settings.format, pairs_per_pairing=pairs_per_pairing)
    key_settings: dict[str, Any] = {
        "players": [[name, str(s.spec), sorted(s.options), *_go_key(s)]
                    for name, s in specs.items()],
        "format": settings.format,
        "openings": hashlib.sha256("\n".join(lines).encode()).hexdigest(),
        "seed": seed, "control": _control_key(control), "max_ply": rules.max_ply,
        "resign": rules.resign_cp, "resign_moves": rules.resign_moves,
        "declaration_rule": rules.declaration_rule}
    # Only when used, so that the keys of matches without them stay as they were.
    if settings.controls:
        key_settings["controls"] = {name: _control_key(c) for name, c in settings.controls}
    if settings.ponder:
        key_settings["ponder"] = True
    key = match_key(key_settings)
    csa_path = Path(settings.csa_dir) if settings.csa_dir is not None else None
    if csa_path is not None:
        make_folder(csa_path)
    if settings.transcripts is not None:
        make_folder(Path(settings.transcripts))

    # A USI player searches by the game's clock; its limits here are its node control,
    # which gpsshogi aborts on (it then refuses to start).
    specs = {name: replace(spec, limits=SearchLimits(nodes=settings.control_for(name).nodes),
                           ponder=settings.ponder)
             for name, spec in specs.items()}
    # Start every player once here: bad commands and options fail before any game.
    identities: dict[str, tuple[str | None, str | None]] = {}
    for name, spec in specs.items():
        player = open_player(spec)
        try:
            identities[name] = (player.engine_name, player.engine_author)
            if settings.ponder and spec.spec.kind == "usi" and not getattr(player, "ponders",
                                                                           False):
                print(f"bookgen: player {name} plays without pondering (its engine declares "
                      "no USI_Ponder option)", file=sys.stderr, flush=True)
        finally:
            player.close()

    store = ResultsFile(results)
    summary = MatchSummary(str(results))
    pgn_file = _open_pgn(Path(settings.pgn)) if settings.pgn is not None else None
    status = "failed"
    try:
        match_id = store.begin_match(key, {**key_settings, "openings_file": str(openings)},
                                     len(tasks))
        summary.match_id = match_id
        if sprt is not None:
            store.set_match_sprt(match_id, sprt.as_json())
        for name, spec in specs.items():
            store.add_player(name, str(spec.spec), dict(spec.options), *identities[name])
        clear_stale(store.path)
        done = store.finished_keys(match_id)
        todo = [task for task in tasks if task.key not in done]
        summary.scheduled = len(tasks)
        summary.previously_played = len(tasks) - len(todo)
        match_games = store.games(match_id)
        status = _play(todo, specs, settings, store, match_id, key, summary, match_games,
                       pgn_file, csa_path, stop_when, progress)
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except BookgenError as error:
        if not summary.match_id:
            raise
        raise BookgenError(f"{error} (the {summary.played} games finished in this run are "
                           f"in {results}; rerun the same command to resume)") from None
    finally:
        if pgn_file is not None:
            try:
                pgn_file.close()
            except OSError:
                pass  # a failed write, already reported
        if summary.match_id:
            if sprt is not None:
                state = _sprt_state(sprt, store.games(summary.match_id))
                summary.sprt = state.as_json() if state is not None else None
                store.set_match_sprt(summary.match_id, {**sprt.as_json(),
                                                        "last": summary.sprt})
            store.end_match(summary.match_id, status)
        store.close()
        remove_folder(results)
    return summary


def _go_key(spec: PlayerSettings) -> list[Any]:
    """A player's go options in the match key (nothing without any: keys stay as they
    were)."""
    return [sorted(spec.go_options)] if spec.go_options else []


def _control_key(control: TimeControl) -> dict[str, Any]:
    """The time control as the match key has it. ``engine_timeout`` is only a
    guard; its default appears as the 60 s it was before it scaled with
    ``nodes``, so that matches begun then still resume."""
    key = asdict(control)
    if key["engine_timeout"] is None:
        key["engine_timeout"] = 60.0
    return key


def _sprt_stop(sprt: SprtTest, also: Callable[[list[GameResult]], str | None] | None
               ) -> Callable[[list[GameResult]], str | None]:
    def stop_when(games: list[GameResult]) -> str | None:
        if also is not None:
            reason = also(games)
            if reason is not None:
                return reason
        result = _sprt_state(sprt, games)
        if result is None or result.verdict is None:
            return None
        return f"SPRT for {sprt.engine} vs {sprt.opponent}: {verdict_sentence(result)}"

    return stop_when


def _check_control(control: TimeControl) -> None:
    """A match's clock, whose fields are ``control.*`` in :class:`MatchSettings`."""
    nodes, byoyomi = _mention("control.nodes"), _mention("control.byoyomi")
    time_, inc = _mention("control.time"), _mention("control.inc")
    if control.nodes is not None:
        if control.byoyomi or control.time or control.inc:
            raise SettingsError("control.nodes",
                                f"{_FIELD} excludes {byoyomi}, {time_} and {inc}")
        if control.nodes < 1:
            raise SettingsError("control.nodes", "must be at least 1")
        return
    if control.inc and control.byoyomi:
        raise SettingsError("control.inc", f"{_FIELD} and {byoyomi} exclude each other")
    if not (control.time or control.byoyomi):
        raise SettingsError("control", f"give a time control: {byoyomi} MS, {time_} MS "
                            f"[{inc} MS] or {nodes} N")
    for name in ("byoyomi", "time", "inc", "margin"):
        if (getattr(control, name) or 0) < 0:
            raise SettingsError(f"control.{name}", "must not be negative")


def _play(todo: list[GameTask], specs: dict[str, PlayerSettings], settings: MatchSettings,
          store: ResultsFile, match_id: int, key: str,
          summary: MatchSummary, match_games: list[GameResult], pgn_file: TextIO | None,
          csa_path: Path | None, stop_when: Callable[[list[GameResult]], str | None] | None,
          progress: bool) -> str:
    """Play ``todo``; return the match status."""
    points: defaultdict[str, float] = defaultdict(float)  # a Counter holds ints
    played: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    colours: Counter[str] = Counter()
    start = time.perf_counter()
    workers = min(settings.concurrency, max(1, len(todo)))
    runner: TaskRunner[GameTask, FinishedGame]
    live = LiveFolder(live_folder(store.path), match_id)
    if settings.cluster is not None:
        runner = RayRunner(settings.cluster, _worker_play, _worker_init,
                           (specs, settings, live, key), most=len(todo))
    elif workers == 1:
        players = _Players(specs)
        runner = LocalRunner(
            lambda task: play_task(task, players.for_task(task), settings, live, key),
            players.close)
    else:
        runner = PoolRunner(workers, _worker_play, _worker_init, (specs, settings, live, key))
    status = "failed"
    try:
        with stop_on_interrupt() as stop, progress_bar(
                total=len(todo), unit="game", desc="match",
                disable=None if progress else True) as bar:
            queue = list(reversed(todo))
            in_flight = 0
            while True:
                while not stop.is_set() and queue and in_flight < runner.capacity():
                    runner.submit(queue.pop())
                    in_flight += 1
                if in_flight == 0:
                    break
                try:
                    finished = collect_or_abandon(runner, stop)
                except WorkerLost as error:
                    raise BookgenError(f"a match worker died: {error}") from None
                except BrokenProcessPool:
                    raise BookgenError("a match worker process died") from None
                if finished is None:  # Ctrl-C: the games in flight are abandoned
                    summary.dropped = in_flight
                    break
                for game in finished:
                    in_flight -= 1
                    _record(game, store, match_id, key, pgn_file, csa_path, settings)
                    fault_point("match-game-recorded")
                    record = game.game
                    match_games.append(record)
                    summary.played += 1
                    summary.engine_seconds += game.played.engine_seconds
                    summary.game_seconds += game.played.wall_seconds
                    for name in (record.black, record.white):
                        points[name] += record.score_for(name)
                        played[name] += 1
                    reasons[record.reason] += 1
                    colours[record.result] += 1
                    bar.update(1)
                    bar.set_postfix_str(f"{_score_line(points, played)}, workers="
                                        f"{runner.live_workers()}", refresh=False)
                    if stop_when is not None and summary.stopped_by is None:
                        verdict = stop_when(match_games)
                        if verdict is not None:
                            summary.stopped_by = verdict
                            stop.set()
            if stop.interrupted and (queue or summary.dropped):
                status, summary.interrupted = "interrupted", True
            elif summary.stopped_by is not None:
                status = "stopped"
            else:
                status = "done"
    finally:
        if status == "failed" or summary.dropped:
            runner.terminate()
        else:
            runner.close()
        summary.seconds = time.perf_counter() - start
        summary.points = dict(points)
        summary.games_by_player = dict(played)
        summary.reasons = dict(reasons)
        summary.results_by_colour = dict(colours)
    return status


def _score_line(points: Mapping[str, float], played: Counter[str]) -> str:
    return ", ".join(f"{name} {points[name]:g}/{played[name]}" for name in sorted(played))


def move_rows(game: FinishedGame) -> list[MoveRow]:
    """The rows of ``game``'s moves for the results file's ``moves`` table: each
    move with its mover and what the mover said of it (a player that said
    nothing: its score only, as a search's)."""
    task, played = game.task, game.played
    names = (task.black, task.white)
    parts = played.start_sfen.split()
    first = 1 if len(parts) > 1 and parts[1] == "w" else 0
    records, times, scores = played.records, played.move_ms, played.scores
    rows: list[MoveRow] = []
    for i, move in enumerate(played.moves):
        record = records[i] if i < len(records) else None
        time_ms = times[i] if i < len(times) else None
        mover = names[(first + i) & 1]
        if record is None:
            score = scores[i] if i < len(scores) else None
            rows.append((i + 1, move, mover, "search", score, None, None, None, None, None,
                         time_ms, None))
        else:
            rows.append((i + 1, move, mover, record.source, record.cp, record.mate,
                         record.bound, record.depth, record.seldepth, record.nodes, time_ms,
                         " ".join(record.pv) or None))
    return rows


def _record(game: FinishedGame, store: ResultsFile, match_id: int, key: str,
            pgn_file: TextIO | None, csa_path: Path | None, settings: MatchSettings) -> None:
    task, played = game.task, game.played
    reason = str(played.outcome.reason)
    store.add_game(match_id, move_rows(game) if settings.record_moves else (), game_key=task.key,
                   round=task.round, pair=task.pair, opening_index=task.opening_index,
                   opening=task.opening,
                   start_sfen=played.start_sfen, black=task.black, white=task.white,
                   result=game.result, reason=reason, detail=played.outcome.detail,
                   plies=played.plies, moves=" ".join(played.moves), black_ms=played.black_ms,
                   white_ms=played.white_ms, started_at=played.started_at,
                   finished_at=played.finished_at)
    if pgn_file is not None:
        try:
            write_pgn_game(pgn_file, event=f"bookgen match {key[:8]}",
                           round_label=f"{task.pair + 1}.{int(task.swapped) + 1}",
                           black=task.black, white=task.white, result=game.result,
                           reason=reason, start_sfen=played.start_sfen, moves=played.moves,
                           pair=f"{key[:8]}:{task.pair}", tags=_control_tags(task, settings))
            pgn_file.flush()
        except OSError as error:
            raise write_error(pgn_file.name, error, "the games before the last one are "
                              "kept in it") from None
    if csa_path is not None:
        write_csa_record(csa_path / _csa_name(key, game), start_sfen=played.start_sfen,
                         names=(task.black, task.white), moves=played.moves,
                         scores=played.scores, outcome=played.outcome,
                         comment=f"bookgen match {key[:8]} pair {task.pair} opening "
                                 f"{task.opening_index}: {game.result} ({reason})",
                         side_controls=_side_controls(task, settings))


def _side_controls(task: GameTask, settings: MatchSettings) -> tuple[str, str] | None:
    """Black's and white's control, described, when the players have their own
    (for the CSA record's comments); None otherwise."""
    if not settings.controls:
        return None
    return (settings.control_for(task.black).describe(),
            settings.control_for(task.white).describe())


def _control_tags(task: GameTask, settings: MatchSettings) -> list[tuple[str, str]]:
    """PGN tags of each side's control when the players have their own (sente as
    "White", as cutechess names them); none otherwise."""
    if not settings.controls:
        return []
    return [("WhiteTimeControl", settings.control_for(task.black).describe()),
            ("BlackTimeControl", settings.control_for(task.white).describe())]
