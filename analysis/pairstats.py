"""Head-to-head statistics of two players: Elo, normalised Elo, LOS and the GSPRT.

The formulas are those of fishtest's ``LLRcalc``, fastchess and cutechess
(summarised in the project's statistics reference):

- score ``mu = (W + D/2) / N``, ``Elo = -400 log10(1/mu - 1)``, the Elo
  error is half the Elo spread of ``mu +- z SE``, ``LOS = Phi((mu - 1/2) / SE)``;
- normalised Elo ``nElo = (mu - 1/2) / sigma * 800 / ln 10`` with ``sigma``
  the standard deviation of one game's score (for pairs: ``sqrt(2)`` times
  the pair's standard deviation of the mean pair score);
- games played as colour-swapped pairs are counted per pair (pentanomial
  ``[LL, LD+DL, WL+LW+DD, WD+DW, WW]``, scores 0, 1/4, 1/2, 3/4, 1): the pair
  is the real sampling unit;
- generalised SPRT: for each hypothesis, the maximum-likelihood outcome
  distribution subject to the hypothesis (a mean score for the logistic
  model, a t-value ``(mu - 1/2) / sigma`` for the normalised model); the LLR
  is ``N * sum p^_i ln(p1_i / p0_i)`` with zero counts replaced by 1e-3.

Degenerate samples (every outcome in one class: 35 wins and nothing else,
all draws, all 1-1 pairs) are decided like any other, as fishtest and
fastchess do: the LLR maximises the likelihood under each hypothesis rather
than plugging in the sample's variance (0 there), so it stays finite and all
but independent of the 1e-3 (docs/results.md, "The SPRT on degenerate
samples").
The Elo interval and the LOS are another matter: they are normal
approximations built on the sample's own standard error, which is 0 when
every game (or pair) scored the same (2 pairs both won 1.5-0.5, 35 wins, all
draws). Such a sample says nothing about the spread, so :class:`EloEstimate`
reports no interval and no LOS for it (None, printed ``n/a``) rather than an
interval of width 0 and a LOS of 100 % (or 50 %); the point estimates stay.

:func:`sprt` runs the test an :class:`SprtSettings` describes (an
:class:`SprtTest` is one to run: the engine under test, its opponent and the
settings, as ``bookgen match --sprt`` records it and ``bookgen report`` reads
it). On pairs it uses *complete* pairs only (two games between the two
players with the same pair key and colours swapped); games outside a
complete pair are left out of the pentanomial and counted in
``SprtResult.games_left_out``. With ``trinomial=True``, or when there is no
complete pair at all, every game is used as an independent trial.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bookgen.errors import BookgenError, SettingsError
from bookgen.store.results import GameResult

__all__ = ["EloEstimate", "PairCounts", "SprtResult", "SprtSettings", "SprtTest", "count_games",
           "elo_pentanomial", "elo_trinomial", "los_cutechess", "sprt", "sprt_llr",
           "verdict_sentence"]

TRINOMIAL_SCORES = (0.0, 0.5, 1.0)
PENTANOMIAL_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)
NELO_PER_T = 800 / math.log(10)  # nElo = t-value * 800 / ln 10
ZERO_COUNT = 1e-3
MODELS = ("normalized", "logistic")
# scipy loads where a statistic is computed: the match runner and its worker
# processes import this module for SprtSettings and SprtTest alone.


# --------------------------------------------------------------------------
# counting


@dataclass
class PairCounts:
    """Results of ``a`` against ``b`` from ``a``'s point of view.

    ``penta`` is ``[LL, LD+DL, WL+LW+DD, WD+DW, WW]`` over complete
    colour-swapped pairs (None when there is none); ``unpaired`` counts the
    games that are not in a complete pair (they are in W/D/L all the same).
    """

    wins: int
    draws: int
    losses: int
    penta: list[int] | None
    unpaired: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def pairs(self) -> int:
        return sum(self.penta) if self.penta else 0


def count_games(games: Sequence[GameResult], a: str, b: str) -> PairCounts:
    """W/D/L and pentanomial counts of ``a`` against ``b`` (other games ignored).

    Games sharing a pair key are matched in file order, one with ``a`` as
    black with one with ``a`` as white; whatever is left over (a lone game,
    a third game under the same key) counts as unpaired.
    """
    if a == b:
        raise ValueError("a player cannot be compared with itself")
    wins = draws = losses = 0
    by_pair: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    unpaired = 0
    for game in games:
        if {game.black, game.white} != {a, b}:
            continue
        score = game.score_for(a)
        if score == 1.0:
            wins += 1
        elif score == 0.0:
            losses += 1
        else:
            draws += 1
        if game.pair is None:
            unpaired += 1
        else:
            as_black, as_white = by_pair[game.pair]
            (as_black if game.black == a else as_white).append(score)
    penta = [0] * 5
    for as_black, as_white in by_pair.values():
        complete = min(len(as_black), len(as_white))
        unpaired += len(as_black) + len(as_white) - 2 * complete
        for first, second in zip(as_black, as_white):
            penta[round(2 * (first + second))] += 1
    return PairCounts(wins, draws, losses, penta if any(penta) else None, unpaired)


# --------------------------------------------------------------------------
# Elo estimates


@dataclass
class EloEstimate:
    """Elo and normalised Elo with their errors at the chosen confidence; LOS in %.

    ``elo_error`` and ``los`` are None when the sample's score variance is 0
    (every game or pair scored the same): both rest on the sample's standard
    error, which such a sample cannot estimate (see the module doc)."""

    elo: float
    elo_error: float | None
    nelo: float
    nelo_error: float
    los: float | None
    score: float
    games: int


def _elo(score: float) -> float:
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def _elo_margin(mu: float, se: float, z: float) -> float:
    """Half the Elo spread of ``mu +- z se`` (infinite when it leaves (0, 1))."""
    high, low = _elo(mu + z * se), _elo(mu - z * se)
    if not (math.isfinite(high) and math.isfinite(low)):
        return math.inf
    return (high - low) / 2.0


def _estimate(counts: Sequence[float], scores: Sequence[float], games_per_unit: int,
              confidence: float) -> EloEstimate:
    from scipy.stats import norm

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    units = sum(counts)
    if units <= 0:
        raise ValueError("no games")
    mu = sum(c * a for c, a in zip(counts, scores)) / units
    var = sum(c * (a - mu) ** 2 for c, a in zip(counts, scores)) / units  # per unit
    se = math.sqrt(var / units)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    sigma_game = math.sqrt(games_per_unit * var)
    if sigma_game > 0.0:
        nelo = (mu - 0.5) / sigma_game * NELO_PER_T
    else:
        nelo = 0.0 if mu == 0.5 else math.copysign(math.inf, mu - 0.5)
    # The nElo error is z * SE / sigma scaled, i.e. it only depends on the game count.
    nelo_error = z * NELO_PER_T / math.sqrt(games_per_unit * units)
    elo_error: float | None = None
    los: float | None = None
    if se > 0.0:  # no spread in the sample: no interval and no LOS (module doc)
        elo_error = _elo_margin(mu, se, z)
        los = 100.0 * float(norm.cdf((mu - 0.5) / se))
    return EloEstimate(_elo(mu), elo_error, nelo, nelo_error, los, mu,
                       int(round(games_per_unit * units)))


def elo_trinomial(wins: int, draws: int, losses: int, confidence: float = 0.95) -> EloEstimate:
    """Elo, nElo and LOS from W/D/L, every game an independent trial."""
    return _estimate([losses, draws, wins], TRINOMIAL_SCORES, 1, confidence)


def elo_pentanomial(penta: Sequence[int], confidence: float = 0.95) -> EloEstimate:
    """Elo, nElo and LOS from ``[LL, LD+DL, WL+LW+DD, WD+DW, WW]`` pair counts."""
    if len(penta) != 5:
        raise ValueError(f"a pentanomial has 5 counts, not {len(penta)}")
    return _estimate(penta, PENTANOMIAL_SCORES, 2, confidence)


def los_cutechess(wins: int, losses: int) -> float:
    """cutechess' (and ``cshogi.cli``'s) LOS ``Phi((W - L) / sqrt(W + L))`` in %."""
    from scipy.stats import norm

    if wins + losses == 0:
        return 50.0
    return 100.0 * float(norm.cdf((wins - losses) / math.sqrt(wins + losses)))


# --------------------------------------------------------------------------
# GSPRT


def _secular(p: Sequence[float], g: Sequence[float]) -> float:
    """The x solving ``sum p_i g_i / (1 + x g_i) = 0`` with every ``1 + x g_i > 0``.

    The left side decreases strictly in x on that interval and runs from
    +inf to -inf, so the root is unique when ``g`` has both signs.
    """
    from scipy.optimize import brentq

    low, high = min(g), max(g)
    if not low < 0.0 < high:
        raise BookgenError("the SPRT hypothesis is outside what the outcome scores allow "
                           "(are the Elo bounds extreme?)")
    lo, hi = -1.0 / high, -1.0 / low
    eps = 1e-12 * (hi - lo)

    def f(x: float) -> float:
        return sum(pi * gi / (1.0 + x * gi) for pi, gi in zip(p, g))

    return float(brentq(f, lo + eps, hi - eps, xtol=1e-15, maxiter=500))


def _tilted(p: Sequence[float], g: Sequence[float]) -> list[float]:
    x = _secular(p, g)
    return [pi / (1.0 + x * gi) for pi, gi in zip(p, g)]


def _mle_mean(p: Sequence[float], a: Sequence[float], s: float) -> list[float]:
    """Maximum-likelihood distribution on scores ``a`` with mean ``s``."""
    return _tilted(p, [ai - s for ai in a])


def _t_gradient(q: Sequence[float], a: Sequence[float], ref: float, t: float) -> list[float]:
    """``g_i`` of :func:`_mle_t_value` at the distribution ``q``."""
    mu = sum(qi * ai for qi, ai in zip(q, a))
    sigma = math.sqrt(sum(qi * (ai - mu) ** 2 for qi, ai in zip(q, a)))
    return [ai - ref - t * ((ai - mu) ** 2 + sigma ** 2) / (2.0 * sigma) for ai in a]


def _mle_t_value(p: Sequence[float], a: Sequence[float], ref: float, t: float) -> list[float]:
    """Maximum-likelihood distribution with ``(mu - ref) / sigma = t``.

    Stationarity gives ``q_i = p_i / (1 + x g_i)`` with
    ``g_i = a_i - ref - t ((a_i - mu)^2 + sigma^2) / (2 sigma)`` (the
    constraint's gradient shifted so that ``sum q_i g_i = 0`` is the
    constraint itself); mu and sigma depend on q, hence the fixed point.
    """
    # Start from the distribution with mean ``ref``: its sigma is sane even when
    # the data sit in one cell away from ``ref`` (35 wins), where starting from p
    # makes every g_i one-signed. When they sit in the cell at ``ref`` itself
    # (all draws, all 1-1 pairs), that start is p again, with a sigma of about
    # 0: start from the uniform distribution instead.
    q = _mle_mean(p, a, ref)
    g = _t_gradient(q, a, ref, t)
    if not min(g) < 0.0 < max(g):
        q = [1.0 / len(a)] * len(a)
        g = _t_gradient(q, a, ref, t)
    for _ in range(200):
        new = _tilted(p, g)
        done = max(abs(u - v) for u, v in zip(new, q)) < 1e-12
        q = new
        if done:
            break
        g = _t_gradient(q, a, ref, t)
    return q


def sprt_llr(counts: Sequence[int], scores: Sequence[float], elo0: float, elo1: float,
             model: str = "normalized") -> float:
    """Log-likelihood ratio of H1 (``elo1``) against H0 (``elo0``).

    ``counts[i]`` outcomes scored ``scores[i]`` (0..1, mean per game). Three
    outcomes (``L, D, W``) are single games; five (the pentanomial) are pairs
    of games, which matters to the normalised model whose Elo is per game.
    """
    if len(counts) != len(scores) or len(counts) < 2:
        raise ValueError("counts and scores must have the same length (at least 2)")
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, not {model!r}")
    filled = [max(ZERO_COUNT, float(c)) for c in counts]
    total = sum(filled)
    p = [c / total for c in filled]
    if model == "logistic":
        q0 = _mle_mean(p, scores, 1.0 / (1.0 + 10.0 ** (-elo0 / 400.0)))
        q1 = _mle_mean(p, scores, 1.0 / (1.0 + 10.0 ** (-elo1 / 400.0)))
    else:
        # A pair's t-value is sqrt(2) times the per-game one (its mean score
        # averages two games).
        per_unit = math.sqrt(2.0) if len(counts) == 5 else 1.0
        q0 = _mle_t_value(p, scores, 0.5, elo0 / NELO_PER_T * per_unit)
        q1 = _mle_t_value(p, scores, 0.5, elo1 / NELO_PER_T * per_unit)
    return total * sum(pi * math.log(b / a) for pi, a, b in zip(p, q0, q1))


def sprt_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """``(ln(beta / (1 - alpha)), ln((1 - beta) / alpha))``."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


VERDICT_TEXT = {"H1": "H1 accepted", "H0": "H0 accepted", None: "continue"}


@dataclass(frozen=True)
class SprtSettings:
    """A GSPRT's hypotheses and error rates: H0 ``elo0``, H1 ``elo1`` (the Elo
    difference of the engine under test over its opponent; ``model``:
    ``normalized`` or ``logistic`` Elo), ``alpha`` the false positive rate
    (accepting H1 when H0 holds), ``beta`` the false negative rate.
    ``trinomial``: count games (W/D/L) instead of colour-swapped pairs."""

    elo0: float
    elo1: float
    alpha: float = 0.05
    beta: float = 0.05
    model: str = "normalized"
    trinomial: bool = False

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise SettingsError("model", f"must be one of {', '.join(MODELS)}, "
                                f"not {self.model!r}")
        if not self.elo0 < self.elo1:
            raise SettingsError("elo0", f"{SettingsError.FIELD} ({self.elo0:g}) must be below "
                                f"{SettingsError.mention('elo1')} ({self.elo1:g})")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not 0.0 < value < 1.0:
                raise SettingsError(name, f"must be in (0, 1), not {value:g}")
        if self.alpha + self.beta >= 1.0:
            raise SettingsError("alpha", f"{SettingsError.FIELD} + {SettingsError.mention('beta')} "
                                "must be below 1")

    @property
    def unit(self) -> str:
        """``normalized Elo`` or ``Elo``."""
        return "normalized Elo" if self.model == "normalized" else "Elo"


@dataclass(frozen=True)
class SprtTest:
    """A GSPRT to run: of ``engine``, the engine under test, against ``opponent``."""

    engine: str
    opponent: str
    settings: SprtSettings

    def run(self, games: Sequence[GameResult]) -> SprtResult:
        """The test on ``games`` (:func:`sprt`)."""
        return sprt(games, self.engine, self.opponent, self.settings)

    def describe(self) -> str:
        s = self.settings
        return (f"SPRT for {self.engine} (engine under test) vs {self.opponent}: H0 "
                f"{s.elo0:g}, H1 {s.elo1:g} {s.unit}, alpha {s.alpha:g}, beta {s.beta:g}")

    def as_json(self) -> dict[str, Any]:
        """The test as ``bookgen match --sprt`` records it (``trinomial`` only when set)."""
        s = self.settings
        data = {"engine": self.engine, "opponent": self.opponent, "elo0": s.elo0,
                "elo1": s.elo1, "alpha": s.alpha, "beta": s.beta, "model": s.model}
        return {**data, "trinomial": True} if s.trinomial else data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SprtTest:
        """The test :meth:`as_json` wrote (alpha, beta and model: defaults if missing)."""
        return cls(data["engine"], data["opponent"], SprtSettings(
            float(data["elo0"]), float(data["elo1"]), alpha=float(data.get("alpha", 0.05)),
            beta=float(data.get("beta", 0.05)), model=data.get("model", "normalized"),
            trinomial=bool(data.get("trinomial", False))))


def verdict_sentence(result: SprtResult) -> str:
    """The verdict in words, from the engine under test's side, e.g. ``H1 accepted:
    new is stronger than base (Elo difference nearer 5 than 0 normalized Elo)``."""
    a, b, settings = result.engine, result.opponent, result.settings
    unit = settings.unit
    e0, e1 = f"{settings.elo0:g}", f"{settings.elo1:g}"
    if result.verdict is None:
        return (f"continue: no verdict yet on {a} against {b} (H0 {e0}, H1 {e1} {unit}; "
                f"LLR {result.llr:.2f} in [{result.lower:.2f}, {result.upper:.2f}])")
    if result.verdict == "H1":
        claim = (f"{a} is stronger than {b}" if settings.elo0 >= 0 else
                 f"{a} is not weaker than {b} by {-settings.elo0:g} {unit} or more")
        nearer, other = e1, e0
    else:
        claim = (f"{a} is not stronger than {b} by {e1} {unit}" if settings.elo1 > 0 else
                 f"{a} is weaker than {b}")
        nearer, other = e0, e1
    return (f"{VERDICT_TEXT[result.verdict]}: {claim} (Elo difference of {a} over {b} "
            f"nearer {nearer} than {other} {unit}; LLR {result.llr:.2f}, bounds "
            f"[{result.lower:.2f}, {result.upper:.2f}])")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _or_na(value: float | None, spec: str, unit: str = "") -> str:
    """``value`` formatted with ``spec`` and ``unit``, ``n/a`` for None (undefined)."""
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass
class SprtResult:
    """A GSPRT of ``engine`` against ``opponent`` under ``settings``; ``verdict`` 'H1',
    'H0' or None (continue).

    ``basis`` is 'pentanomial' (complete pairs only; ``games_left_out`` games
    outside a complete pair are not in the LLR nor the estimate) or
    'trinomial' (every game). ``counts`` always covers every game.
    """

    engine: str
    opponent: str
    llr: float
    lower: float
    upper: float
    verdict: str | None
    settings: SprtSettings
    basis: str
    counts: PairCounts
    estimate: EloEstimate
    games_left_out: int

    def format_text(self) -> str:
        c, e = self.counts, self.estimate
        lines = [f"{self.engine} vs {self.opponent}: {c.games} games, "
                 f"W {c.wins}  D {c.draws}  L {c.losses}"]
        if c.penta is not None:
            lines.append(f"pentanomial [LL, LD, WL+DD, WD, WW]: {c.penta} "
                         f"({_plural(c.pairs, 'complete pair')}; "
                         f"{_plural(c.unpaired, 'game')} not in a complete pair)")
        else:
            lines.append("pentanomial: no complete colour-swapped pair")
        if self.basis == "pentanomial" and self.games_left_out:
            lines.append(f"note: {_plural(self.games_left_out, 'game')} outside a complete "
                         "pair left out of the estimate and the LLR")
        lines.append(f"Elo: {e.elo:.2f} +/- {_or_na(e.elo_error, '.2f')}, nElo: {e.nelo:.2f} "
                     f"+/- {e.nelo_error:.2f}, LOS: {_or_na(e.los, '.2f', ' %')} "
                     f"({self.basis}, {e.games} games)")
        s = self.settings
        kind = "normalized Elo" if s.model == "normalized" else "logistic Elo"
        lines.append(f"SPRT of {self.engine} (engine under test) against {self.opponent} "
                     f"({kind} [{s.elo0:g}, {s.elo1:g}], alpha {s.alpha:g}, "
                     f"beta {s.beta:g}): LLR {self.llr:.2f} "
                     f"[{self.lower:.2f}, {self.upper:.2f}] -> {VERDICT_TEXT[self.verdict]}")
        if self.verdict is not None:
            lines.append(verdict_sentence(self))
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (infinite Elo values become null)."""
        estimate = {key: _finite(value) if isinstance(value, float) else value
                    for key, value in asdict(self.estimate).items()}
        counts = asdict(self.counts)
        counts["games"], counts["pairs"] = self.counts.games, self.counts.pairs
        s = self.settings
        return {"engine": self.engine, "opponent": self.opponent, "llr": self.llr,
                "lower": self.lower, "upper": self.upper, "verdict": self.verdict,
                "verdict_text": VERDICT_TEXT[self.verdict],
                "verdict_sentence": verdict_sentence(self), "elo0": s.elo0,
                "elo1": s.elo1, "alpha": s.alpha, "beta": s.beta,
                "model": s.model, "basis": self.basis, "counts": counts,
                "estimate": estimate, "games_left_out": self.games_left_out}


def _check_players(games: Sequence[GameResult], a: str, b: str) -> None:
    players = sorted({g.black for g in games} | {g.white for g in games})
    missing = [name for name in (a, b) if name not in players]
    if missing:
        found = ", ".join(players) if players else "none"
        raise BookgenError(f"unknown player {', '.join(map(repr, missing))}; "
                           f"players found: {found}")
    if a == b:
        raise BookgenError("the engine and its opponent must differ")


def sprt(games: Sequence[GameResult], a: str, b: str, settings: SprtSettings) -> SprtResult:
    """GSPRT of ``a`` (the engine under test) against ``b`` under ``settings`` (see
    the module doc)."""
    elo0, elo1, model = settings.elo0, settings.elo1, settings.model
    _check_players(games, a, b)
    counts = count_games(games, a, b)
    if counts.games == 0:
        raise BookgenError(f"no games between {a} and {b}")
    lower, upper = sprt_bounds(settings.alpha, settings.beta)
    estimate: EloEstimate
    if counts.penta is not None and not settings.trinomial:
        basis, left_out = "pentanomial", counts.unpaired
        penta = counts.penta
        estimate = elo_pentanomial(penta)
        llr = sprt_llr(penta, PENTANOMIAL_SCORES, elo0, elo1, model)
    else:
        basis, left_out = "trinomial", 0
        estimate = elo_trinomial(counts.wins, counts.draws, counts.losses)
        llr = sprt_llr([counts.losses, counts.draws, counts.wins], TRINOMIAL_SCORES,
                       elo0, elo1, model)
    verdict = "H1" if llr >= upper else "H0" if llr <= lower else None
    return SprtResult(a, b, llr, lower, upper, verdict, settings, basis, counts, estimate,
                      left_out)
