"""``bookgen starts``, ``selfplay`` and ``train``: the curriculum stage.

Thin layers over :mod:`bookgen.selfplay.starts`, :mod:`bookgen.selfplay.games`
and :mod:`bookgen.selfplay.train`, imported (with torch) only when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bookgen.cli.options import (
    batch_size_option,
    book_option,
    byoyomi_option,
    cluster_options,
    cluster_settings,
    engine_options_option,
    engine_timeout_option,
    json_option,
    movetime_option,
    network_options,
    nodes_option,
    output_option,
    seed_option,
    workers_option,
)
from bookgen.cli.support import echo_json, exit_if_interrupted, no_nan, reports_errors
from bookgen.engines.factory import parallel_games_help
from bookgen.errors import BookgenError, SettingsError
from bookgen.extras import require_extra

if TYPE_CHECKING:
    from bookgen.engines.network.device import NetworkSettings
    from bookgen.engines.player_settings import PlayerSettings
    from bookgen.selfplay.starts import StartsSummary


@click.command("starts")
@book_option()
@output_option("The file to write.")
@click.option("--format", "fmt", type=click.Choice(["usi", "sfen", "hcp", "psfen"]),
              default="usi", show_default=True,
              help="usi: 'startpos moves ...' along the shortest book path (else 'sfen ...'); "
                   "sfen: 'sfen ...' lines; hcp: dlshogi roots.hcp records; psfen: "
                   "YaneuraOu packed sfens.")
@click.option("--from", "source", type=click.Choice(["all", "leaves", "principal", "mistakes"]),
              default="all", show_default=True,
              help="Book positions with moves; those whose moves all leave the book; those "
                   "on the best lines of both sides from the initial position; those "
                   "flagged by 'refine mistakes'.")
@click.option("--min-ply", type=click.IntRange(0))
@click.option("--max-ply", type=click.IntRange(0))
@click.option("--max-value", type=click.IntRange(0),
              help="Keep positions whose best value is within this many cp of 0.")
@click.option("--side", type=click.Choice(["both", "black", "white"]), default="both",
              show_default=True, help="Side to move of the kept positions.")
@click.option("--min-count", type=click.IntRange(0),
              help="Keep positions whose moves' counts add up to at least this.")
@click.option("--count-percentile", type=click.FloatRange(0, 100),
              help="Keep positions at or above this percentile of that count "
                   "(dlshogi's csa_to_roots_hcp uses 99).")
@click.option("--weight", type=click.Choice(["none", "visits"]), default="none",
              show_default=True, help="visits: repeat positions in proportion to their "
                                      "visits (the median gives one copy).")
@click.option("--limit", type=click.IntRange(1), help="At most this many positions (sampled).")
@seed_option()
@click.option("--values", type=click.Choice(["raw", "minimax"]), default="raw",
              show_default=True, help="Which book values --max-value uses (--from principal "
                                      "follows minimax values where refine stored them).")
@click.option("--principal-margin", type=click.IntRange(0), default=0, show_default=True,
              help="--from principal: follow moves within this many cp of the best, from the "
                   "initial position and positions no book move reaches.")
@json_option()
@reports_errors
def starts_command(book: str, output: str, fmt: str, source: str, min_ply: int | None,
                   max_ply: int | None, max_value: int | None, side: str,
                   min_count: int | None, count_percentile: float | None, weight: str,
                   limit: int | None, seed: int, values: str, principal_margin: int,
                   as_json: bool) -> None:
    """Write self-play start positions chosen from the book (duplicates removed)."""
    from bookgen.selfplay.starts import StartsSelection, StartsSettings, make_starts
    from bookgen.store import ValueColumn

    selection = StartsSelection(
        min_ply=min_ply, max_ply=max_ply, max_value_cp=max_value, side=side,
        min_count=min_count, count_percentile=count_percentile, values=ValueColumn(values),
        principal_margin_cp=principal_margin)
    settings = StartsSettings(format=fmt, source=source, selection=selection, weight=weight,
                              limit=limit, seed=seed)
    summary = make_starts(book, output, settings)
    if as_json:
        echo_json(summary.as_dict())
        return
    click.echo(format_starts_summary(summary))


def format_starts_summary(summary: StartsSummary) -> str:
    """The one-line report of ``bookgen starts``. For usi lines it says how many
    start from the initial position; the other formats hold positions only."""
    plies = ", ".join(f"{ply}: {n}" for ply, n in summary.by_ply.items())
    lines = "lines" if summary.format in ("usi", "sfen") else "records"
    text = f"{summary.file}: {summary.written} {lines} for {summary.positions} positions"
    if summary.format == "usi" and summary.positions:
        reached = summary.from_startpos
        others = summary.positions - reached
        if not others:
            text += " (all as 'startpos moves ...')"
        elif not reached:
            text += (" (all as 'sfen ...': none is reached from the initial position by book "
                     "moves)")
        else:
            text += (f" ({reached} as 'startpos moves ...', {others} as 'sfen ...': not "
                     "reached from the initial position by book moves)")
    if summary.value_min is not None:
        text += f"; values {summary.value_min} .. {summary.value_max}"
    return text + (f"; by ply {{{plies}}}" if plies else "")


def _engine_options(pairs: tuple[str, ...]) -> dict[str, str]:
    from bookgen.engines.usi.analyser import parse_options

    return parse_options(list(pairs))


@click.command("selfplay")
@click.option("--starts", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Start positions: 'startpos moves ...' / 'sfen ...' lines, or a .hcp file "
                   "of cshogi HuffmanCodedPos records (dlshogi roots.hcp). Each game starts at "
                   "one drawn uniformly at random.")
@click.option("--games", required=True, type=click.IntRange(1), help="Games to play.")
@output_option("The hcpe file to write (cshogi HuffmanCodedPosAndEval records).")
@click.option("--player", default="mcts:builtin", show_default=True,
              help="Plays both sides unless --black/--white say otherwise: mcts:EVALUATOR, "
                   "MCTS over builtin, torch:MODEL.pt, onnx:MODEL.onnx or blend:BOOK:INNER "
                   "(torch:, onnx: and blend: alone mean the same); usi:COMMAND, a USI "
                   "engine's own search; or alphabeta, the built-in alpha-beta search "
                   "(deprecated: it is builtin everywhere, but self-play refuses builtin for "
                   "one release, as it meant mcts:builtin).")
@click.option("--black", help="Player for black (same forms as --player).")
@click.option("--white", help="Player for white (same forms as --player).")
@click.option("--playouts", type=click.IntRange(1), default=100, show_default=True,
              help="MCTS playouts per move.")
@batch_size_option("Leaves evaluated together in MCTS, of all the worker's games (networks: "
                   "also the model batch); ")
@click.option("--parallel-games", type=click.IntRange(1), default=None,
              help="Games each worker plays at once, with one mcts: player on both sides: "
                   "their searches run interleaved, each gathering --batch-size / N leaves, "
                   "and the evaluator takes the leaves of all of them together (the same "
                   "games as one after another); " + parallel_games_help() + ".")
@click.option("--random-moves", type=click.IntRange(0), default=4, show_default=True,
              help="MCTS players sample the first K plies of each game from visit counts "
                   "(dlshogi --random).")
@click.option("--temperature", type=click.FloatRange(0, min_open=True), default=1.0,
              show_default=True, help="Sampling weight visits ** (1/T).")
@click.option("--random-cutoff", type=click.FloatRange(0, 1), default=0.9, show_default=True,
              help="Sample only moves whose win rate is at least this share of the most "
                   "visited move's (dlshogi --random_cutoff).")
@click.option("--csa", "csa_dir", type=click.Path(file_okay=False),
              help="Also write each game as a CSA record in this directory.")
@workers_option("Processes playing games at once, each with its own evaluators/engines.")
@cluster_options()
@click.option("--max-ply", type=click.IntRange(1), default=320, show_default=True,
              help="A game reaching this many moves is a draw.")
@click.option("--resign", type=click.IntRange(1),
              help="Resign for a side whose own evaluation is at or below -CP ...")
@click.option("--resign-moves", type=click.IntRange(1), default=3, show_default=True,
              help="... on this many of its consecutive moves.")
@click.option("--out-min", type=click.Path(dir_okay=False),
              help="Write the roots of games shorter than --min-ply here as hcp records "
                   "(dlshogi --out_min_hcp).")
@click.option("--min-ply", type=click.IntRange(0), default=0, show_default=True,
              help="Games shorter than this give no training records (dlshogi --min_move).")
@click.option("--declaration-rule", type=click.Choice(["27", "24"]), default="27",
              show_default=True, help="Entering-king declaration rule.")
@engine_options_option("setoption for every usi: player (repeatable), e.g. Threads=1.")
@click.option("--black-option", "black_options", multiple=True, metavar="NAME=VALUE",
              help="setoption for black's usi: player only, e.g. BookDepth=0 for gpsusi.")
@click.option("--white-option", "white_options", multiple=True, metavar="NAME=VALUE",
              help="setoption for white's usi: player only.")
@nodes_option("usi: go nodes N.")
@byoyomi_option("usi: go byoyomi MS (the default, 1000, without any limit).")
@movetime_option()
@engine_timeout_option("usi: seconds to wait for a move before restarting the engine.")
@seed_option("Start positions and sampled moves depend only on the seed and the game "
             "number, not on --workers.")
@click.option("--append", is_flag=True, help="Add to existing output files.")
@click.option("--force", is_flag=True, help="Replace existing output files.")
@json_option()
@reports_errors
@network_options
def selfplay_command(starts: str, games: int, output: str, player: str, black: str | None,
                     white: str | None, playouts: int, batch_size: int | None,
                     parallel_games: int | None, random_moves: int,
                     temperature: float, random_cutoff: float, csa_dir: str | None,
                     workers: int, cluster: str | None, worker_resources: tuple[str, ...],
                     max_ply: int, resign: int | None, resign_moves: int,
                     out_min: str | None, min_ply: int, declaration_rule: str,
                     engine_options: tuple[str, ...], black_options: tuple[str, ...],
                     white_options: tuple[str, ...], nodes: int | None, byoyomi: int | None,
                     movetime: int | None, engine_timeout: float | None, seed: int,
                     append: bool, force: bool, as_json: bool,
                     network: NetworkSettings) -> None:
    """Play games from start positions and write every position as dlshogi training data.

    Each record holds the position, the mover's evaluation (cp, side to
    move), its best move and the game's result (0 draw, 1 black win, 2 white
    win). Games end by checkmate, fourfold repetition (perpetual check
    loses), entering-king declaration, --max-ply, resignation or --resign.
    Outputs are replaced in one step at the end; Ctrl-C stops at once, keeps
    the finished games and drops those in flight (exit code 130).
    """
    from bookgen.engines.factory import default_parallel_games
    from bookgen.engines.player_settings import RandomOpening
    from bookgen.engines.restart import SearchLimits
    from bookgen.play.loop import GameRules
    from bookgen.selfplay.games import (
        SelfplayOutput,
        SelfplayPlayers,
        SelfplaySettings,
        player_spec,
        selfplay,
        selfplay_player,
    )
    from bookgen.workers.runcontrol import in_flight

    usi_options = {"": _engine_options(engine_options), "black": _engine_options(black_options),
                   "white": _engine_options(white_options)}
    outputs = SelfplayOutput(
        csa_dir=Path(csa_dir) if csa_dir is not None else None,
        out_min=Path(out_min) if out_min is not None else None, min_ply=min_ply,
        append=append, replace=force)
    # Every spec given is read (and 'builtin' refused) even where --black and --white
    # both replace --player; each deprecated spec warns once.
    specs = {text: player_spec(text) for text in dict.fromkeys((player, black, white))
             if text is not None}
    evaluator_options: dict[str, Any] = {}
    if batch_size is not None and batch_size > 1 and any(
            s.removeprefix("mcts:").startswith(("torch:", "onnx:"))
            for s in (player, black or "", white or "")):
        evaluator_options["batch_size"] = batch_size

    opening = RandomOpening(random_moves=random_moves, temperature=temperature,
                            random_cutoff=random_cutoff)

    on_network = [s for s in specs.values() if s.kind == "mcts" and s.evaluator.base.is_network]
    if network.options() and not on_network:
        raise SettingsError(f"network.{next(iter(network.options()))}",
                            "applies to torch: and onnx: players only")

    def side(colour: str, text: str | None) -> PlayerSettings:
        options = {**usi_options[""], **usi_options[colour]}  # one side's win
        spec = specs[text or player]
        # A network's options go to network players only (an mcts:builtin
        # opponent's evaluator takes no batch size or device).
        side_options = {**evaluator_options, **network.options()} if spec in on_network \
            else {}
        return selfplay_player(
            spec, options=tuple(options.items()), playouts=playouts,
            batch_size=batch_size, evaluator_options=side_options, opening=opening,
            limits=SearchLimits(nodes=nodes, byoyomi_ms=byoyomi, movetime_ms=movetime),
            engine_timeout_s=engine_timeout)

    players = SelfplayPlayers(side("black", black), side("white", white))
    if parallel_games is None:  # one mcts: player on both sides: by its evaluator and device
        one = players.black
        parallel_games = (default_parallel_games(one.spec.evaluator,
                                                 dict(one.mcts.evaluator_options))
                          if one == players.white and one.spec.kind == "mcts" else 1)
    settings = SelfplaySettings(
        games=games, players=players, parallel_games=parallel_games,
        rules=GameRules(max_ply=max_ply, declaration_rule=declaration_rule, resign_cp=resign,
                        resign_moves=resign_moves),
        output=outputs, workers=workers, seed=seed,
        cluster=cluster_settings(cluster, worker_resources))
    summary = selfplay(starts, output, settings)
    if as_json:
        echo_json(summary.as_dict())
    else:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(summary.reasons.items()))
        short = f"; {summary.short_games} shorter than --min-ply" if min_ply else ""
        click.echo(f"{output}: {summary.games} games, {summary.positions} positions in "
                   f"{summary.seconds:.1f} s ({summary.positions_per_second:.1f}/s); black "
                   f"{summary.black_wins}, white {summary.white_wins}, draws {summary.draws} "
                   f"({reasons}); {summary.mean_plies:.1f} plies per game{short}"
                   + (f"; mean evaluator batch {summary.network.mean_batch:.1f}, "
                      f"{summary.outside_evaluator_share * 100:.0f}% of the workers' time "
                      "outside the evaluator" if summary.network.calls else "")
                   + (f"; interrupted, {in_flight(summary.dropped, 'game')}"
                      if summary.interrupted else ""))
    exit_if_interrupted(summary.interrupted, f"the finished games are in {output}; add "
                                             "--append to play more")


@click.command("train")
@click.argument("more_data", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--data", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="hcpe file(s) to train on: --data A.hcpe B.hcpe ... (or repeat --data).")
@output_option("The model file to write (.pt, loadable as torch:PATH).")
@click.option("--init", type=click.Path(exists=True, dir_okay=False),
              help="Start from this model (its architecture is kept).")
@click.option("--epochs", type=click.IntRange(1), default=1, show_default=True)
@click.option("--batch-size", type=click.IntRange(1), default=256, show_default=True)
@click.option("--lr", type=click.FloatRange(0, min_open=True), default=0.01, show_default=True,
              help="Learning rate.")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="sgd",
              show_default=True, help="sgd: momentum 0.9, Nesterov (as dlshogi); adam.")
@click.option("--weight-decay", type=click.FloatRange(0), default=1e-4, show_default=True)
@click.option("--alpha", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Value target: alpha * game result + (1 - alpha) * sigmoid(eval / 756) "
                   "(dlshogi's val_lambda 0.333 is alpha 0.667).")
@click.option("--val-split", type=click.FloatRange(0, 1, max_open=True), default=0.1,
              show_default=True, help="Share of the records held out for validation.")
@click.option("--eval-on", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="hcpe file(s) to report loss and accuracy on before and after training.")
@click.option("--blocks", type=click.IntRange(1, 64),
              help="Residual blocks of a new network (default 5).")
@click.option("--channels", type=click.IntRange(1, 1024),
              help="Channels of a new network (default 64).")
@click.option("--threads", type=click.IntRange(1),
              help="torch threads (default: all cores; 1 is faster when other CPU-heavy "
                   "work shares the machine).")
@seed_option("Initial weights, validation split and shuffling.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@json_option()
@reports_errors
def train_command(more_data: tuple[str, ...], data: tuple[str, ...], output: str,
                  init: str | None, epochs: int, batch_size: int, lr: float, optimizer: str,
                  weight_decay: float, alpha: float, val_split: float,
                  eval_on: tuple[str, ...], blocks: int | None, channels: int | None,
                  threads: int | None, seed: int, force: bool, as_json: bool) -> None:
    """Train the dlshogi-shaped network on hcpe records, on the CPU.

    Policy: cross-entropy on the best move's label. Value: binary
    cross-entropy against alpha * result + (1 - alpha) * sigmoid(eval / 756),
    for the side to move. Reports loss and accuracy on a held-out split after
    every epoch and on --eval-on files before and after. Ctrl-C stops after
    the current batch and saves the model trained so far.
    """
    require_extra("torch", "nn", "train")
    from bookgen.selfplay.train import TrainSettings, train

    files = list(data) + list(more_data)
    if not files:
        raise BookgenError("no training data: give --data FILE.hcpe ...")

    def log(line: str) -> None:
        if not as_json:
            click.echo(line, err=True)

    settings = TrainSettings(
        init=Path(init) if init is not None else None, blocks=blocks, channels=channels,
        epochs=epochs, batch_size=batch_size, learning_rate=lr, optimizer=optimizer,
        weight_decay=weight_decay, result_share_of_value_target=alpha,
        validation_share=val_split, eval_on=tuple(Path(p) for p in eval_on), threads=threads,
        seed=seed, replace_output=force)
    summary = train(files, output, settings, log=log)
    if as_json:
        echo_json(no_nan(summary.as_dict()))
        exit_if_interrupted(summary.interrupted, f"the model trained so far is in {output}")
        return
    initial, final = summary.initial_train, summary.final_train
    assert initial is not None and final is not None
    click.echo(f"{output}: {summary.blocks}x{summary.channels} network "
               f"({summary.parameters:,} parameters), {summary.train_records} training / "
               f"{summary.validation_records} validation records, "
               f"{len(summary.epochs)} epochs, {summary.samples_per_second:.0f} samples/s; "
               f"train loss {initial.loss:.4f} -> {final.loss:.4f}"
               + ("; interrupted" if summary.interrupted else ""))
    exit_if_interrupted(summary.interrupted, f"the model trained so far is in {output}")

