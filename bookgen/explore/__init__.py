"""The book explorer of ``bookgen serve``: a local web app over a book opened read-only.

- :mod:`~bookgen.explore.view`: what it shows of a place in the book
  (:class:`~bookgen.explore.view.Explorer`, :class:`~bookgen.explore.view.Place`),
  read through :mod:`bookgen.store.browse`; the results by opening it is handed
  (:class:`~bookgen.explore.view.OpeningResult`, computed by the analysis stage);
- :mod:`~bookgen.explore.live`: the live view of a match (standings, games in play,
  SPRT) over results files and their live files; its statistics are handed in as
  functions (:mod:`bookgen.analysis.standings`);
- :mod:`~bookgen.explore.pages`: the HTML (everything escaped; the board by
  :func:`bookgen.diagram.board_svg`);
- :mod:`~bookgen.explore.app`: the Starlette app and the uvicorn server (the
  ``bookgen[serve]`` extra), imported only by ``bookgen serve``;
- ``static/``: the script and the style sheet, shipped with the package (no
  build step, nothing fetched from elsewhere).
"""
