"""Operations on whole books, one module per command: :mod:`~bookgen.bookfiles.importer`
(``bookgen import``), :mod:`~bookgen.bookfiles.exporter` (``export``),
:mod:`~bookgen.bookfiles.merge` (``merge``), :mod:`~bookgen.bookfiles.stats`
(``stats``) and :mod:`~bookgen.bookfiles.show` (``show``)."""
