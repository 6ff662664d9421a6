"""docs/experiments.md, experiment 3: the arms' trained networks against one another.

A round robin of MCTS players (100 playouts each, no random opening moves, no
blending), one per ``NAME=NET`` argument, on the openings of ``SUITE``, ``GAMES``
games (colour-swapped pairs) per pairing; rate the results with ``bookgen rate``.

    python data/experiments/arms_match.py SUITE RESULTS GAMES NAME=NET NAME=NET ...
"""

import sys

from bookgen.analysis.match import MatchSettings, run_match
from bookgen.engines.player_settings import PlayerSettings, RandomOpening
from bookgen.engines.restart import RestartPolicy
from bookgen.play.clock import TimeControl
from bookgen.play.loop import GameRules
from bookgen.selfplay.games import selfplay_player


def player(name: str, net: str) -> PlayerSettings:
    base = selfplay_player(f"mcts:torch:{net}", playouts=100,
                           opening=RandomOpening(random_moves=0))
    return PlayerSettings(base.spec, name=name, mcts=base.mcts,
                          restarts=RestartPolicy(on_failure="forfeit"))


def main(suite: str, results: str, games: str, *players: str) -> None:
    settings = MatchSettings(control=TimeControl(nodes=1), rules=GameRules(max_ply=256),
                             format="round-robin", games=int(games), seed=13)
    chosen = [player(*text.split("=", 1)) for text in players]
    print(run_match(chosen, suite, results, settings, progress=False))


if __name__ == "__main__":
    main(*sys.argv[1:])
