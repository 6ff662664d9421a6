"""Ordo-style ratings of the players of a set of games (``bookgen rate``).

The model is Ordo's (M. A. Ballicora), as described in
``statistics.md`` of the shared reference:

- expected score ``E(d) = 1 / (1 + exp(-beta d))`` with ``beta = ln(0.76 / 0.24) /
  scale`` (default scale 202: a 202-point difference means a 76 % score);
- maximum-likelihood ratings: for every player the sum of its expected
  scores equals the points it scored (a draw is half a point);
- optionally a white advantage ``WA`` (white = sente = the first player,
  ``GameResult.black``) added to the first player's rating, fitted so that the
  total expected first-player score equals the observed one;
- optionally the draw rate between equal opponents ``Deq``: for an expected
  score ``p`` the draw probability is ``(sqrt(1 + 4 a p (1 - p)) - 1) / a``
  with ``a = (1 - 2 Deq) / Deq^2``; ``Deq`` is fitted so that the expected
  number of draws equals the observed one. It does not change the ratings,
  only the simulations (Ordo's default ``Deq`` of 50 % is used when it is
  not fitted, and ``WA`` is 0 when not fitted);
- errors by parametric bootstrap: every game is re-drawn from the fitted
  model, the ratings are refitted, and the standard deviations of every
  rating (relative to the pool average or the anchor) and of every pairwise
  difference are taken. ERROR is that SD times the two-sided normal quantile
  of the confidence (1.95996 at 95 %); CFS compares each row with the next
  one, ``100 Phi(diff / SD of the difference)``. Simulated data sets that
  cannot be refitted (disconnected, or separated so that the refit diverges)
  are left out and counted.

Everything works on per-(black, white) counts of wins, draws and losses;
the fit is a Newton iteration on the (concave) log-likelihood, batched over
simulations with numpy.

Perfect scores. A player who won (or lost) every game has an infinite
maximum-likelihood rating. As Ordo does, such players are taken out of the
fit and put back afterwards with a floor (``>``) or ceiling (``<``) rating:
the rating that would make their expected score equal their score with one
win turned into a draw (or one loss into a draw), the other players' ratings
held fixed. Taking players out can leave others with a perfect score among
the remaining ones; the removal is repeated until no such player is left,
and the players are put back from the last removed to the first, each
against the players already placed (the rule is applied to the games
against those players). When no player is left at all (say A beat B in every
game), the player with the most games among the last removed (the first
by name on a tie) is placed first at rating 0 before anchoring. The white advantage is fitted on the
games between the remaining (non-bounded) players.

Pools that cannot be rated are errors (:class:`BookgenError`): players not
connected by games at all, or groups of players that scored every point (or
none) against each other even after the perfect scores are taken out; the
message names the groups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special, stats
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from bookgen.errors import BookgenError, SettingsError
from bookgen.store.results import GameResult

__all__ = ["DEFAULT_SCALE", "Anchor", "PlayerRating", "RatingSettings", "RatingTable",
           "draw_probability", "expected_score", "fit_ratings", "head_to_head"]

DEFAULT_SCALE = 202.0
ORDO_DEFAULT_DRAW_RATE = 0.5
_LOGIT_76 = math.log(0.76 / 0.24)
_RESULT_CODES = {"black": 0, "draw": 1, "white": 2}
# Batched simulations use dense (sims, players, players) arrays; keep them
# at most this many floats per chunk.
_CHUNK_FLOATS = 2_000_000


SEPARATION_LOGITS = 20.0  # a refitted rating spread beyond this many logits is divergent


def beta_for(scale: float = DEFAULT_SCALE) -> float:
    """The logistic slope of Ordo's expected-score curve for ``scale``."""
    return _LOGIT_76 / scale


def expected_score(diff: float, scale: float = DEFAULT_SCALE) -> float:
    """Expected score of a player rated ``diff`` points above its opponent."""
    return float(special.expit(beta_for(scale) * diff))


def draw_probability(p: Any, draw_rate: Any) -> Any:
    """Ordo's draw probability for expected score ``p`` and equal-opponent draw rate.

    ``(sqrt(1 + 4 a p (1 - p)) - 1) / a`` with ``a = (1 - 2 Deq) / Deq^2``,
    written as ``4 p (1 - p) / (sqrt(1 + 4 a p (1 - p)) + 1)`` so that it stays
    exact at ``Deq = 1/2`` (``a = 0``). Works on numpy arrays (broadcast).
    """
    p = np.asarray(p, dtype=float)
    deq = np.asarray(draw_rate, dtype=float)
    q = p * (1.0 - p)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = (1.0 - 2.0 * deq) / (deq * deq)
        value = 4.0 * q / (np.sqrt(np.maximum(1.0 + 4.0 * a * q, 0.0)) + 1.0)
    return np.where(deq > 0.0, value, 0.0)


# --------------------------------------------------------------------------
# results


@dataclass
class PlayerRating:
    """One row of the table. ``rating`` is in Ordo points; ``error`` is the
    confidence half-width and ``cfs`` the confidence (%) that this player is
    stronger than the next row (None without simulations, and for the last
    row). ``bound`` is ``">"`` for a floor rating (100 % score), ``"<"`` for a
    ceiling (0 %), ``""`` otherwise."""

    name: str
    rating: float
    error: float | None
    points: float
    played: int
    cfs: float | None
    w: int
    d: int
    l: int  # noqa: E741 - Ordo's column name
    bound: str = ""

    @property
    def score(self) -> float:
        """Points per game (0..1)."""
        return self.points / self.played if self.played else 0.0

    @property
    def draw_share(self) -> float:
        return self.d / self.played if self.played else 0.0


@dataclass
class RatingTable:
    """The result of :func:`fit_ratings` (players best first)."""

    players: list[PlayerRating]
    white_advantage: float | None
    white_advantage_sd: float | None
    draw_rate: float | None
    draw_rate_sd: float | None
    scale: float
    confidence: float
    simulations: int
    pair_sd: dict[tuple[str, str], float] = field(default_factory=dict)
    anchor: str | None = None
    skipped_simulations: int = 0

    def rating_of(self, name: str) -> float:
        for player in self.players:
            if player.name == name:
                return player.rating
        raise KeyError(name)

    def as_json(self) -> dict[str, Any]:
        return {
            "players": [{"name": p.name, "rating": p.rating, "error": p.error,
                         "points": p.points, "played": p.played, "cfs": p.cfs,
                         "w": p.w, "d": p.d, "l": p.l} for p in self.players],
            "white_advantage": self.white_advantage,
            "white_advantage_sd": self.white_advantage_sd,
            "draw_rate": self.draw_rate,
            "draw_rate_sd": self.draw_rate_sd,
        }

    def format_text(self) -> str:
        """Ordo's text table (rating, error and points with one decimal)."""
        name_width = max([len("PLAYER")] + [len(p.name) for p in self.players])
        count_width = max([4] + [len(str(max(p.w, p.d, p.l))) for p in self.players]) + 1
        header = (f"{'#':>4} {'PLAYER':<{name_width}} :{'RATING':>8}{'ERROR':>7}"
                  f"{'POINTS':>8}{'PLAYED':>8}{'(%)':>6}{'CFS(%)':>8}"
                  f"{'W':>{count_width}}{'D':>{count_width}}{'L':>{count_width}}{'D(%)':>6}")
        lines = [header]
        last = len(self.players) - 1
        for rank, p in enumerate(self.players, 1):
            rating = f"{p.bound}{p.rating:.1f}"
            error = "----" if p.error is None else f"{p.error:.1f}"
            if rank - 1 == last:
                cfs = "---"
            else:
                cfs = "----" if p.cfs is None else str(_round_half_up(p.cfs))
            lines.append(
                f"{rank:>4} {p.name:<{name_width}} :{rating:>8}{error:>7}{p.points:>8.1f}"
                f"{p.played:>8}{_round_half_up(100 * p.score):>6}{cfs:>8}"
                f"{p.w:>{count_width}}{p.d:>{count_width}}{p.l:>{count_width}}"
                f"{_round_half_up(100 * p.draw_share):>6}")
        if self.white_advantage is not None:
            sd = "" if self.white_advantage_sd is None else f" +/- {self.white_advantage_sd:.2f}"
            lines.append(f"White advantage = {self.white_advantage:.2f}{sd}")
        if self.draw_rate is not None:
            sd = "" if self.draw_rate_sd is None else f" +/- {100 * self.draw_rate_sd:.2f}"
            lines.append(f"Draw rate (equal opponents) = {100 * self.draw_rate:.2f} %{sd}")
        if self.skipped_simulations:
            lines.append(f"({self.skipped_simulations} of {self.simulations} simulations "
                         "could not be refitted and were left out of the errors)")
        return "\n".join(lines) + "\n"


def _round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


# --------------------------------------------------------------------------
# aggregation


@dataclass
class _Cells:
    """Games aggregated per (black, white) pair; players sorted by name."""

    names: list[str]
    black: np.ndarray  # (C,) player index of the first player (sente)
    white: np.ndarray
    wdl: np.ndarray  # (C, 3): first-player wins, draws, first-player losses

    @property
    def n(self) -> np.ndarray:
        return self.wdl.sum(axis=1).astype(float)

    @property
    def s(self) -> np.ndarray:
        """First-player points per cell."""
        return self.wdl[:, 0] + 0.5 * self.wdl[:, 1]

    def player_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(wins, draws, losses) per player."""
        count = len(self.names)
        wins = (np.bincount(self.black, self.wdl[:, 0], count)
                + np.bincount(self.white, self.wdl[:, 2], count))
        draws = (np.bincount(self.black, self.wdl[:, 1], count)
                 + np.bincount(self.white, self.wdl[:, 1], count))
        losses = (np.bincount(self.black, self.wdl[:, 2], count)
                  + np.bincount(self.white, self.wdl[:, 0], count))
        return wins.astype(int), draws.astype(int), losses.astype(int)


def _aggregate(games: Sequence[GameResult]) -> _Cells:
    if not games:
        raise BookgenError("no games to rate")
    for number, game in enumerate(games, 1):
        if game.black == game.white:
            where = f" ({game.source})" if game.source else ""
            raise BookgenError(f"game {number}{where}: {game.black!r} played itself")
        if game.result not in _RESULT_CODES:
            raise BookgenError(f"game {number}: unknown result {game.result!r}")
    names = sorted({g.black for g in games} | {g.white for g in games})
    index = {name: i for i, name in enumerate(names)}
    count = len(names)
    black = np.fromiter((index[g.black] for g in games), np.int64, len(games))
    white = np.fromiter((index[g.white] for g in games), np.int64, len(games))
    result = np.fromiter((_RESULT_CODES[g.result] for g in games), np.int64, len(games))
    pair = black * count + white
    cells, inverse = np.unique(pair, return_inverse=True)
    wdl = np.zeros((len(cells), 3), dtype=np.int64)
    np.add.at(wdl, (inverse, result), 1)
    return _Cells(names, cells // count, cells % count, wdl)


# --------------------------------------------------------------------------
# graph checks


def _group_text(names: Sequence[str], members: np.ndarray, limit: int = 8) -> str:
    shown = [names[i] for i in members[:limit]]
    more = f", ... ({len(members)} players)" if len(members) > limit else ""
    return "{" + ", ".join(shown) + more + "}"


def _components(count: int, black: np.ndarray, white: np.ndarray, *,
                directed_edges: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[int, np.ndarray]:
    if directed_edges is None:
        rows, cols = black, white
        graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(count, count))
        return connected_components(graph, directed=False)
    rows, cols = directed_edges
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(count, count))
    return connected_components(graph, directed=True, connection="strong")


def _score_edges(black: np.ndarray, white: np.ndarray, n: np.ndarray, s: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Edges i -> j where i scored some points against j."""
    forward = s > 0
    backward = s < n
    rows = np.concatenate([black[forward], white[backward]])
    cols = np.concatenate([white[forward], black[backward]])
    return rows, cols


def _strongly_connected(count: int, black: np.ndarray, white: np.ndarray, n: np.ndarray,
                        s: np.ndarray) -> bool:
    if count <= 1:
        return True
    found, _ = _components(count, black, white, directed_edges=_score_edges(black, white, n, s))
    return found == 1


# --------------------------------------------------------------------------
# the fit


def _newton(count: int, black: np.ndarray, white: np.ndarray, n: np.ndarray, s: np.ndarray,
            *, fit_wa: bool, wa: np.ndarray, max_iter: int = 100
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximum-likelihood ratings (in units of 1/beta) for a batch of data sets.

    ``n`` and ``s`` are (sims, cells) games and first-player points. The last
    player is held at 0 (the gauge). Returns (ratings (sims, players), white
    advantage (sims,), converged (sims,)). Assumes every data set has a
    finite maximum (strongly connected results).
    """
    sims = n.shape[0]
    u = np.zeros((sims, count))
    wa = np.array(np.broadcast_to(np.asarray(wa, dtype=float), (sims,)))
    if count <= 1 and not fit_wa:
        return u, wa, np.ones(sims, dtype=bool)
    flat = black * count + white
    free = count - 1
    size = free + (1 if fit_wa else 0)
    diagonal = np.arange(count)
    totals = n.sum(axis=1)
    tolerance = 1e-12 * (1.0 + totals)

    def loglik(u: np.ndarray, wa: np.ndarray) -> np.ndarray:
        x = u[:, black] - u[:, white] + wa[:, None]
        return (s * x - n * np.logaddexp(0.0, x)).sum(axis=1)

    def scatter(values: np.ndarray) -> np.ndarray:
        dense = np.zeros((sims, count * count))
        dense[:, flat] = values
        return dense.reshape(sims, count, count)

    current = loglik(u, wa)
    worst = np.full(sims, np.inf)
    for _ in range(max_iter):
        p = special.expit(u[:, black] - u[:, white] + wa[:, None])
        residual = s - n * p
        weight = n * p * (1.0 - p)
        r = scatter(residual)
        grad_u = r.sum(axis=2) - r.sum(axis=1)
        h = scatter(weight)
        symmetric = h + h.transpose(0, 2, 1)
        jacobian = np.zeros((sims, size, size))
        laplacian = -symmetric
        laplacian[:, diagonal, diagonal] += symmetric.sum(axis=2)
        jacobian[:, :free, :free] = laplacian[:, :free, :free]
        gradient = np.zeros((sims, size))
        gradient[:, :free] = grad_u[:, :free]
        worst = np.abs(grad_u).max(axis=1)
        if fit_wa:
            cross = h.sum(axis=2) - h.sum(axis=1)
            jacobian[:, free, :free] = cross[:, :free]
            jacobian[:, :free, free] = cross[:, :free]
            jacobian[:, free, free] = weight.sum(axis=1)
            gradient[:, free] = residual.sum(axis=1)
            worst = np.maximum(worst, np.abs(gradient[:, free]))
        done = worst <= tolerance
        if done.all():
            break
        step = _solve_batch(jacobian, gradient)
        step[done] = 0.0
        du = np.zeros((sims, count))
        du[:, :free] = step[:, :free]
        dwa = step[:, free] if fit_wa else np.zeros(sims)
        t = np.ones(sims)
        for _ in range(60):
            trial_u = u + t[:, None] * du
            trial_wa = wa + t * dwa
            trial = loglik(trial_u, trial_wa)
            bad = ~(trial >= current - 1e-13 * (1.0 + np.abs(current)))
            if not bad.any():
                break
            t = np.where(bad, t / 2, t)
        u, wa, current = trial_u, trial_wa, trial
        if (np.abs(t[:, None] * step) <= 1e-15 * (1.0 + np.abs(u).max())).all():
            break
    converged = worst <= 1e-7 * (1.0 + totals)
    return u, wa, converged


def _solve_batch(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    try:
        return np.linalg.solve(matrix, vector[..., None])[..., 0]
    except np.linalg.LinAlgError:
        out = np.zeros_like(vector)
        for i in range(matrix.shape[0]):
            try:
                out[i] = np.linalg.solve(matrix[i], vector[i])
            except np.linalg.LinAlgError:
                out[i] = np.linalg.lstsq(matrix[i], vector[i], rcond=None)[0]
        return out


def _place(target: float, offsets: np.ndarray, n: np.ndarray) -> float:
    """The rating t with sum n * expit(t + offsets) = target (0 < target < sum n)."""

    def excess(t: float) -> float:
        return float((n * special.expit(t + offsets)).sum() - target)

    low, high = float(-offsets.max()) - 1.0, float(-offsets.min()) + 1.0
    while excess(low) > 0:
        low -= 2 * (high - low)
    while excess(high) < 0:
        high += 2 * (high - low)
    return float(optimize.brentq(excess, low, high, xtol=1e-14, rtol=1e-15, maxiter=500))


def _solve(cells_black: np.ndarray, cells_white: np.ndarray, n: np.ndarray, s: np.ndarray,
           names: Sequence[str], *, fit_wa: bool
           ) -> tuple[np.ndarray, float, np.ndarray]:
    """Ratings (1/beta units, arbitrary origin), white advantage and bound codes
    (+1 floor, -1 ceiling, 0) of one data set, perfect scores handled as
    described in the module docstring. Raises BookgenError when the pool
    cannot be rated."""
    count = len(names)
    black, white = cells_black, cells_white
    played = n > 0
    black, white, n, s = black[played], white[played], n[played], s[played]
    found, labels = _components(count, black, white)
    if found > 1:
        groups = "; ".join(f"group {k + 1}: {_group_text(names, np.flatnonzero(labels == k))}"
                           for k in range(found))
        raise BookgenError(f"the games do not connect all players ({groups}); ratings of "
                           "unconnected groups cannot be compared: rate them separately or "
                           "add games between them")

    remaining = np.ones(count, dtype=bool)
    levels: list[tuple[np.ndarray, np.ndarray]] = []
    while True:
        inside = remaining[black] & remaining[white]
        games = (np.bincount(black[inside], n[inside], count)
                 + np.bincount(white[inside], n[inside], count))
        points = (np.bincount(black[inside], s[inside], count)
                  + np.bincount(white[inside], (n - s)[inside], count))
        perfect = remaining & (games > 0) & ((points <= 0) | (points >= games))
        if not perfect.any():
            break
        members = np.flatnonzero(perfect)
        levels.append((members, np.where(points[members] > 0, 1, -1)))
        remaining &= ~perfect

    core = np.flatnonzero(remaining)
    u = np.zeros(count)
    wa = 0.0
    in_core = remaining[black] & remaining[white]
    if len(core) >= 2:
        local = np.full(count, -1)
        local[core] = np.arange(len(core))
        cb, cw, cn, cs = local[black[in_core]], local[white[in_core]], n[in_core], s[in_core]
        found, labels = _components(len(core), cb, cw,
                                    directed_edges=_score_edges(cb, cw, cn, cs))
        if found > 1:
            groups = ", ".join(_group_text(names, core[labels == k]) for k in range(found))
            raise BookgenError(
                f"the ratings are unbounded: the players split into groups {groups} where "
                "one group scored every point (or none) against another"
                + (" once the players with perfect scores are set aside" if levels else "")
                + "; add games that connect them")
        if fit_wa:
            _check_white_advantage(len(core), cb, cw, cn, cs)
        local_u, local_wa, converged = _newton(len(core), cb, cw, cn[None, :], cs[None, :],
                                               fit_wa=fit_wa, wa=np.zeros(1))
        if not converged[0]:
            raise BookgenError("the rating fit did not converge")
        u[core] = local_u[0]
        wa = float(local_wa[0])
    elif fit_wa:
        raise BookgenError("cannot fit the white advantage: every player has a perfect score "
                           "against the rest, so no games are left to fit it on")

    bounds = np.zeros(count, dtype=np.int8)
    placed = remaining.copy()
    for members, kinds in reversed(levels):
        bounds[members] = kinds
        pending = set(members.tolist())
        kind_of = dict(zip(members.tolist(), kinds.tolist()))
        if not placed.any():
            inside = np.isin(black, members) & np.isin(white, members)
            games = (np.bincount(black[inside], n[inside], count)
                     + np.bincount(white[inside], n[inside], count))
            seed = int(members[np.argmax(games[members])])
            placed[seed] = True
            pending.discard(seed)
        while pending:
            ready: list[tuple[int, float]] = []
            for player in sorted(pending):
                as_black = (black == player) & placed[white]
                as_white = (white == player) & placed[black]
                if not (as_black.any() or as_white.any()):
                    continue
                offsets = np.concatenate([wa - u[white[as_black]], -wa - u[black[as_white]]])
                games = np.concatenate([n[as_black], n[as_white]])
                points = s[as_black].sum() + (n - s)[as_white].sum()
                target = points - 0.5 * kind_of[player]
                ready.append((player, _place(target, offsets, games)))
            if not ready:
                raise BookgenError("cannot place the players with perfect scores: "
                                   + _group_text(names, np.array(sorted(pending))))
            for player, rating in ready:
                u[player] = rating
                placed[player] = True
                pending.discard(player)
    return u, wa, bounds


def _check_white_advantage(count: int, black: np.ndarray, white: np.ndarray, n: np.ndarray,
                           s: np.ndarray) -> None:
    first, total = float(s.sum()), float(n.sum())
    if first <= 0 or first >= total:
        who = "sente lost" if first <= 0 else "sente won"
        raise BookgenError(f"cannot fit the white advantage: {who} every game")
    design = np.zeros((len(black), count + 1))
    rows = np.arange(len(black))
    design[rows, black] += 1.0
    design[rows, white] -= 1.0
    design[:, count] = 1.0
    if np.linalg.matrix_rank(design) < count:
        raise BookgenError("cannot fit the white advantage: the colours are not varied enough "
                           "to tell it apart from the ratings (each pairing was played with "
                           "the same player as sente)")


def _fit_draw_rate(p: np.ndarray, n: np.ndarray, draws: float) -> float:
    """Deq with sum n * D(p, Deq) = draws (clipped to [0, 1])."""
    if draws <= 0:
        return 0.0

    def excess(deq: float) -> float:
        return float((n * draw_probability(p, deq)).sum() - draws)

    if excess(1.0) <= 0:
        return 1.0
    return float(optimize.brentq(excess, 1e-12, 1.0, xtol=1e-16, rtol=1e-15, maxiter=500))


def _fit_draw_rates(p: np.ndarray, n: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Vectorised bisection of Deq for a batch ((sims, cells) p, (cells,) n, (sims,) draws)."""
    low = np.zeros(len(draws))
    high = np.ones(len(draws))
    at_one = (n * draw_probability(p, 1.0)).sum(axis=1)
    for _ in range(64):
        middle = (low + high) / 2
        expected = (n * draw_probability(p, middle[:, None])).sum(axis=1)
        above = expected > draws
        high = np.where(above, middle, high)
        low = np.where(above, low, middle)
    result = (low + high) / 2
    result = np.where(draws <= 0, 0.0, result)
    return np.where((draws > 0) & (at_one <= draws), 1.0, result)


def _anchor_shift(ratings: np.ndarray, anchor_index: int | None, anchor_rating: float,
                  average: float) -> np.ndarray:
    """Ratings shifted so that the anchor (or the pool mean) sits where asked."""
    if anchor_index is not None:
        return ratings + (anchor_rating - ratings[..., anchor_index])[..., None]
    return ratings + (average - ratings.mean(axis=-1))[..., None]


@dataclass(frozen=True)
class Anchor:
    """A player whose rating is fixed (instead of the pool average)."""

    name: str
    rating: float = 0.0


@dataclass(frozen=True)
class RatingSettings:
    """Ordo's fit (see the module docstring): ``fit_white_advantage`` and
    ``fit_draw_rate`` fit WA and Deq (Ordo's ``-W`` and ``-D``); ``simulations``
    (``-s``; 0 or at least 2) runs the parametric bootstrap from ``seed``, which
    fills the errors, CFS and the footer's SDs. The pool mean is ``average``
    unless ``anchor`` fixes a player. ``scale``: the rating difference of a 76 %
    expected score; ``confidence_percent``: of the error margins."""

    fit_white_advantage: bool = False
    fit_draw_rate: bool = False
    simulations: int = 0
    average: float = 0.0
    anchor: Anchor | None = None
    scale: float = DEFAULT_SCALE
    confidence_percent: float = 95.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise SettingsError("scale", f"must be positive (got {self.scale})")
        if not 0 < self.confidence_percent < 100:
            raise SettingsError("confidence_percent", "must be between 0 and 100 % (got "
                                f"{self.confidence_percent})")
        if self.simulations < 0 or self.simulations == 1:
            raise SettingsError("simulations", "must be 0 or at least 2 (a standard deviation "
                                f"needs two samples; got {self.simulations})")


def fit_ratings(games: Sequence[GameResult], settings: RatingSettings | None = None
                ) -> RatingTable:
    """Ordo ratings of the players of ``games`` (see the module docstring and
    :class:`RatingSettings`; None: the defaults). Players are indexed by sorted
    name and games are aggregated, so the result does not depend on the order of
    the games."""
    settings = settings if settings is not None else RatingSettings()
    white_advantage, draw_rate = settings.fit_white_advantage, settings.fit_draw_rate
    simulations, average, seed = settings.simulations, settings.average, settings.seed
    scale, confidence = settings.scale, settings.confidence_percent
    anchor = settings.anchor.name if settings.anchor is not None else None
    anchor_rating = settings.anchor.rating if settings.anchor is not None else 0.0
    cells = _aggregate(games)
    names = cells.names
    if len(names) < 2:
        raise BookgenError("need games between at least two players")
    anchor_index: int | None = None
    if anchor is not None:
        if anchor not in names:
            raise BookgenError(f"anchor {anchor!r} played no game (players: "
                               f"{', '.join(names[:20])}{', ...' if len(names) > 20 else ''})")
        anchor_index = names.index(anchor)
    beta = beta_for(scale)
    n, s = cells.n, cells.s
    u, wa_u, bounds = _solve(cells.black, cells.white, n, s, names, fit_wa=white_advantage)
    ratings = _anchor_shift(u / beta, anchor_index, anchor_rating, average)
    p = special.expit(u[cells.black] - u[cells.white] + wa_u)
    deq = _fit_draw_rate(p, n, float(cells.wdl[:, 1].sum())) if draw_rate else None

    errors: np.ndarray | None = None
    pair_sd_matrix: np.ndarray | None = None
    wa_sd: float | None = None
    deq_sd: float | None = None
    skipped = 0
    if simulations:
        sim_ratings, sim_wa, sim_deq, skipped = _simulate(
            cells, u, wa_u, ORDO_DEFAULT_DRAW_RATE if deq is None else deq,
            fit_wa=white_advantage, fit_deq=draw_rate, simulations=simulations, seed=seed)
        sim_ratings = _anchor_shift(sim_ratings / beta, anchor_index, anchor_rating, average)
        errors = sim_ratings.std(axis=0, ddof=1) * stats.norm.ppf(0.5 + confidence / 200)
        covariance = np.atleast_2d(np.cov(sim_ratings, rowvar=False))
        variance = np.diag(covariance)
        pair_sd_matrix = np.sqrt(np.maximum(
            variance[:, None] + variance[None, :] - 2 * covariance, 0.0))
        if white_advantage:
            wa_sd = float((sim_wa / beta).std(ddof=1))
        if draw_rate:
            deq_sd = float(sim_deq.std(ddof=1))

    wins, draws, losses = cells.player_counts()
    order = sorted(range(len(names)),
                   key=lambda i: (-ratings[i], -(wins[i] + draws[i] / 2), names[i]))
    players: list[PlayerRating] = []
    for position, i in enumerate(order):
        cfs = None
        if pair_sd_matrix is not None and position + 1 < len(order):
            j = order[position + 1]
            diff, sd = ratings[i] - ratings[j], pair_sd_matrix[i, j]
            cfs = float(100 * stats.norm.cdf(diff / sd)) if sd > 0 else (
                50.0 if diff == 0 else 100.0)
        players.append(PlayerRating(
            name=names[i], rating=float(ratings[i]),
            error=None if errors is None else float(errors[i]),
            points=float(wins[i] + draws[i] / 2), played=int(wins[i] + draws[i] + losses[i]),
            cfs=cfs, w=int(wins[i]), d=int(draws[i]), l=int(losses[i]),
            bound={1: ">", -1: "<"}.get(int(bounds[i]), "")))
    pair_sd: dict[tuple[str, str], float] = {}
    if pair_sd_matrix is not None:
        pair_sd = {(names[i], names[j]): float(pair_sd_matrix[i, j])
                   for i in range(len(names)) for j in range(len(names)) if i != j}
    return RatingTable(
        players=players,
        white_advantage=float(wa_u / beta) if white_advantage else None,
        white_advantage_sd=wa_sd, draw_rate=deq, draw_rate_sd=deq_sd, scale=scale,
        confidence=confidence, simulations=simulations, pair_sd=pair_sd, anchor=anchor,
        skipped_simulations=skipped)


# --------------------------------------------------------------------------
# simulations


def _simulate(cells: _Cells, u: np.ndarray, wa: float, deq: float, *, fit_wa: bool,
              fit_deq: bool, simulations: int, seed: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Refitted ratings (1/beta units, arbitrary origin per row), WA and Deq of
    ``simulations`` data sets drawn from the fitted model; rows that cannot be
    refitted are dropped (their number is returned)."""
    count = len(cells.names)
    black, white, n = cells.black, cells.white, cells.n
    p = special.expit(u[black] - u[white] + wa)
    d = draw_probability(p, deq)
    probabilities = np.stack([p - d / 2, d, 1 - p - d / 2], axis=1)
    probabilities = np.clip(probabilities, 0.0, None)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(cells.wdl.sum(axis=1), probabilities, size=(simulations, len(n)))
    sim_s = counts[:, :, 0] + 0.5 * counts[:, :, 1]
    sim_n = np.broadcast_to(n, sim_s.shape)

    # The batched Newton needs results where every player scored against every
    # other one through some chain (strongly connected); most data sets are.
    one_sided = ((sim_s <= 0) | (sim_s >= sim_n)).any(axis=1)
    fast = np.ones(simulations, dtype=bool)
    for k in np.flatnonzero(one_sided):
        fast[k] = _strongly_connected(count, black, white, n, sim_s[k])
    if fit_wa:
        first = sim_s.sum(axis=1)
        fast &= (first > 0) & (first < n.sum())

    ratings = np.zeros((simulations, count))
    advantages = np.full(simulations, wa if not fit_wa else 0.0)
    usable = np.ones(simulations, dtype=bool)
    chunk = max(1, _CHUNK_FLOATS // (count * count))
    fast_rows = np.flatnonzero(fast)
    for start in range(0, len(fast_rows), chunk):
        rows = fast_rows[start:start + chunk]
        batch_u, batch_wa, converged = _newton(
            count, black, white, sim_n[rows], sim_s[rows], fit_wa=fit_wa,
            wa=np.full(len(rows), 0.0 if fit_wa else wa))
        ratings[rows] = batch_u
        advantages[rows] = batch_wa
        fast[rows[~converged]] = False
    for k in np.flatnonzero(~fast):
        try:
            sim_u, sim_wa, _ = _solve(black, white, n, sim_s[k], cells.names, fit_wa=fit_wa)
        except BookgenError:
            usable[k] = False
            continue
        ratings[k] = sim_u
        advantages[k] = sim_wa if fit_wa else wa
    # Separated data (say, a player who won every game as black and lost every
    # game as white, with the advantage fitted) has its maximum likelihood at
    # infinity; Newton stops somewhere huge. Such a refit is no refit: a spread
    # of SEPARATION_LOGITS means odds of e^-20, which no real pool shows.
    spread = np.ptp(ratings, axis=1) if count > 1 else np.zeros(simulations)
    usable &= (spread < SEPARATION_LOGITS) & (np.abs(advantages) < SEPARATION_LOGITS)
    skipped = int((~usable).sum())
    if simulations - skipped < 2:
        raise BookgenError(f"only {simulations - skipped} of {simulations} simulations could "
                           "be refitted (too few games?); no errors can be computed")
    ratings, advantages, counts = ratings[usable], advantages[usable], counts[usable]
    rates = np.zeros(len(ratings))
    if fit_deq:
        sim_p = special.expit(ratings[:, black] - ratings[:, white] + advantages[:, None])
        rates = _fit_draw_rates(sim_p, n, counts[:, :, 1].sum(axis=1).astype(float))
    return ratings, advantages, rates, skipped


# --------------------------------------------------------------------------
# head to head


def head_to_head(games: Sequence[GameResult],
                 ratings: RatingTable | Mapping[str, float] | None = None
                 ) -> list[dict[str, Any]]:
    """Results per ordered pair (player, opponent), from the player's side.

    Each row: ``player``, ``opponent``, ``w``, ``d``, ``l``, ``points``,
    ``played`` and ``rating_diff`` (player minus opponent, from ``ratings``:
    a :class:`RatingTable`, a name -> rating mapping, or None to fit a
    default Ordo table). Rows follow the rating order, then the opponent's.
    """
    cells = _aggregate(games)
    if ratings is None:
        ratings = fit_ratings(games)
    if isinstance(ratings, RatingTable):
        by_name = {p.name: p.rating for p in ratings.players}
    else:
        by_name = dict(ratings)
    missing = [name for name in cells.names if name not in by_name]
    if missing:
        raise BookgenError(f"no rating for {', '.join(missing)}")
    totals: dict[tuple[str, str], list[int]] = {}
    for (b, w), (win, draw, loss) in zip(zip(cells.black, cells.white), cells.wdl):
        first, second = cells.names[b], cells.names[w]
        row = totals.setdefault((first, second), [0, 0, 0])
        row[0] += int(win)
        row[1] += int(draw)
        row[2] += int(loss)
        row = totals.setdefault((second, first), [0, 0, 0])
        row[0] += int(loss)
        row[1] += int(draw)
        row[2] += int(win)
    rank = {name: (-by_name[name], name) for name in cells.names}
    rows = []
    for (player, opponent), (win, draw, loss) in sorted(
            totals.items(), key=lambda item: (rank[item[0][0]], rank[item[0][1]])):
        rows.append({"player": player, "opponent": opponent, "w": win, "d": draw, "l": loss,
                     "points": win + draw / 2, "played": win + draw + loss,
                     "rating_diff": by_name[player] - by_name[opponent]})
    return rows
