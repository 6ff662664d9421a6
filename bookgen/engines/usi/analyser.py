"""USI engines as evaluators: BookMiner-style MultiPV lines, or one best line.

For each position ``UsiEvaluator`` sends ``position sfen SFEN`` (no move
history, so that a position's evaluation does not depend on the path to it)
and searches with the configured limits. In the ``multipv-lines`` mode
(grow, MCTS):

- engines that declare a ``MultiPV`` option are searched with MultiPV k
  (starting at ``multipv``); while the first and the k-th line score within
  ``multipv_margin`` cp of each other, k is widened by ``multipv`` and the
  position searched again (up to ``max_multipv`` and the number of legal
  moves). The moves are the first moves of the lines; ``move_values`` their
  win probabilities for the side to move; ``priors`` a softmax of the scores
  over ``temperature`` cp; ``value`` the first line's win probability.
- other engines (gpsusi) are searched once: one move, prior 1.

Mates count as win probability 1 or 0. The first move of every line and the
``bestmove`` must be legal (checked with cshogi); later PV moves are cut at
the first that is not (gpsusi PVs contain ``pass``). An illegal move, no
``bestmove``, a crash or a timeout make the evaluator restart the engine and
search again, up to ``restarts`` times, before it raises ``EvaluatorError``.

gpsusi: pass ``options={"BookDepth": "0"}`` (it plays book moves without any
score otherwise) and use ``byoyomi`` only: it aborts on ``go nodes``, ``go
movetime`` and ``go depth`` (the evaluator refuses them). It treats byoyomi
in whole seconds (300 ms gives it up to a second) and often stops early. Its
mates come as huge ``score cp`` values, read as mates by :mod:`bookgen.engines.usi.protocol`.

In the ``best-line`` mode (refine search) every position gets ``usinewgame``
(a cleared hash, so that a result does not depend on what the engine
searched before) and one search; the evaluation is the last scored line of
the first PV, as the engine reported it (``score``, ``mate``, ``bound``,
``depth``, ``seldepth``, ``nodes``, ``bestmove``, ``pv``), with the best
move as the only move. A ``bestmove resign`` or ``win`` without a score is
a mate either way. An answer without any score is not retried. A position
that fails raises :class:`~bookgen.engines.protocols.PositionFailed`, which
holds the last error and the restarts tried.

Engines that answer from their own book (YaneuraOu's default ``BookFile``):
a ``bestmove`` whose scored info lines all say ``depth 0`` or ``nodes 0``, or
that follows an ``info string`` about the book without any searched line, is
not an analysis (:func:`book_answer`). ``UsiEvaluator._search``, which every
answer goes through, refuses it like an answer without any score (best-line:
the position fails, not retried; multipv-lines: ``EvaluatorError``), and the
evaluator says so once on stderr, suggesting the option that turns the book
off (``USI_OwnBook=false``, ``BookFile=no_book``, gpsusi's ``BookDepth=0``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence

import cshogi

from bookgen.engines.protocols import (
    AnalysisMode,
    Evaluation,
    EvaluatorBase,
    EvaluatorError,
    PositionFailed,
)
from bookgen.engines.restart import (
    EngineFailed,
    EngineLabel,
    RestartPolicy,
    SearchLimits,
    is_gpsshogi,
    run_with_restarts,
    search_stop_grace,
    start_engine,
)
from bookgen.engines.usi.client import UsiEngine, UsiError
from bookgen.engines.usi.protocol import InfoLine, UsiSearch, parse_info, printable
from bookgen.errors import BookgenError
from bookgen.position import legal_prefix
from bookgen.values import MATE_VALUE, cp_to_value

__all__ = ["BadOutput", "UsiEvaluator", "book_answer", "evaluator_label", "parse_options"]


class BadOutput(Exception):
    """The engine answered, but with something unusable (illegal move, no bestmove)."""


class _NoScore(Exception):
    """The engine answered without any score: a configuration problem, not retried."""


def book_answer(result: UsiSearch) -> str | None:
    """Why ``result`` is a move from the engine's own book rather than a search, or None.

    A book answer is a ``bestmove`` (not ``resign``/``win``) without any
    searched line (a scored info line whose depth and nodes are above 0 or
    not reported), with either scored lines that all say ``depth 0`` or
    ``nodes 0``, or an ``info string`` mentioning the book.
    """
    if result.bestmove is None:
        return None
    if any(info.has_score and info.depth != 0 and info.nodes != 0
           for info in result.infos.values()):
        return None  # a searched line among those already parsed: no need to read every line
    infos = [info for line in result.lines if (info := parse_info(line, None)) is not None]
    scored = [info for info in infos if info.has_score]
    if any(info.depth != 0 and info.nodes != 0 for info in scored):
        return None
    if scored:
        return f"depth 0 / nodes 0: {printable(scored[-1].raw, 80)}"
    about_book = [info.string for info in infos if info.string and "book" in info.string.lower()]
    if about_book:
        return f"info string {printable(about_book[-1], 80)}"
    return None


def parse_options(pairs: Iterable[str]) -> dict[str, str]:
    """``{"Threads": "1", "Hash": "64"}`` from ``["Threads=1", "Hash=64"]``.

    Names may contain spaces (``"Move Overhead=50"``); the value is what
    follows the first ``=`` and may be empty. A later pair overrides an
    earlier one with the same name.
    """
    options: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise BookgenError(f"bad engine option {pair!r}: expected NAME=VALUE "
                               "(for example Threads=1)")
        if "\n" in pair or "\r" in pair:
            raise BookgenError(f"bad engine option {pair!r}: contains a line break")
        options[name] = value.strip()
    return options


def evaluator_label(command: str) -> EngineLabel:
    """How a USI evaluator words its start errors (grow's and self-play's MCTS texts)."""
    return EngineLabel(f"USI engine {command!r}", f"cannot start USI engine {command!r}",
                       "{name}: gpsusi aborts on 'go nodes', 'go movetime' and 'go depth'; "
                       "use byoyomi instead", EvaluatorError)


def _score(info: InfoLine) -> int:
    """The score of a line that has one (``UsiEvaluator._lines`` keeps only those)."""
    score = info.score
    assert score is not None
    return score


def _softmax(scores: Sequence[float], temperature: float) -> list[float]:
    top = max(scores)
    weights = [math.exp((s - top) / temperature) for s in scores]
    total = sum(weights)
    return [w / total for w in weights]


class UsiEvaluator(EvaluatorBase):
    """Positions evaluated by a USI engine (see the module docstring).

    Limits: ``nodes``, ``byoyomi`` and ``movetime`` (milliseconds), ``depth``;
    with none of them, ``byoyomi`` 1000. ``timeout`` is the longest wait for
    one search in seconds (None: the time limit plus a margin, or 600 s for
    node- and depth-limited searches). The engine starts in the constructor;
    options it does not declare raise ``label.error`` (``EvaluatorError``
    with the words of :func:`evaluator_label` unless another label is
    given). ``mode``: see the module docstring.
    """

    def __init__(self, command: str, options: Mapping[str, str] | None = None,
                 nodes: int | None = None, byoyomi: int | None = None,
                 movetime: int | None = None, depth: int | None = None, multipv: int = 4,
                 multipv_margin: int = 100, max_multipv: int = 16, temperature: float = 100.0,
                 timeout: float | None = None, restarts: int = 3, coef: float = 756.0,
                 mode: AnalysisMode = "multipv-lines", label: EngineLabel | None = None) -> None:
        for name, value in (("nodes", nodes), ("byoyomi", byoyomi), ("movetime", movetime),
                            ("depth", depth)):
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise EvaluatorError(f"usi evaluator: {name} must be a positive integer, "
                                     f"not {value!r}")
        if multipv < 1 or max_multipv < 1:
            raise EvaluatorError("usi evaluator: multipv and max_multipv must be at least 1")
        if temperature <= 0:
            raise EvaluatorError("usi evaluator: temperature must be positive")
        if restarts < 0:
            raise EvaluatorError("usi evaluator: restarts must be 0 or more")
        if mode not in ("multipv-lines", "best-line"):
            raise EvaluatorError(f"usi evaluator: unknown mode {mode!r}")
        limits = SearchLimits(nodes, byoyomi, movetime, depth).or_default()
        self.spec = "usi:" + command
        self.command = command
        self.limits = limits
        self.multipv = multipv
        self.multipv_margin = multipv_margin
        self.max_multipv = max_multipv
        self.temperature = temperature
        self.timeout = timeout
        self.restarts = restarts
        self.policy = RestartPolicy(restarts)
        self.coef = coef
        self.mode = mode
        self.searches = 0
        self.warned_own_book = False
        self.closed = False
        self.engine: UsiEngine | None = None
        label = label or evaluator_label(command)
        self.engine = start_engine(command, options, limits, label,
                                   stop_grace_s=search_stop_grace(timeout))
        self.multipv_option = next(
            (o.name for o in self.engine.options.values() if o.name.lower() == "multipv"), None)
        if mode == "best-line":
            return  # usinewgame before every position
        try:
            self.engine.new_game()
        except UsiError as exc:
            self.close()
            raise label.failure(exc) from exc

    @property
    def engine_restarts(self) -> int:
        """How many times the engine has been restarted."""
        return self.engine.restarts if self.engine else 0

    def evaluate(self, boards: Sequence[cshogi.Board]) -> list[Evaluation]:
        """One engine analysis per board, in order."""
        return [self._evaluate_one(board) for board in boards]

    def close(self) -> None:
        """Quit the engine (killed if it does not quit within 2 s)."""
        self.closed = True
        if self.engine is not None:
            self.engine.close()

    # -- one position ------------------------------------------------------

    def _evaluate_one(self, board: cshogi.Board) -> Evaluation:
        if self.mode == "best-line":
            return self._best_line(board)
        legal = [cshogi.move_to_usi(m) for m in board.legal_moves]
        if not legal:
            return Evaluation(moves=[], priors=[], value=0.0, move_values=[], mate=0)
        if self.engine is None or self.closed:
            raise EvaluatorError(f"{self.spec}: the evaluator is closed")
        sfen = board.sfen()
        engine = self.engine
        try:
            evaluation, restarts = run_with_restarts(
                engine, lambda: self._analyse(sfen, legal), self.policy,
                retried=(UsiError, BadOutput), after_restart=engine.new_game)
        except _NoScore as book:
            raise EvaluatorError(f"USI {book} on sfen {sfen}") from None
        except EngineFailed as failed:
            raise EvaluatorError(
                f"USI engine {engine.name or self.command!r} failed {len(failed.errors)} times "
                f"on sfen {sfen} (restarted up to {self.restarts} times); last error: "
                f"{failed.last}") from None
        evaluation.restarts = restarts
        return evaluation

    # -- best-line mode ----------------------------------------------------

    def _best_line(self, board: cshogi.Board) -> Evaluation:
        if self.engine is None or self.closed:
            raise EvaluatorError(f"{self.spec}: the evaluator is closed")
        sfen = board.sfen()
        legal = {cshogi.move_to_usi(m) for m in board.legal_moves}
        try:
            evaluation, restarts = run_with_restarts(
                self.engine, lambda: self._search_best_line(sfen, board, legal), self.policy,
                retried=(UsiError, BadOutput), final=(_NoScore,))
        except EngineFailed as failed:
            error = str(failed.last) or type(failed.last).__name__
            raise PositionFailed(
                f"USI engine {self.engine.name or self.command!r} failed on sfen {sfen} "
                f"({len(failed.errors)} attempts, {failed.restarts} restarts); last error: "
                f"{error}", error, failed.restarts) from None
        evaluation.restarts = restarts
        return evaluation

    def _search_best_line(self, sfen: str, board: cshogi.Board, legal: set[str]) -> Evaluation:
        engine = self.engine
        assert engine is not None
        engine.new_game()
        result = self._search(sfen, legal)
        moves = [result.bestmove] if result.bestmove is not None else []
        priors = [1.0] * len(moves)
        info = self._last_scored(result)
        if info is None:
            if result.resign or result.win:
                score = MATE_VALUE if result.win else -MATE_VALUE
                return Evaluation(moves=moves, priors=priors, value=1.0 if result.win else 0.0,
                                  score=score, bound="exact", depth=None, nodes=result.nodes,
                                  bestmove=result.bestmove)
            hint = " (gpsusi: --engine-option BookDepth=0)" if is_gpsshogi(engine.name) else ""
            self._warn_own_book()
            raise _NoScore(f"engine {engine.name or self.command!r} answered bestmove "
                           f"{result.bestmove} without any score{hint}; it may be playing "
                           "from its own book")
        nodes = max(n for n in (info.nodes, result.nodes, 0) if n is not None)
        return Evaluation(moves=moves, priors=priors, value=self._value(info),
                          score=info.score, mate=info.mate, bound=info.bound or "exact",
                          depth=info.depth, seldepth=info.seldepth, nodes=nodes or None,
                          bestmove=result.bestmove, pv=legal_prefix(board, info.pv))

    def _last_scored(self, result: UsiSearch) -> InfoLine | None:
        """The last info line of the first PV that carried a score."""
        assert self.engine is not None
        for line in reversed(result.lines):
            if line.startswith("info"):
                info = parse_info(line, self.engine.mate_cp_threshold)
                if info is not None and info.multipv == 1 and info.has_score:
                    return info
        return None

    # -- multipv-lines mode ------------------------------------------------

    def _search(self, sfen: str, legal: set[str], k: int | None = None) -> UsiSearch:
        assert self.engine is not None
        if k is not None and self.multipv_option is not None:
            if self.engine.applied_options.get(self.multipv_option) != str(k):
                self.engine.setoption(self.multipv_option, k)
        self.engine.position(sfen)
        result = self.engine.go(**self.limits.go(), timeout=self.timeout)
        self.searches += 1
        if result.bestmove is None and not (result.resign or result.win):
            raise BadOutput(f"no bestmove in the engine's answer "
                             f"(last lines: {result.tail()})")
        if result.bestmove is not None and result.bestmove not in legal:
            raise BadOutput(f"illegal bestmove '{printable(result.bestmove, 40)}'")
        reason = book_answer(result)
        if reason is not None:
            self._warn_own_book()
            raise _NoScore(f"engine {self.engine.name or self.command!r} answered bestmove "
                           f"{result.bestmove} from its own book, not from a search "
                           f"({reason}); {self._book_hint()}")
        return result

    def _book_hint(self) -> str:
        """The options that turn the engine's own book off, as flags."""
        assert self.engine is not None
        if is_gpsshogi(self.engine.name):
            return "set --engine-option BookDepth=0"
        declared = {name.lower() for name in self.engine.options}
        offs = [off for off in ("USI_OwnBook=false", "BookFile=no_book")
                if off.split("=")[0].lower() in declared]
        return "set " + " or ".join(f"--engine-option {off}" for off in
                                    offs or ("USI_OwnBook=false", "BookFile=no_book"))

    def _warn_own_book(self) -> None:
        """Say once, on stderr, that the engine answers from its own book."""
        if self.warned_own_book:
            return
        self.warned_own_book = True
        assert self.engine is not None
        print(f"bookgen: engine {self.engine.name or self.command!r} answers from its own "
              f"book; its book moves are not stored as analyses ({self._book_hint()})",
              file=sys.stderr, flush=True)

    def _analyse(self, sfen: str, legal_list: list[str]) -> Evaluation:
        legal = set(legal_list)
        if self.multipv_option is None:
            return self._single(sfen, legal)
        k = min(self.multipv, self.max_multipv, len(legal))
        while True:
            result = self._search(sfen, legal, k)
            lines = self._lines(result, legal, k)
            if (len(lines) >= k and k < len(legal) and k < self.max_multipv
                    and _score(lines[0][1]) - _score(lines[-1][1]) <= self.multipv_margin):
                k = min(k + self.multipv, self.max_multipv, len(legal))
                continue
            break
        if not lines:
            return self._without_lines(result, sfen)
        best = lines[0][1]
        move_values = [self._value(info) for _move, info in lines]
        pvs = [legal_prefix(cshogi.Board(sfen), info.pv) for _move, info in lines]
        return Evaluation(
            moves=[move for move, _info in lines],
            priors=_softmax([_score(info) for _move, info in lines], self.temperature),
            value=move_values[0], move_values=move_values, depth=best.depth or 0,
            nodes=best.nodes or result.nodes or 0, mate=best.mate, pv=pvs[0],
            move_depths=[info.depth or 0 for _move, info in lines], move_pvs=pvs)

    def _lines(self, result: UsiSearch, legal: set[str], k: int
               ) -> list[tuple[str, InfoLine]]:
        """(first move, info) of each scored line, in multipv order."""
        lines: list[tuple[str, InfoLine]] = []
        seen: set[str] = set()
        for info in result.ranked():
            if info.multipv > k or not info.has_score or not info.pv:
                continue
            move = info.pv[0]
            if move not in legal:
                raise BadOutput(f"illegal move '{printable(move, 40)}' in PV {info.multipv}: "
                                 f"{printable(info.raw)}")
            if move not in seen:
                seen.add(move)
                lines.append((move, info))
        if not lines and result.bestmove is not None:
            best = result.best
            if best is not None and best.has_score:
                lines.append((result.bestmove, best))
        return lines

    def _single(self, sfen: str, legal: set[str]) -> Evaluation:
        result = self._search(sfen, legal)
        best = result.best
        move = result.bestmove
        if move is None and best is not None and best.pv and best.pv[0] in legal:
            move = best.pv[0]  # resigned, but told us its best try
        if move is None or best is None or not best.has_score:
            return self._without_lines(result, sfen)
        value = self._value(best)
        pv = legal_prefix(cshogi.Board(sfen), best.pv if best.pv[:1] == [move] else [move])
        return Evaluation(moves=[move], priors=[1.0], value=value, move_values=[value],
                          depth=best.depth or 0, nodes=best.nodes or result.nodes or 0,
                          mate=best.mate, pv=pv, move_depths=[best.depth or 0],
                          move_pvs=[pv])

    def _without_lines(self, result: UsiSearch, sfen: str) -> Evaluation:
        """A search that gave no scored move: resign, win, or a configuration problem."""
        best = result.best
        if result.resign or result.win:
            value = 1.0 if result.win else 0.0
            if best is not None and best.has_score:
                value = self._value(best)
            return Evaluation(moves=[], priors=[], value=value, move_values=[],
                              depth=best.depth or 0 if best else 0, nodes=result.nodes or 0,
                              mate=best.mate if best else None)
        hint = " (gpsusi: set BookDepth=0)" if self.engine and is_gpsshogi(
            self.engine.name) else ""
        self._warn_own_book()
        raise EvaluatorError(
            f"USI engine {self.engine.name if self.engine else self.command!r} answered "
            f"bestmove {result.bestmove} without any score on sfen {sfen}{hint}; "
            "it may be playing from its own book")

    def _value(self, info: InfoLine) -> float:
        if info.mate is not None:
            return 1.0 if info.mate > 0 else 0.0
        return cp_to_value(info.cp or 0, self.coef)
