"""Playing games: the rules that end a game (:mod:`~bookgen.play.rules`), time
controls and clocks (:mod:`~bookgen.play.clock`), and the one game loop
(:mod:`~bookgen.play.loop`) that self-play and matches play every game with.
The rules and clocks lie below the engines layer; the loop, which asks the
engines' players, lies above it."""
