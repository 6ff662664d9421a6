"""Playing games: the rules that end a game (:mod:`~bookgen.play.rules`) and time
controls (:mod:`~bookgen.play.clock`)."""
