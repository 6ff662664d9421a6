"""BayesElo ratings (R. Coulom's ``bayeselo``), the ``--model bayeselo`` of ``bookgen rate``.

Model (``statistics.md`` of the shared reference), with ``f(x) = 1 / (1 +
10^(x / 400))`` and ``d = R_first - R_second`` (the first player is sente,
``GameResult.black``, PGN "White")::

    P(first wins)  = f(-d - adv + drawElo)
    P(first loses) = f( d + adv + drawElo)
    P(draw)        = 1 - the two

``adv`` (default 32.8) and ``drawElo`` (default 97.3) are fixed, or fitted
by maximum likelihood when given as None. The prior adds virtual draws as
bayeselo's ``prior`` command does (default 2): for every player ``i`` and
every opponent ``j`` it met, ``prior / 4 * games(i, j) / games(i)`` draws
with ``i`` first and as many with ``j`` first, so that each player brings
``prior / 2`` virtual draws of its own, spread over its opponents in
proportion to the games played; the draws added from both players' sides of
a pairing add up.

The maximum of the posterior is found by Newton's method on the (concave)
log-likelihood instead of bayeselo's minorization-maximization; both reach
the same point. Ratings are centred on 0 (then shifted by ``average`` or
``anchor``) and displayed scaled by ``4x / (1 + x)^2`` with ``x =
10^(-drawElo / 400)``, as bayeselo does. The covariance matrix is the
inverse of the negative Hessian of the log-likelihood in the ratings
(``adv`` and ``drawElo`` held at their values), projected onto centred
ratings; the likelihood of superiority is ``Phi((r_i - r_j) / sqrt(C_ii +
C_jj - 2 C_ij))`` and the error margins are symmetric: the normal quantile of
the confidence times ``sqrt(C_ii)`` (bayeselo's ``covariance`` command; its
``exactdist`` asymmetric intervals are not implemented).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special, stats

from bookgen.analysis.ratings import (
    Anchor,
    _aggregate,
    _components,
    _group_text,
    _score_edges,
)
from bookgen.errors import BookgenError, SettingsError
from bookgen.store.results import GameResult

__all__ = ["BayesEloPlayer", "BayesEloSettings", "BayesEloTable", "display_scale",
           "fit_bayeselo"]

DEFAULT_ADVANTAGE = 32.8
DEFAULT_DRAW_ELO = 97.3
DEFAULT_PRIOR = 2.0
_K = math.log(10.0) / 400.0  # natural-log slope of f


def display_scale(draw_elo: float) -> float:
    """bayeselo's rating scale ``4x / (1 + x)^2`` with ``x = 10^(-drawElo / 400)``."""
    x = 10.0 ** (-draw_elo / 400.0)
    return 4.0 * x / (1.0 + x) ** 2


@dataclass
class BayesEloPlayer:
    """One row: ``rating`` and the margins ``plus``/``minus`` are in displayed
    (scaled) Elo; ``opponents`` is the games-weighted mean displayed rating of
    the opponents."""

    name: str
    rating: float
    plus: float
    minus: float
    points: float
    played: int
    w: int
    d: int
    l: int  # noqa: E741
    opponents: float

    @property
    def score(self) -> float:
        return self.points / self.played if self.played else 0.0


@dataclass
class BayesEloTable:
    """The result of :func:`fit_bayeselo` (players best first)."""

    players: list[BayesEloPlayer]
    los: dict[tuple[str, str], float]
    advantage: float
    draw_elo: float
    advantage_fitted: bool
    draw_elo_fitted: bool
    prior: float
    scale: float
    confidence: float
    covariance: dict[tuple[str, str], float] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "players": [{"name": p.name, "rating": p.rating, "plus": p.plus, "minus": p.minus,
                         "points": p.points, "played": p.played, "w": p.w, "d": p.d, "l": p.l,
                         "opponents": p.opponents} for p in self.players],
            "advantage": self.advantage,
            "draw_elo": self.draw_elo,
            "prior": self.prior,
            "scale": self.scale,
            "los": {a.name: {b.name: self.los[(a.name, b.name)]
                             for b in self.players if b.name != a.name}
                    for a in self.players},
        }

    def format_text(self, *, los_matrix: bool = True) -> str:
        """bayeselo's ``ratings`` table, then its ``los`` matrix (in %)."""
        width = max([len("Name")] + [len(p.name) for p in self.players])
        lines = [f"Rank {'Name':<{width}} {'Elo':>6} {'+':>4} {'-':>4} {'games':>6} "
                 f"{'score':>5} {'oppo.':>6} {'draws':>5}"]
        for rank, p in enumerate(self.players, 1):
            draws = 100 * p.d / p.played if p.played else 0.0
            lines.append(f"{rank:>4} {p.name:<{width}} {p.rating:>6.0f} {p.plus:>4.0f} "
                         f"{p.minus:>4.0f} {p.played:>6} {100 * p.score:>4.0f}% "
                         f"{p.opponents:>6.0f} {draws:>4.0f}%")
        fitted_a = " (fitted)" if self.advantage_fitted else ""
        fitted_d = " (fitted)" if self.draw_elo_fitted else ""
        lines.append(f"advantage = {self.advantage:.1f}{fitted_a}, "
                     f"drawElo = {self.draw_elo:.1f}{fitted_d}, prior = {self.prior:g}, "
                     f"scale = {self.scale:.4f}, margins at {self.confidence:g} %")
        if los_matrix and len(self.players) > 1:
            short = [p.name[:2] for p in self.players]
            lines.append("")
            lines.append("Likelihood of superiority (%):")
            lines.append(" " * (width + 1) + " ".join(f"{s:>3}" for s in short))
            for a in self.players:
                cells = ["   " if a.name == b.name
                         else f"{math.floor(100 * self.los[(a.name, b.name)]):>3}"
                         for b in self.players]
                lines.append(f"{a.name:<{width}} " + " ".join(cells))
        return "\n".join(lines) + "\n"


def _loglik_terms(x: np.ndarray, delta: float, w: np.ndarray, d: np.ndarray, lost: np.ndarray
                  ) -> float:
    """Log-likelihood of the counts for ``x = k (d + adv)`` and ``delta = k drawElo``.

    log P(win) = (x - delta) - softplus(x - delta); log P(loss) = -softplus(x + delta);
    log P(draw) = log(2 sinh delta) + x - softplus(x - delta) - softplus(x + delta).
    """
    minus, plus = np.logaddexp(0.0, x - delta), np.logaddexp(0.0, x + delta)
    value = (w * (x - delta) - (w + d) * minus - (lost + d) * plus + d * x).sum()
    draws = d.sum()
    if draws > 0:
        value += draws * math.log(2.0 * math.sinh(delta))
    return float(value)


@dataclass(frozen=True)
class BayesEloSettings:
    """BayesElo's fit (see the module docstring): the white (first player)
    ``advantage_elo`` and the ``draw_elo``, each fitted when None; the virtual
    draws of the prior (``prior_draws``); ``confidence_percent`` of the margins.
    The centred ratings are shifted so that their mean is ``average``, or so that
    ``anchor`` is at its rating (displayed units)."""

    advantage_elo: float | None = DEFAULT_ADVANTAGE
    draw_elo: float | None = DEFAULT_DRAW_ELO
    prior_draws: float = DEFAULT_PRIOR
    confidence_percent: float = 95.0
    average: float = 0.0
    anchor: Anchor | None = None

    def __post_init__(self) -> None:
        if self.prior_draws < 0:
            raise SettingsError("prior_draws", f"must not be negative (got {self.prior_draws})")
        if not 0 < self.confidence_percent < 100:
            raise SettingsError("confidence_percent", "must be between 0 and 100 % (got "
                                f"{self.confidence_percent})")
        if self.draw_elo is not None and not self.draw_elo > 0:
            raise SettingsError("draw_elo", f"must be positive (got {self.draw_elo})")


def fit_bayeselo(games: Sequence[GameResult], settings: BayesEloSettings | None = None
                 ) -> BayesEloTable:
    """BayesElo ratings of the players of ``games`` (see the module docstring and
    :class:`BayesEloSettings`; None: the defaults)."""
    settings = settings if settings is not None else BayesEloSettings()
    advantage, draw_elo, prior = settings.advantage_elo, settings.draw_elo, settings.prior_draws
    confidence, average = settings.confidence_percent, settings.average
    anchor = settings.anchor.name if settings.anchor is not None else None
    anchor_rating = settings.anchor.rating if settings.anchor is not None else 0.0
    cells = _aggregate(games)
    names = cells.names
    count = len(names)
    if count < 2:
        raise BookgenError("need games between at least two players")
    if anchor is not None and anchor not in names:
        raise BookgenError(f"anchor {anchor!r} played no game")
    found, labels = _components(count, cells.black, cells.white)
    if found > 1:
        groups = "; ".join(f"group {k + 1}: {_group_text(names, np.flatnonzero(labels == k))}"
                           for k in range(found))
        raise BookgenError(f"the games do not connect all players ({groups})")
    if prior == 0:
        n = cells.wdl.sum(axis=1).astype(float)
        found, labels = _components(count, cells.black, cells.white, directed_edges=_score_edges(
            cells.black, cells.white, n, cells.wdl[:, 0] + 0.5 * cells.wdl[:, 1]))
        if found > 1:
            groups = ", ".join(_group_text(names, np.flatnonzero(labels == k))
                               for k in range(found))
            raise BookgenError(f"the ratings are unbounded without a prior: the players split "
                               f"into groups {groups} where one group scored every point (or "
                               "none) against another; use a prior > 0")

    # Dense (first, second) count matrices with the virtual draws added.
    wins = np.zeros((count, count))
    draws = np.zeros((count, count))
    losses = np.zeros((count, count))
    wins[cells.black, cells.white] = cells.wdl[:, 0]
    draws[cells.black, cells.white] = cells.wdl[:, 1]
    losses[cells.black, cells.white] = cells.wdl[:, 2]
    between = wins + draws + losses
    between = between + between.T
    per_player = between.sum(axis=1)
    share = prior * 0.25 * between / per_player[:, None]
    virtual = share + share.T
    draws_with_prior = draws + virtual
    first, second = np.nonzero(between > 0)
    w, d, lost = wins[first, second], draws_with_prior[first, second], losses[first, second]

    u, a, delta = _maximise(count, first, second, w, d, lost,
                            a=None if advantage is None else _K * advantage,
                            delta=None if draw_elo is None else _K * draw_elo)
    adv_value = a / _K
    draw_value = delta / _K
    scale = display_scale(draw_value)

    # Negative Hessian in the ratings, covariance of the centred ratings.
    x = u[first] - u[second] + a
    sm, sp = special.expit(x - delta), special.expit(x + delta)
    weight = (w + d) * sm * (1 - sm) + (lost + d) * sp * (1 - sp)
    h = np.zeros((count, count))
    np.add.at(h, (first, second), weight)
    symmetric = h + h.T
    hessian = np.diag(symmetric.sum(axis=1)) - symmetric
    centring = np.full((count, count - 1), -1.0 / count)
    centring[np.arange(count - 1), np.arange(count - 1)] += 1.0
    covariance = centring @ np.linalg.solve(hessian[:-1, :-1], centring.T) / _K**2

    elo = u / _K
    elo = (elo - elo.mean()) * scale
    if anchor is not None:
        elo += anchor_rating - elo[names.index(anchor)]
    else:
        elo += average
    variance = np.diag(covariance)
    margin = stats.norm.ppf(0.5 + confidence / 200) * np.sqrt(np.maximum(variance, 0.0)) * scale
    pair_sd = np.sqrt(np.maximum(variance[:, None] + variance[None, :] - 2 * covariance, 0.0))
    los: dict[tuple[str, str], float] = {}
    raw = u / _K
    for i in range(count):
        for j in range(count):
            if i != j:
                los[(names[i], names[j])] = float(stats.norm.cdf(
                    (raw[i] - raw[j]) / pair_sd[i, j])) if pair_sd[i, j] > 0 else 0.5

    player_w, player_d, player_l = cells.player_counts()
    games_between = np.zeros((count, count))
    np.add.at(games_between, (cells.black, cells.white), cells.wdl.sum(axis=1))
    games_between = games_between + games_between.T
    opponents = games_between @ elo / np.maximum(games_between.sum(axis=1), 1)
    order = sorted(range(count), key=lambda i: (-elo[i], names[i]))
    players = [BayesEloPlayer(
        name=names[i], rating=float(elo[i]), plus=float(margin[i]), minus=float(margin[i]),
        points=float(player_w[i] + player_d[i] / 2),
        played=int(player_w[i] + player_d[i] + player_l[i]), w=int(player_w[i]),
        d=int(player_d[i]), l=int(player_l[i]), opponents=float(opponents[i]))
        for i in order]
    return BayesEloTable(
        players=players, los=los, advantage=float(adv_value), draw_elo=float(draw_value),
        advantage_fitted=advantage is None, draw_elo_fitted=draw_elo is None,
        prior=prior, scale=scale, confidence=confidence,
        covariance={(names[i], names[j]): float(covariance[i, j])
                    for i in range(count) for j in range(count)})


def _maximise(count: int, first: np.ndarray, second: np.ndarray, w: np.ndarray, d: np.ndarray,
              lost: np.ndarray, *, a: float | None, delta: float | None,
              max_iter: int = 200) -> tuple[np.ndarray, float, float]:
    """Newton's method on the log-likelihood; u in natural-log units (k * Elo),
    the last player held at 0. ``a``/``delta`` of None are fitted."""
    fit_a, fit_delta = a is None, delta is None
    if fit_delta and d.sum() <= 0:
        raise BookgenError("cannot fit drawElo: there are no draws (use a prior > 0)")
    a_value = 0.0 if a is None else a
    delta_value = _K * DEFAULT_DRAW_ELO if delta is None else delta
    u = np.zeros(count)
    free = count - 1
    size = free + int(fit_a) + int(fit_delta)
    diagonal = np.arange(count)

    def by_player(values: np.ndarray) -> np.ndarray:
        """Per free player: sum of ``values`` as first player minus as second."""
        return (np.bincount(first, values, count) - np.bincount(second, values, count))[:free]

    def laplacian(weights: np.ndarray) -> np.ndarray:
        h = np.zeros((count, count))
        np.add.at(h, (first, second), weights)
        symmetric = h + h.T
        result = -symmetric
        result[diagonal, diagonal] += symmetric.sum(axis=1)
        return result[:free, :free]
    total = float((w + d + lost).sum())

    def loglik(u: np.ndarray, a_value: float, delta_value: float) -> float:
        if delta_value <= 0:
            return -math.inf
        return _loglik_terms(u[first] - u[second] + a_value, delta_value, w, d, lost)

    current = loglik(u, a_value, delta_value)
    for _ in range(max_iter):
        x = u[first] - u[second] + a_value
        sm, sp = special.expit(x - delta_value), special.expit(x + delta_value)
        gx = (w + d) * (1 - sm) - (lost + d) * sp
        hxx = (w + d) * sm * (1 - sm) + (lost + d) * sp * (1 - sp)
        # minus the mixed second derivative in x and delta
        hxd = -(w + d) * sm * (1 - sm) + (lost + d) * sp * (1 - sp)
        gradient = np.zeros(size)
        jacobian = np.zeros((size, size))  # minus the Hessian
        gradient[:free] = by_player(gx)
        jacobian[:free, :free] = laplacian(hxx)
        column = free
        if fit_a:
            gradient[column] = gx.sum()
            jacobian[:free, column] = jacobian[column, :free] = by_player(hxx)
            jacobian[column, column] = hxx.sum()
            column += 1
        if fit_delta:
            gradient[column] = (-w + d / math.tanh(delta_value)
                                + (w + d) * sm - (lost + d) * sp).sum()
            jacobian[:free, column] = jacobian[column, :free] = by_player(hxd)
            jacobian[column, column] = (d / math.sinh(delta_value) ** 2).sum() + hxx.sum()
            if fit_a:
                jacobian[column - 1, column] = jacobian[column, column - 1] = hxd.sum()
        if np.abs(gradient).max() <= 1e-12 * (1.0 + total):
            break
        try:
            step = np.linalg.solve(jacobian, gradient)
        except np.linalg.LinAlgError:
            raise BookgenError("the BayesElo fit is singular (too few games?)") from None
        t = 1.0
        for _ in range(60):
            trial_u = u.copy()
            trial_u[:free] += t * step[:free]
            trial_a = a_value + (t * step[free] if fit_a else 0.0)
            trial_delta = delta_value + (t * step[-1] if fit_delta else 0.0)
            trial = loglik(trial_u, trial_a, trial_delta)
            if trial >= current - 1e-13 * (1.0 + abs(current)):
                break
            t /= 2
        else:
            break  # no further progress at machine precision
        u, a_value, delta_value, current = trial_u, trial_a, trial_delta, trial
        if np.abs(t * step).max() <= 1e-15 * (1.0 + np.abs(u).max()):
            break
    else:
        raise BookgenError("the BayesElo fit did not converge (a player with a perfect "
                           "score and prior 0?)")
    if np.abs(u).max() > 50 or not np.isfinite(u).all():
        raise BookgenError("the BayesElo ratings are unbounded (a player with a perfect "
                           "score and prior 0?)")
    return u, a_value, delta_value
