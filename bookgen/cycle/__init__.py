"""``bookgen cycle``'s config and generation directories (no stage is imported here).

:mod:`bookgen.cycle.config` reads the TOML config into frozen settings;
:mod:`bookgen.cycle.generations` keeps each generation's stages, their done
markers and the config fingerprint. The loop that runs the stages crosses
stages, so it lives in the command line: :mod:`bookgen.cli.cycle`.
"""
