"""docs/experiments.md, experiment 1: one network with and without the book's priors.

The same network (``NET``) as two MCTS players, 100 playouts each, no random
opening moves: ``blend`` (``blend:BOOK:torch:NET``, dlshogi's rule, weight 0.5,
as ``[blend]`` of data/experiments/*.toml) and ``plain`` (``torch:NET``), on the
openings of ``SUITE``, ``GAMES`` games (colour-swapped pairs) with the GSPRT
H0 0 / H1 20 normalised Elo (alpha = beta = 0.05) able to stop it early.

    python data/experiments/blend_match.py BOOK NET SUITE RESULTS GAMES [CONCURRENCY]
"""

import sys

from bookgen.analysis.match import MatchSettings, MatchSprt, run_match
from bookgen.analysis.pairstats import SprtSettings
from bookgen.engines.player_settings import PlayerSettings, RandomOpening
from bookgen.engines.restart import RestartPolicy
from bookgen.play.clock import TimeControl
from bookgen.play.loop import GameRules
from bookgen.selfplay.games import selfplay_player


def player(name: str, spec: str, options: dict[str, object]) -> PlayerSettings:
    base = selfplay_player(spec, playouts=100, evaluator_options=options,
                           opening=RandomOpening(random_moves=0))
    return PlayerSettings(base.spec, name=name, mcts=base.mcts,
                          restarts=RestartPolicy(on_failure="forfeit"))


def main(book: str, net: str, suite: str, results: str, games: str,
         concurrency: str = "1") -> None:
    players = [player("blend", f"mcts:blend:{book}:torch:{net}",
                      {"rule": "dlshogi", "weight": 0.5}),
               player("plain", f"mcts:torch:{net}", {})]
    test = MatchSprt("blend", "plain", SprtSettings(0, 20, alpha=0.05, beta=0.05))
    settings = MatchSettings(control=TimeControl(nodes=1), rules=GameRules(max_ply=256),
                             games=int(games), seed=11, concurrency=int(concurrency),
                             sprt=test)
    print(run_match(players, suite, results, settings, progress=False))


if __name__ == "__main__":
    main(*sys.argv[1:])
