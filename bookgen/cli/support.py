"""What every command module shares: the error wrapper, the exit codes, the names of
settings fields as flags, and JSON output.

Command modules import it (and :mod:`bookgen.cli.options`); it imports no
command module, so registration stays in :mod:`bookgen.cli` alone.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import click

from bookgen.errors import BookgenError, SettingsError
from bookgen.startup import INTERRUPTED_EXIT, command_started, interrupted

P = ParamSpec("P")
R = TypeVar("R")

ERROR_EXIT = 2

# Settings fields whose flag is not ``--`` and the field's last part with dashes.
FIELD_FLAGS = {
    "draws.black": "--draw-value-black",
    "draws.white": "--draw-value-white",
    "budget.seconds_s": "--time",
    "walk.eval_threshold_cp": "--eval-threshold",
    "walk.opponent_temperature": "--temperature",
    "book_moves.visit_share_threshold": "--visit-threshold",
    "book_moves.win_rate_cutoff": "--cutoff",
    "scan_workers": "--workers",
    "open_browser": "--open",
    "apery_roots": "--roots",
    "apery_max_gap_plies": "--max-gap",
    "parser_workers": "--workers",
    "hcpe_policy_temperature": "--temperature",
    "db2016_noe": "--noe",
    "learning_rate": "--lr",
    "result_share_of_value_target": "--alpha",
    "validation_share": "--val-split",
    "replace_output": "--force",
    "confidence_percent": "--confidence",
    "prior_draws": "--prior",
    "fit_white_advantage": "--white-advantage",
    "fit_draw_rate": "--draw-rate",
    "sprt_tests": "--sprt",
    "engine.options": "--engine-option",
    "engine.limits.byoyomi_ms": "--byoyomi",
    "engine.limits.movetime_ms": "--movetime",
    "engine.timeout_s": "--engine-timeout",
    "selection.margin_cp": "--margin",
    "detection.threshold_cp": "--threshold",
    "detection.opp_threshold_cp": "--opp-threshold",
    "detection.diff_cp": "--diff",
    "selection.max_value_cp": "--max-value",
    "selection.principal_margin_cp": "--principal-margin",
    "rules.resign_cp": "--resign",
    "output.replace": "--force",
    **{f"players.{side}.{field}": flag for side in ("black", "white") for field, flag in (
        ("limits.byoyomi_ms", "--byoyomi"), ("limits.movetime_ms", "--movetime"),
        ("engine_timeout_s", "--engine-timeout"))},
    "max_line_value_cp": "--max-line-value",
    "sprt.settings.alpha": "--sprt-alpha",
    "sprt.settings.beta": "--sprt-beta",
    "sprt.settings.model": "--sprt-model",
    "cluster.address": "--cluster",
    "controls": "--tc",
    "go_options": "--go-option",
}


def flag_of(field: str) -> str:
    """The command-line flag of a settings field (:class:`bookgen.errors.SettingsError`):
    ``"draws.black"`` is ``--draw-value-black``, ``"mcts.batch_size"`` ``--batch-size``."""
    return FIELD_FLAGS.get(field) or "--" + field.rpartition(".")[2].replace("_", "-")


def error_text(error: BookgenError) -> str:
    """A library error as the command line says it: settings errors name the flags."""
    if isinstance(error, SettingsError):
        return error.naming(flag_of(error.field), flag_of)
    return str(error)


def reports_errors(function: Callable[P, R]) -> Callable[P, R]:
    """Turn library errors into a one-line message and exit code 2; Ctrl-C into 130
    (from here on a ``KeyboardInterrupt``: see :mod:`bookgen.startup`).

    numpy and cshogi, which every command uses, are loaded first, while a
    Ctrl-C still exits quietly: one inside cshogi's import of numpy would
    become an ``ImportError``. ``--help`` runs no command and loads neither.
    """

    @wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import cshogi  # noqa: F401  (and numpy)

        command_started()
        try:
            return function(*args, **kwargs)
        except BookgenError as error:
            click.echo(f"bookgen: error: {error_text(error)}", err=True)
            sys.exit(ERROR_EXIT)
        except KeyboardInterrupt:
            click.echo("bookgen: interrupted", err=True)
            sys.exit(INTERRUPTED_EXIT)
        except Exception:
            if not interrupted():  # a real error: its traceback is the report
                raise
            click.echo("bookgen: interrupted", err=True)
            sys.exit(INTERRUPTED_EXIT)

    return wrapper


def exit_if_interrupted(interrupted: bool,
                        hint: str = "rerun the same command to continue") -> None:
    """The one rule for commands that stop cleanly at Ctrl-C and print their
    summary: they then say so and exit with :data:`INTERRUPTED_EXIT`."""
    if interrupted:
        click.echo(f"bookgen: interrupted; {hint}", err=True)
        sys.exit(INTERRUPTED_EXIT)


def json_text(value: Any, *, ensure_ascii: bool = True) -> str:
    """``value`` as the JSON every ``--json`` prints (indented by 2, no trailing newline)."""
    return json.dumps(value, indent=2, ensure_ascii=ensure_ascii)


def echo_json(value: Any, *, ensure_ascii: bool = True) -> None:
    """Print ``value`` as :func:`json_text` on standard output."""
    click.echo(json_text(value, ensure_ascii=ensure_ascii))


def no_nan(value: Any) -> Any:
    """``value`` with NaN floats (metrics without data) as None, for strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [no_nan(v) for v in value]
    return value
