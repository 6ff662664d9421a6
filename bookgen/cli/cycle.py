"""``bookgen cycle``: the book inside the reinforcement-learning loop, one resumable command.

A generation (:mod:`bookgen.cycle.generations`) runs these stages, each a
call of a stage's library function with settings built from the config
(:mod:`bookgen.cycle.config`): ``network`` (the generation's network,
``input.pt``: generation 0's start, else the best network so far), ``grow``
(:func:`bookgen.grow.grow` on a copy of the previous generation's book,
``grown.sqlite``), ``search`` (:func:`bookgen.refine.book_search.search` with
the refine engine, ``searched.sqlite``), ``mistakes``
(:func:`bookgen.refine.mistakes.mistakes`, ``book.sqlite``,
``mistakes.txt``/``.json`` and ``mistakes.hcpe``: the mistake positions with
the refine engine's score and move; ``held-out.hcpe``: the share of them that
are never self-play starts, on which training reports the value loss before
and after), ``starts`` (``starts.txt``), ``selfplay``
(:func:`bookgen.selfplay.games.selfplay`: ``games/*.hcpe`` and ``csa/``),
``train`` (:func:`bookgen.selfplay.train.train`, ``model.pt``), ``suite``
(:func:`bookgen.analysis.suites.make_suite`, ``suite.txt``), ``match``
(:func:`bookgen.analysis.match.run_match`, ``match.sqlite``: the promotion
test, and games against generation 0 and the refine engine) and ``summary``
(``generation.json``). The stages import one another only here, in the
command line.

A stage's outputs are written atomically before its done marker; a stage
without a marker starts again from its inputs, so kill -9 anywhere and a
rerun goes on with the first unfinished stage and gives what an
uninterrupted run gives wherever the stages are deterministic.
:func:`bookgen.signals.fault_point` ``cycle-stage`` (before a stage's marker)
and ``cycle-stage-done`` (after it) are the tests' kill points.
"""

from __future__ import annotations

import glob
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bookgen.cli.options import json_option, network_options
from bookgen.cli.support import echo_json, reports_errors
from bookgen.errors import BookgenError, SettingsError

if TYPE_CHECKING:
    from bookgen.cycle.config import CycleConfig
    from bookgen.cycle.generations import Generation
    from bookgen.engines.network.device import NetworkSettings
    from bookgen.engines.player_settings import PlayerSettings
    from bookgen.workers.cluster import ClusterSettings

INIT_NAME = "init"
"""The player name of generation 0's network in matches and reports."""


@dataclass
class CycleSummary:
    """What a ``bookgen cycle`` run did: per generation, the stages it ran and those
    it found done; :meth:`as_dict` is ``--json``."""

    directory: str
    generations: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Context:
    config: CycleConfig
    gen: Generation
    cluster: ClusterSettings | None
    network: NetworkSettings
    log: Callable[[str], None]

    def path(self, name: str) -> Path:
        return self.gen.file(name)

    @property
    def previous(self) -> Generation | None:
        from bookgen.cycle.generations import Generation

        return Generation(self.gen.directory, self.gen.number - 1) if self.gen.number else None

    @property
    def seed(self) -> int:
        return self.config.seed * 1000 + self.gen.number

    def error(self, section: str, error: SettingsError) -> BookgenError:
        from bookgen.cycle.config import config_error

        return config_error(self.config.source or "cycle config", error, section)


def _clear(*paths: Path) -> None:
    """Remove partial outputs of an unfinished stage (books with their side files,
    folders, temporary files of killed runs)."""
    for path in paths:
        for name in [str(path), *glob.glob(f"{glob.escape(str(path))}-*"),
                     *glob.glob(str(path.parent / f".{glob.escape(path.name)}.*.tmp*"))]:
            target = Path(name)
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)


def _book_step(source: Path | None, target: Path, step: Callable[[Path], dict[str, Any]]
               ) -> dict[str, Any]:
    """Run ``step`` on a copy of the book ``source`` (None: a new book) that becomes
    ``target`` when it succeeds."""
    from bookgen.files import atomic_output
    from bookgen.store.copying import copy_book, settle_book

    _clear(target)
    with atomic_output(target) as work:
        if source is not None:
            copy_book(source, work)
        try:
            result = step(work)
            settle_book(work)   # the renamed file must hold every write
        finally:
            for side in glob.glob(f"{glob.escape(str(work))}-*"):
                Path(side).unlink(missing_ok=True)
    return result


def _check_status(ctx: _Context, what: str, status: str, reason: str = "") -> None:
    """A stage's run must end ``done``: Ctrl-C ends the cycle as it ends every command
    (exit code 130; the stage runs again next time), anything else is an error."""
    if status == "interrupted":
        raise KeyboardInterrupt
    if status != "done":
        raise BookgenError(f"{ctx.gen.name}: {what} {status}" + (f" ({reason})" if reason
                                                                 else ""))


def _network_spec(ctx: _Context, blend: bool) -> str:
    inner = f"torch:{ctx.path('input.pt')}"
    return f"blend:{ctx.path('book.sqlite')}:{inner}" if blend else inner


def _network_options(ctx: _Context, spec: str) -> dict[str, Any]:
    from bookgen.engines.settings import EngineSettings
    from bookgen.engines.spec import parse_spec

    return EngineSettings(parse_spec(spec), network=ctx.network).evaluator_options()


# --------------------------------------------------------------------------
# the stages


def stage_network(ctx: _Context) -> dict[str, Any]:
    from bookgen.cycle.generations import read_json
    from bookgen.files import atomic_write

    target = ctx.path("input.pt")
    start = ctx.config.network
    if ctx.previous is not None:
        summary = read_json(ctx.previous.file("generation.json"))
        source = ctx.gen.directory / summary["best_network"]
        atomic_write(target, source.read_bytes())
        return {"network": target.name, "name": summary["best"], "from": summary["best_network"]}
    if start.start == INIT_NAME:
        from bookgen.engines.network.model import init_model

        info = init_model(target, start.blocks, start.channels, start.seed, force=True)
        return {"network": target.name, "name": INIT_NAME, "from": "init",
                "parameters": info.get("parameters")}
    base = (ctx.config.source.parent if ctx.config.source else Path())
    source = Path(start.start) if Path(start.start).is_absolute() else base / start.start
    if not source.is_file():
        raise BookgenError(f"{ctx.config.source}: network.start: {source}: no such model file")
    atomic_write(target, source.read_bytes())
    return {"network": target.name, "name": INIT_NAME, "from": str(source)}


def stage_grow(ctx: _Context) -> dict[str, Any]:
    from bookgen.engines.factory import default_batch_size
    from bookgen.engines.mcts import MctsSettings
    from bookgen.grow import EvaluatorSettings, GrowBudget, GrowSettings, WalkSettings, grow

    section = ctx.config.grow
    spec = section.evaluator
    if spec == "network":
        spec = _network_spec(ctx, blend=False)
    options = _network_options(ctx, spec) if spec.startswith(("torch:", "onnx:")) else {}
    try:
        settings = GrowSettings(
            evaluator=EvaluatorSettings(spec, options),
            budget=GrowBudget(positions=section.positions),
            walk=WalkSettings(max_ply=section.max_ply,
                              eval_threshold_cp=section.eval_threshold_cp),
            mcts=MctsSettings(playouts=section.playouts, batch_size=default_batch_size(spec)),
            seed=ctx.seed, cluster=ctx.cluster)
    except SettingsError as error:
        raise ctx.error("grow", error) from None
    source = ctx.previous.file("book.sqlite") if ctx.previous is not None else None

    def step(book: Path) -> dict[str, Any]:
        summary = grow(book, settings, progress=False)
        _check_status(ctx, "grow", summary.status, summary.stop_reason)
        return {"run_id": summary.run_id, "expansions": summary.expansions,
                "positions_added": summary.positions_added, "moves_added": summary.moves_added,
                "positions": summary.positions, "moves": summary.moves,
                "seconds": round(summary.seconds, 3)}

    return _book_step(source, ctx.path("grown.sqlite"), step)


def _refine_settings(ctx: _Context) -> Any:
    from bookgen.engines.settings import engine_settings

    refine = ctx.config.refine
    usi = refine.engine.startswith("usi:")
    try:
        return engine_settings(refine.engine, dict(refine.options) if usi else {},
                               refine.nodes, None, refine.movetime_ms, refine.depth)
    except SettingsError as error:
        raise ctx.error("refine", error) from None


def stage_search(ctx: _Context) -> dict[str, Any]:
    from bookgen.refine.book_search import search
    from bookgen.refine.settings import PositionSelection, SearchSettings

    section = ctx.config.search
    settings = SearchSettings(_refine_settings(ctx), PositionSelection(section.select),
                              ctx.config.run.workers, section.positions, ctx.cluster)

    def step(book: Path) -> dict[str, Any]:
        summary = search(book, settings, progress=False)
        _check_status(ctx, "refine search", summary.status, summary.stop_reason)
        return {"run_id": summary.run_id, "engine": summary.engine,
                "selected": summary.selected, "analysed": summary.analysed,
                "already_analysed": summary.already_analysed, "failed": summary.failed,
                "seconds": round(summary.seconds, 3)}

    return _book_step(ctx.path("grown.sqlite"), ctx.path("searched.sqlite"), step)


def _mistake_records(mistakes: list[Any]) -> bytes:
    """The mistakes as hcpe records: the position, the refine engine's score (cp,
    side to move) and move, and the result its score's sign gives."""
    import cshogi
    import numpy as np

    records = np.zeros(len(mistakes), dtype=cshogi.HuffmanCodedPosAndEval)
    board = cshogi.Board()
    kept = 0
    for mistake in mistakes:
        board.set_sfen(mistake.sfen)
        if not mistake.engine_move:
            continue
        move = board.move_from_usi(mistake.engine_move)
        if not move or not board.is_legal(move):
            continue
        board.to_hcp(records[kept:kept + 1]["hcp"])
        value = max(-32000, min(32000, mistake.engine_value))
        records[kept]["eval"] = value
        records[kept]["bestMove16"] = cshogi.move16(move)
        winner = board.turn if value > 0 else 1 - board.turn
        records[kept]["gameResult"] = cshogi.DRAW if value == 0 else (
            cshogi.BLACK_WIN if winner == cshogi.BLACK else cshogi.WHITE_WIN)
        kept += 1
    return records[:kept].tobytes()


def stage_mistakes(ctx: _Context) -> dict[str, Any]:
    import json

    from bookgen.files import atomic_write
    from bookgen.refine.mistakes import mistakes, position_line
    from bookgen.refine.settings import DetectionSettings, MistakesSettings

    section = ctx.config.mistakes
    search_run = ctx.gen.stage_summary("search")["run_id"]
    settings = MistakesSettings(detection=DetectionSettings(
        analysis_run=search_run, threshold_cp=section.threshold_cp, diff_cp=section.diff_cp))

    def step(book: Path) -> dict[str, Any]:
        summary = mistakes(book, settings, progress=False)
        _check_status(ctx, "refine mistakes", summary.status)
        found = summary.mistakes
        atomic_write(ctx.path("mistakes.txt"),
                     "".join(position_line(m) + "\n" for m in found).encode())
        atomic_write(ctx.path("mistakes.json"), (json.dumps(
            [m.as_dict() for m in found], indent=1) + "\n").encode())
        records = _mistake_records(found)
        atomic_write(ctx.path("mistakes.hcpe"), records)
        held_out = _mistake_records([m for m in found
                                     if ctx.config.mistakes.held_out(position_line(m))])
        atomic_write(ctx.path("held-out.hcpe"), held_out)
        sizes = sorted(abs(m.difference) for m in found)
        return {"run_id": summary.run_id, "compared": summary.compared,
                "mistakes": len(found), "records": len(records) // 38,
                "held_out_records": len(held_out) // 38,
                "kinds": {k: sum(m.kind == k for m in found) for k in
                          sorted({m.kind for m in found})},
                "size_mean_cp": round(sum(sizes) / len(sizes), 1) if sizes else None,
                "size_median_cp": sizes[len(sizes) // 2] if sizes else None}

    return _book_step(ctx.path("searched.sqlite"), ctx.path("book.sqlite"), step)


def stage_starts(ctx: _Context) -> dict[str, Any]:
    import random

    from bookgen.files import atomic_write
    from bookgen.selfplay.starts import StartsSelection, StartsSettings, make_starts

    section = ctx.config.starts
    target = ctx.path("starts.txt")
    source = section.source
    lines: list[str] = []
    if source == "mistakes":
        # The held-out mistakes stay out of self-play: training is measured on them.
        lines = [line for line in ctx.path("mistakes.txt").read_text().splitlines()
                 if line and not ctx.config.mistakes.held_out(line)]
        if section.limit is not None and len(lines) > section.limit:
            lines = sorted(random.Random(ctx.seed).sample(lines, section.limit))
    elif source != "initial":
        try:
            selection = StartsSelection(min_ply=section.min_ply, max_ply=section.max_ply)
            settings = StartsSettings(format="usi", source=source, selection=selection,
                                      limit=section.limit, seed=ctx.seed)
        except SettingsError as error:
            raise ctx.error("starts", error) from None
        summary = make_starts(ctx.path("book.sqlite"), target, settings)
        if summary.positions:
            return {"source": source, "positions": summary.positions, "fallback": False}
    fallback = not lines
    atomic_write(target, ("\n".join(lines or ["startpos"]) + "\n").encode())
    return {"source": source, "positions": len(lines) or 1,
            "fallback": fallback and source != "initial"}


def _player(ctx: _Context, spec: str, *, playouts: int, random_moves: int,
            name: str | None = None, match: bool = False) -> PlayerSettings:
    """A network player (``spec`` torch:/blend:), the refine engine (``refine``) or any
    player spec, for self-play or (``match``) matches."""
    from bookgen.engines.player_settings import PlayerSettings, RandomOpening
    from bookgen.engines.restart import RestartPolicy, SearchLimits
    from bookgen.engines.spec import parse_spec
    from bookgen.selfplay.games import selfplay_player

    refine = ctx.config.refine
    if spec == "refine":
        spec = refine.engine
        options = tuple(refine.options.items()) if spec.startswith("usi:") else ()
        limits = SearchLimits(nodes=refine.nodes, movetime_ms=refine.movetime_ms,
                              depth=refine.depth)
        if match:
            from bookgen.analysis.match import match_player

            return match_player(name or "refine", spec, options)
        return selfplay_player(parse_spec(spec, role="player"), options=options,
                               limits=limits)
    if spec.startswith(("torch:", "blend:")):
        spec = "mcts:" + spec
    options_of: dict[str, Any] = {}
    evaluator = spec.removeprefix("mcts:")
    if evaluator.startswith(("torch:", "onnx:", "blend:")):
        options_of = _network_options(ctx, evaluator)
        if evaluator.startswith("blend:"):
            options_of.update(ctx.config.blend.options())
    player = selfplay_player(spec, playouts=playouts, batch_size=None,
                             evaluator_options=options_of,
                             opening=RandomOpening(random_moves=random_moves))
    if match:
        return PlayerSettings(player.spec, name=name, mcts=player.mcts,
                              restarts=RestartPolicy(on_failure="forfeit"))
    return player


def stage_selfplay(ctx: _Context) -> dict[str, Any]:
    from bookgen.play.loop import GameRules
    from bookgen.selfplay.games import SelfplayOutput, SelfplayPlayers, SelfplaySettings, selfplay

    section = ctx.config.selfplay
    _clear(ctx.path("games"), ctx.path("csa"))
    ctx.path("games").mkdir()
    network = _player(ctx, _network_spec(ctx, ctx.config.blend.selfplay),
                      playouts=section.playouts, random_moves=section.random_moves)
    rules = GameRules(max_ply=section.max_ply, resign_cp=section.resign_cp)
    runs: list[dict[str, Any]] = []
    for number, opponent in enumerate(section.opponents):
        if opponent == "self":
            plays = [("self", network, network, section.games)]
        else:
            other = _player(ctx, opponent, playouts=section.playouts,
                            random_moves=section.random_moves)
            half = section.games // 2
            plays = [("black", network, other, section.games - half),
                     ("white", other, network, half)]
        label = "refine" if opponent == "refine" else ("self" if opponent == "self"
                                                       else f"opponent{number}")
        for side, black, white, games in plays:
            if not games:
                continue
            name = f"{number:02d}-{label}-{side}"
            try:
                settings = SelfplaySettings(
                    games=games, players=SelfplayPlayers(black, white), rules=rules,
                    output=SelfplayOutput(csa_dir=ctx.path("csa") / name, replace=True),
                    workers=ctx.config.run.workers, seed=ctx.seed * 100 + len(runs),
                    cluster=ctx.cluster)
            except SettingsError as error:
                raise ctx.error("selfplay", error) from None
            summary = selfplay(ctx.path("starts.txt"), ctx.path("games") / f"{name}.hcpe",
                               settings, progress=False)
            _check_status(ctx, "self-play", "interrupted" if summary.interrupted else "done")
            runs.append({"file": f"games/{name}.hcpe", "opponent": opponent,
                         "network_plays": side, "games": summary.games,
                         "positions": summary.positions, "black_wins": summary.black_wins,
                         "white_wins": summary.white_wins, "draws": summary.draws,
                         "mean_plies": round(summary.mean_plies, 1)})
    return {"runs": runs, "games": sum(r["games"] for r in runs),
            "positions": sum(r["positions"] for r in runs)}


def _metrics(metrics: Any) -> dict[str, Any] | None:
    from bookgen.cli.support import no_nan

    return no_nan(asdict(metrics)) if metrics is not None else None


def stage_train(ctx: _Context) -> dict[str, Any]:
    from bookgen.selfplay.train import TrainSettings, train

    section = ctx.config.train
    files = [ctx.path(run["file"]) for run in ctx.gen.stage_summary("selfplay")["runs"]
             if run["positions"]]
    if not files:
        raise BookgenError(f"{ctx.gen.name}: self-play wrote no training records")
    held_out = ctx.path("held-out.hcpe")
    eval_on = (held_out,) if held_out.stat().st_size else ()
    try:
        settings = TrainSettings(
            init=ctx.path("input.pt"), epochs=section.epochs, batch_size=section.batch_size,
            learning_rate=section.learning_rate, optimizer=section.optimizer,
            result_share_of_value_target=section.result_share_of_value_target,
            validation_share=section.validation_share, eval_on=eval_on,
            threads=ctx.config.run.threads, seed=ctx.seed, replace_output=True)
    except SettingsError as error:
        raise ctx.error("train", error) from None
    summary = train(files, ctx.path("model.pt"), settings, log=lambda _line: None)
    _check_status(ctx, "train", "interrupted" if summary.interrupted else "done")
    return {"model": "model.pt", "train_records": summary.train_records,
            "validation_records": summary.validation_records,
            "initial_train": _metrics(summary.initial_train),
            "final_train": _metrics(summary.final_train),
            "held_out_before": _metrics(summary.eval_on_before),
            "held_out_after": _metrics(summary.eval_on_after),
            "seconds": round(summary.seconds, 3)}


def stage_suite(ctx: _Context) -> dict[str, Any]:
    from bookgen.analysis.suites import BookSuiteSettings, SuiteSelection, make_suite
    from bookgen.files import atomic_write

    section = ctx.config.suite
    try:
        selection = SuiteSelection(max_value_cp=section.max_value_cp, min_ply=section.min_ply,
                                   max_ply=section.max_ply, limit=section.limit,
                                   seed=ctx.seed)
    except SettingsError as error:
        raise ctx.error("suite", error) from None
    try:
        summary = make_suite(ctx.path("book.sqlite"), ctx.path("suite.txt"),
                             BookSuiteSettings(selection))
    except BookgenError as error:
        atomic_write(ctx.path("suite.txt"), b"startpos\n")
        return {"positions": 1, "fallback": str(error)}
    return {"positions": summary.positions, "fallback": None}


def _match_players(ctx: _Context) -> tuple[str, str]:
    candidate = ctx.gen.name
    current = ctx.gen.stage_summary("network")["name"]
    return candidate, current


def stage_match(ctx: _Context) -> dict[str, Any]:
    from bookgen.analysis.match import MatchSettings, MatchSprt, run_match
    from bookgen.analysis.pairstats import SprtSettings, sprt
    from bookgen.analysis.results import load_games
    from bookgen.play.clock import TimeControl
    from bookgen.play.loop import GameRules

    section, test = ctx.config.match, ctx.config.promotion
    results = ctx.path("match.sqlite")
    _clear(results)
    candidate, current = _match_players(ctx)
    blend = ctx.config.blend.match

    def network(name: str, model: Path) -> PlayerSettings:
        inner = f"torch:{model}"
        spec = f"blend:{ctx.path('book.sqlite')}:{inner}" if blend else inner
        return _player(ctx, spec, playouts=section.playouts, random_moves=0, name=name,
                       match=True)

    me = network(candidate, ctx.path("model.pt"))
    rules = GameRules(max_ply=section.max_ply)
    refine = ctx.config.refine
    # The network players search their playouts whatever the clock; the refine
    # engine searches its nodes, else its movetime as byoyomi (else 1 s).
    control = TimeControl(nodes=refine.nodes) if refine.nodes else \
        TimeControl(byoyomi=refine.movetime_ms or 1000)

    def play(opponent: PlayerSettings, games: int, sprt_test: MatchSprt | None = None) -> None:
        settings = MatchSettings(control=control, rules=rules, games=games,
                                 concurrency=ctx.config.run.workers, seed=ctx.seed,
                                 sprt=sprt_test, cluster=ctx.cluster)
        summary = run_match([me, opponent], ctx.path("suite.txt"), results, settings,
                            progress=False)
        _check_status(ctx, "match", "interrupted" if summary.interrupted else "done")

    sprt_settings = SprtSettings(test.elo0, test.elo1, alpha=test.alpha, beta=test.beta)
    sprt_test = MatchSprt(candidate, current, sprt_settings) if test.test == "sprt" else None
    play(network(current, ctx.path("input.pt")), test.games, sprt_test)
    if section.anchor_games and current != INIT_NAME:
        first = ctx.gen.directory / "gen-000" / "input.pt"
        play(network(INIT_NAME, first), section.anchor_games)
    if section.refine_games:
        play(_player(ctx, "refine", playouts=1, random_moves=0, name="refine", match=True),
             section.refine_games)
    result = sprt(load_games([str(results)]), candidate, current, sprt_settings)
    estimate = result.estimate
    if test.test == "sprt":
        promoted = result.verdict == "H1"
    else:
        # min_los 0 promotes on any result, even one without a LOS (a sample
        # whose games or pairs all scored the same has none: pairstats)
        promoted = test.min_los <= 0 or (estimate.los is not None
                                         and estimate.los >= test.min_los)
    return {"candidate": candidate, "opponent": current, "promoted": promoted,
            "test": test.test, "verdict": result.verdict, "llr": round(result.llr, 4),
            "wins": result.counts.wins, "draws": result.counts.draws,
            "losses": result.counts.losses, "elo": _finite(estimate.elo),
            "elo_error": _finite(estimate.elo_error), "los": _finite(estimate.los),
            "score": _finite(estimate.score)}


def _finite(value: float | None) -> float | None:
    import math

    return round(value, 3) if value is not None and math.isfinite(value) else None


def stage_summary(ctx: _Context) -> dict[str, Any]:
    from bookgen.bookfiles.stats import book_stats
    from bookgen.cycle.generations import STAGES, write_json

    stages = {stage: ctx.gen.stage_summary(stage) for stage in STAGES if stage != "summary"}
    match = stages["match"]
    stats = book_stats(ctx.path("book.sqlite"))
    best, best_network = match["opponent"], f"{ctx.gen.name}/input.pt"
    if match["promoted"]:
        best, best_network = ctx.gen.name, f"{ctx.gen.name}/model.pt"
    summary = {
        "generation": ctx.gen.number, "name": ctx.gen.name,
        "fingerprint": ctx.config.fingerprint(),
        "network": stages["network"]["name"], "candidate": ctx.gen.name,
        "promoted": match["promoted"], "best": best, "best_network": best_network,
        "book": {"positions": stats.positions, "positions_with_moves":
                 stats.positions_with_moves, "moves": stats.moves, "ply": stats.ply},
        "stages": stages,
    }
    write_json(ctx.path("generation.json"), summary)
    for name in ("grown.sqlite", "searched.sqlite"):
        _clear(ctx.path(name))
    return {"generation": "generation.json", "promoted": match["promoted"], "best": best}


_STAGE_FUNCTIONS: dict[str, Callable[[_Context], dict[str, Any]]] = {
    "network": stage_network, "grow": stage_grow, "search": stage_search,
    "mistakes": stage_mistakes, "starts": stage_starts, "selfplay": stage_selfplay,
    "train": stage_train, "suite": stage_suite, "match": stage_match,
    "summary": stage_summary,
}


def run_cycle(config: CycleConfig, generations: int = 1, *,
              cluster: ClusterSettings | None = None, network: NetworkSettings | None = None,
              log: Callable[[str], None] = lambda _line: None) -> CycleSummary:
    """Run the cycle of ``config`` until it has ``generations`` finished generations:
    finished stages are kept, the first unfinished one and those after it run."""
    from bookgen.cycle.generations import STAGES, Generation, generation_dirs
    from bookgen.engines.network.device import NetworkSettings
    from bookgen.signals import fault_point

    network = network or NetworkSettings()
    if network.options():  # the cycle's networks are torch: models: a bad device fails now
        import torch

        from bookgen.engines.network.device import torch_device

        torch_device(network, torch.cuda, torch.version.cuda)
    directory = config.directory
    existing = generation_dirs(directory)
    for path in existing:  # every generation keeps its config, checked before any work
        gen = Generation(directory, int(path.name.split("-")[1]))
        if gen.started():
            gen.check_config(config)
    directory.mkdir(parents=True, exist_ok=True)
    summary = CycleSummary(str(directory))
    for number in range(generations):
        gen = Generation(directory, number)
        gen.check_config(config)
        ctx = _Context(config, gen, cluster, network, log)
        ran, kept = [], []
        for stage in STAGES:
            if gen.done(stage):
                kept.append(stage)
                continue
            log(f"{gen.name}: {stage}")
            result = _STAGE_FUNCTIONS[stage](ctx)
            fault_point("cycle-stage")
            gen.mark_done(stage, result)
            fault_point("cycle-stage-done")
            ran.append(stage)
        summary.generations.append({"name": gen.name, "ran": ran, "kept": kept,
                                    **gen.stage_summary("summary")})
    return summary


@click.command("cycle")
@click.option("-c", "--config", "config_path", required=True,
              type=click.Path(dir_okay=False),
              help="The cycle's TOML config (see data/cycle.toml).")
@click.option("--generations", type=click.IntRange(1), default=1, show_default=True,
              help="Run until the cycle has this many finished generations.")
@click.option("--cluster", metavar="ADDRESS",
              help="Run grow, refine search, self-play and matches on a Ray cluster: local, "
                   "auto, HOST:PORT or ray://HOST:PORT (docs/cluster.md).")
@json_option()
@reports_errors
@network_options
def cycle_command(config_path: str, generations: int, cluster: str | None, as_json: bool,
                  network: NetworkSettings) -> None:
    """Run the book's reinforcement-learning loop, one generation after another.

    Each generation (DIR/gen-000, gen-001, ...; DIR is the config's directory)
    grows the book with its network, re-searches it with the refine engine,
    finds the network's mistakes, plays self-play games from them (or from
    book positions), trains the network on them, and matches the trained
    network against the generation's on balanced book positions: it becomes
    the next generation's network when it passes the promotion test.

    Resumable: kill it anywhere and run it again; finished stages are kept. A
    generation keeps the config it started with: another config is refused.
    """
    from bookgen.cycle.config import load_config
    from bookgen.workers.cluster import ClusterSettings

    config = load_config(config_path)
    cluster_settings = ClusterSettings(cluster) if cluster is not None else None

    def log(line: str) -> None:
        if not as_json:
            click.echo(f"bookgen cycle: {line}", err=True)

    summary = run_cycle(config, generations, cluster=cluster_settings, network=network,
                        log=log)
    if as_json:
        echo_json(summary.as_dict())
        return
    for gen in summary.generations:
        state = "promoted" if gen["promoted"] else "kept " + gen["best"]
        ran = ", ".join(gen["ran"]) or "nothing (finished before)"
        click.echo(f"{summary.directory}/{gen['name']}: ran {ran}; {state}")
