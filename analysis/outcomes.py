"""How games end, per player, and whether a kind of ending is more frequent for some.

An *ending* names a game's end reason (``GameResult.reason``, e.g. a
``bookgen.play.rules.Reason`` value) from one player's side:

- a decisive game counts as ``"<reason> win"`` for the winner and
  ``"<reason> loss"`` for the loser (``"declaration win"``, ``"resign loss"``);
- a drawn game counts as ``"<reason>"`` for both players when the reason
  already says draw (``"repetition draw"``), else ``"<reason> draw"``
  (``"max ply draw"``);
- a game without a reason counts under the reason ``"unknown"``.

:func:`test_rate` also accepts a bare reason (``"declaration"``): every game
of the player that ended that way, whoever won.

Rates are compared with a contingency table ``[[k_i, n_i - k_i], ...]``
(``k_i`` games of player ``i`` with the ending out of ``n_i``): SciPy's
``chi2_contingency`` (Yates' correction on a 2x2 table, as SciPy does), or
``fisher_exact`` for a 2x2 table with an expected count below 5; pairwise
2x2 tests get Holm's correction. Each game is one trial here although the
two games of a colour-swapped pair are correlated (same opening), so the
p-values are somewhat optimistic when games come in pairs; the report says
so. Games of a player against itself are left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import chi2_contingency, chisquare, fisher_exact

from bookgen.errors import BookgenError
from bookgen.store.results import GameResult

__all__ = ["RateTest", "ending_labels", "holm", "outcome_table", "test_rate"]

UNKNOWN_REASON = "unknown"
SMALL_EXPECTED = 5.0
PAIRED_NOTE = ("the two games of a colour-swapped pair share an opening and are correlated; "
               "these tests treat every game as independent, so p-values are optimistic")


def _reason(game: GameResult) -> str:
    return game.reason or UNKNOWN_REASON


def ending_labels(game: GameResult) -> dict[str, str]:
    """``{player: ending}`` of one game (see the module doc for the names)."""
    reason = _reason(game)
    winner, loser = game.winner, game.loser
    if winner is None or loser is None:
        label = reason if "draw" in reason.split() else f"{reason} draw"
        return {game.black: label, game.white: label}
    return {winner: f"{reason} win", loser: f"{reason} loss"}


@dataclass
class _Tally:
    """Per player: games played, ending labels and bare reasons."""

    played: Counter[str] = field(default_factory=Counter)
    labels: dict[str, Counter[str]] = field(default_factory=dict)
    reasons: dict[str, Counter[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, games: Sequence[GameResult]) -> _Tally:
        tally = cls()
        for game in games:
            if game.black == game.white:
                continue
            for player, label in ending_labels(game).items():
                tally.played[player] += 1
                tally.labels.setdefault(player, Counter())[label] += 1
                tally.reasons.setdefault(player, Counter())[_reason(game)] += 1
        return tally

    def seen(self) -> list[str]:
        return sorted({label for mine in self.labels.values() for label in mine})

    def count(self, player: str, ending: str) -> int:
        """Games of ``player`` with this ending label, or else with this bare reason."""
        if any(ending in mine for mine in self.labels.values()):
            return self.labels[player][ending]
        return self.reasons[player][ending]


def outcome_table(games: Sequence[GameResult], endings: Sequence[str] | None = None
                  ) -> pd.DataFrame:
    """Rows: players (sorted); columns: ``games`` then the count of each ending.

    ``endings`` defaults to every ending label seen, sorted; a requested bare
    reason counts that reason whatever the result.
    """
    tally = _Tally.of(games)
    columns = tally.seen() if endings is None else list(endings)
    rows = {player: {"games": tally.played[player],
                     **{ending: tally.count(player, ending) for ending in columns}}
            for player in sorted(tally.played)}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=["games", *columns])
    table.index.name = "player"
    return table.fillna(0).astype(int)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


@dataclass
class RateTest:
    """The comparison of one ending's rate across players.

    ``counts`` maps a player to ``(k, n)``; ``test`` is the test used
    ('chi2_contingency (Yates)', 'chi2_contingency', 'fisher_exact', or
    'none' when every player has the same rate of 0 % or 100 %);
    ``statistic`` is chi-square (or the odds ratio for ``fisher_exact``);
    ``dof`` is None for Fisher's test. ``pairwise`` holds one dict per pair
    of players (player_a, player_b, test, p, p_holm). ``naive`` is set by
    ``naive=True``: ``chisquare(k)`` (equal expected counts) and the same
    with ``f_exp`` proportional to the games played.
    """

    ending: str
    counts: dict[str, tuple[int, int]]
    test: str
    statistic: float
    dof: int | None
    p_value: float
    pairwise: list[dict[str, Any]]
    warnings: list[str]
    notes: list[str] = field(default_factory=list)
    naive: dict[str, float] | None = None

    def as_json(self) -> dict[str, Any]:
        def clean(value: Any) -> Any:
            return None if isinstance(value, float) and not np.isfinite(value) else value

        return {"ending": self.ending,
                "counts": {p: {"k": k, "n": n} for p, (k, n) in self.counts.items()},
                "test": self.test, "statistic": clean(self.statistic), "dof": self.dof,
                "p_value": clean(self.p_value), "pairwise": self.pairwise,
                "warnings": self.warnings, "notes": self.notes, "naive": self.naive}

    def format_text(self, notes: bool = True) -> str:
        """The test as text; ``notes=False`` leaves the notes out (to print them once)."""
        rates = ", ".join(f"{p} {k}/{n} ({100 * k / n:.1f} %)"
                          for p, (k, n) in self.counts.items())
        lines = [f"{self.ending}: {rates}"]
        if self.test == "none":
            lines.append("  no test (the rate is the same for every player)")
        else:
            name = "odds ratio" if self.test == "fisher_exact" else "chi2"
            dof = f", dof {self.dof}" if self.dof is not None else ""
            lines.append(f"  {self.test}: {name} {self.statistic:.4f}{dof}, "
                         f"p {self.p_value:.4g}")
        for row in self.pairwise:
            lines.append(f"  {row['player_a']} vs {row['player_b']}: {row['test']} "
                         f"p {row['p']:.4g}, Holm p {row['p_holm']:.4g}")
        if self.naive is not None:
            lines.append(f"  naive chisquare(k): chi2 {self.naive['statistic']:.4f}, "
                         f"p {self.naive['p_value']:.4g}; with f_exp proportional to games: "
                         f"chi2 {self.naive['proportional_statistic']:.4f}, "
                         f"p {self.naive['proportional_p_value']:.4g}")
        lines += [f"  warning: {text}" for text in self.warnings]
        if notes:
            lines += [f"  note: {text}" for text in self.notes]
        return "\n".join(lines)


def _two_by_two(table: np.ndarray, correction: bool) -> tuple[str, float, int | None, float]:
    """(test, statistic, dof, p) for a 2x2 table: Fisher when an expected count is below 5."""
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0) / table.sum()
    if expected.min() < SMALL_EXPECTED:
        result = fisher_exact(table)
        return "fisher_exact", float(result.statistic), None, float(result.pvalue)
    chi = chi2_contingency(table, correction=correction)
    name = "chi2_contingency (Yates)" if correction else "chi2_contingency"
    return name, float(chi.statistic), int(chi.dof), float(chi.pvalue)


def test_rate(games: Sequence[GameResult], ending: str, *, naive: bool = False,
              players: Sequence[str] | None = None, method: str = "auto",
              correction: bool = True) -> RateTest:
    """Compare how often ``ending`` happens to each player (see the module doc).

    ``players`` limits the comparison to some players (default: all; e.g.
    the engines under test but not their common opponent). ``method``
    'auto' picks Fisher for a small 2x2 table; 'chi2' always uses
    ``chi2_contingency`` (with a warning on small expected counts);
    ``correction=False`` turns Yates' correction off.
    """
    if method not in ("auto", "chi2"):
        raise ValueError(f"method must be 'auto' or 'chi2', not {method!r}")
    tally = _Tally.of(games)
    if players is None:
        players = sorted(tally.played)
    else:
        unknown = [p for p in players if p not in tally.played]
        if unknown:
            raise BookgenError(f"unknown player {', '.join(map(repr, unknown))}; players "
                               f"found: {', '.join(sorted(tally.played)) or 'none'}")
        players = list(dict.fromkeys(players))
    if len(players) < 2:
        raise BookgenError("comparing rates needs games of at least two players")
    counts = {p: (tally.count(p, ending), tally.played[p]) for p in players}
    if not any(k for k, _ in counts.values()):
        raise BookgenError(f"no game of {', '.join(players)} ended with {ending!r}; "
                           f"endings seen: {', '.join(tally.seen())}")
    table = np.array([[k, n - k] for k, n in counts.values()])
    warnings: list[str] = []
    notes = [PAIRED_NOTE] if any(g.pair is not None for g in games) else []

    if table[:, 1].sum() == 0:
        test, statistic, dof, p_value = "none", float("nan"), None, 1.0
        warnings.append(f"every game of every player ended with {ending!r}: nothing to compare")
    elif len(players) == 2 and method == "auto":
        test, statistic, dof, p_value = _two_by_two(table, correction)
    else:
        chi = chi2_contingency(table, correction=correction)
        yates = correction and chi.dof == 1
        test = "chi2_contingency (Yates)" if yates else "chi2_contingency"
        statistic, dof, p_value = float(chi.statistic), int(chi.dof), float(chi.pvalue)
        if chi.expected_freq.min() < SMALL_EXPECTED:
            warnings.append("an expected count is below 5: the chi-square approximation is "
                            "unreliable (see the pairwise Fisher tests)")

    pairwise: list[dict[str, Any]] = []
    for a, b in combinations(players, 2):
        sub = table[[players.index(a), players.index(b)]]
        if sub[:, 0].sum() == 0 or sub[:, 1].sum() == 0:
            pair_test, p = "none", 1.0
        else:
            pair_test, _, _, p = _two_by_two(sub, correction)
        pairwise.append({"player_a": a, "player_b": b, "test": pair_test, "p": p})
    for row, adjusted in zip(pairwise, holm([row["p"] for row in pairwise])):
        row["p_holm"] = adjusted

    naive_result: dict[str, float] | None = None
    if naive:
        k = table[:, 0]
        n = table.sum(axis=1)
        plain = chisquare(k)
        proportional = chisquare(k, f_exp=n * k.sum() / n.sum())
        naive_result = {"statistic": float(plain.statistic), "p_value": float(plain.pvalue),
                        "proportional_statistic": float(proportional.statistic),
                        "proportional_p_value": float(proportional.pvalue)}
        if len(set(n.tolist())) > 1:
            warnings.append(
                f"chisquare(k) assumes equal expected counts, but the players played "
                f"different numbers of games ({', '.join(map(str, n.tolist()))}): its p "
                f"{plain.pvalue:.4g} is wrong; with f_exp proportional to games played "
                f"p is {proportional.pvalue:.4g}")
    return RateTest(ending, counts, test, statistic, dof, p_value, pairwise, warnings, notes,
                    naive_result)


# Not a pytest test despite its name. mypy does not model attributes set on functions (and
# ruff's B010 objects to setattr with a constant name).
test_rate.__test__ = False  # type: ignore[attr-defined]
