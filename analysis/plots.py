"""Figures of ``bookgen report``, drawn with matplotlib; :func:`png` turns one into PNG bytes.

Every function builds and returns a :class:`matplotlib.figure.Figure`
directly (Agg canvas, no pyplot and no global figure registry), so nothing
is left open and the report can be built from any thread. Labels that come
from users and engines (player names, run commands) are drawn with mathtext
parsing off, so a ``$`` in a name is never interpreted. Axes that count
(games, positions, mistakes, plies) get whole-number ticks only, and legends
sit above the axes, outside the plotted data.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

__all__ = ["book_growth_plot", "colour_score_plot", "length_histogram", "mistakes_plot", "png",
           "ratings_plot", "value_histogram", "ply_histogram", "wdl_plot"]

WIN, DRAW, LOSS = "#4c9a5b", "#b7b7b7", "#c8553d"
BLACK_SIDE, WHITE_SIDE = "#3b4a6b", "#d9a441"
DPI = 100


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def png(figure: Figure) -> bytes:
    """``figure`` as PNG bytes (the figure is cleared afterwards)."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        # Names in scripts the default font lacks (kanji) draw as boxes; fine.
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        figure.savefig(buffer, format="png", dpi=DPI)
    figure.clear()
    return buffer.getvalue()


def _counts(axis: Axis) -> None:
    """Whole-number ticks on an axis of counts."""
    axis.set_major_locator(MaxNLocator(integer=True))


def _legend_above(figure: Figure, axes: Axes, columns: int | None = None) -> None:
    """The axes' legend above them, outside the plotted area (constrained layout makes room)."""
    handles, labels = axes.get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="outside upper center", fontsize=8, frameon=False,
                      ncols=columns or len(handles))


def _height(rows: int) -> float:
    return min(2.0 + 0.38 * rows, 14.0)


def _name_ticks(axes: Axes, names: Sequence[str], *, horizontal: bool = True) -> None:
    positions = list(range(len(names)))
    if horizontal:
        axes.set_yticks(positions, list(names), parse_math=False)
        axes.invert_yaxis()  # best player on top
    else:
        axes.set_xticks(positions, list(names), parse_math=False, rotation=30, ha="right")


def ratings_plot(names: Sequence[str], ratings: Sequence[float],
                 errors: Sequence[float | None]) -> Figure:
    """Ratings (best first, top to bottom) with their error bars when known."""
    figure, axes = _figure(8.0, _height(len(names)))
    y = list(range(len(names)))
    have_errors = all(error is not None for error in errors)
    axes.errorbar(list(ratings), y, xerr=[e or 0.0 for e in errors] if have_errors else None,
                  fmt="o", color=BLACK_SIDE, ecolor="#7a869a", capsize=4)
    axes.axvline(0.0, color="#999999", linewidth=0.8, linestyle=":")
    _name_ticks(axes, names)
    axes.set_xlabel("rating (Ordo points)" + ("" if have_errors else "; no simulations, "
                                              "so no error bars"))
    axes.grid(axis="x", alpha=0.3)
    return figure


def wdl_plot(names: Sequence[str], wins: Sequence[int], draws: Sequence[int],
             losses: Sequence[int]) -> Figure:
    """Stacked horizontal bars of each player's wins, draws and losses (share of games)."""
    figure, axes = _figure(8.0, _height(len(names)))
    totals = [max(w + d + lost, 1) for w, d, lost in zip(wins, draws, losses)]
    shares = [[100.0 * c / t for c, t in zip(column, totals)] for column in (wins, draws, losses)]
    y = list(range(len(names)))
    left = [0.0] * len(names)
    for label, colour, share, counts in zip(("win", "draw", "loss"), (WIN, DRAW, LOSS),
                                            shares, (wins, draws, losses)):
        bars = axes.barh(y, share, left=left, color=colour, label=label)
        axes.bar_label(bars, labels=[str(c) if c else "" for c in counts], label_type="center",
                       fontsize=8)
        left = [a + b for a, b in zip(left, share)]
    _name_ticks(axes, names)
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of games (numbers: games)")
    _legend_above(figure, axes)
    return figure


def colour_score_plot(names: Sequence[str], as_black: Sequence[float | None],
                      as_white: Sequence[float | None]) -> Figure:
    """Grouped bars: each player's score (%) as black (sente) and as white (gote)."""
    figure, axes = _figure(8.0, _height(len(names)))
    y = list(range(len(names)))
    height = 0.38
    for offset, label, colour, scores in ((-height / 2, "as black (sente)", BLACK_SIDE, as_black),
                                          (height / 2, "as white (gote)", WHITE_SIDE, as_white)):
        values = [float("nan") if s is None else 100.0 * s for s in scores]
        axes.barh([i + offset for i in y], values, height=height, color=colour, label=label)
    axes.axvline(50.0, color="#555555", linewidth=0.8, linestyle="--")
    _name_ticks(axes, names)
    axes.set_xlim(0, 100)
    axes.set_xlabel("score (%)")
    _legend_above(figure, axes)
    return figure


def length_histogram(plies: Mapping[str, Sequence[int]]) -> Figure:
    """Histogram of game lengths in plies, stacked by how the game was decided."""
    figure, axes = _figure(8.0, 3.6)
    labels = list(plies)
    data = [list(plies[label]) for label in labels]
    everything = [p for values in data for p in values]
    low, high = min(everything), max(everything)
    bins = min(40, max(1, high - low + 1))
    colours = {"black won": BLACK_SIDE, "white won": WHITE_SIDE, "draw": DRAW}
    axes.hist(data, bins=bins, range=(low - 0.5, high + 0.5), stacked=True, label=labels,
              color=[colours.get(label, "#888888") for label in labels])
    axes.set_xlabel("plies")
    axes.set_ylabel("games")
    _counts(axes.xaxis)
    _counts(axes.yaxis)
    _legend_above(figure, axes)
    axes.grid(axis="y", alpha=0.3)
    return figure


def book_growth_plot(run_ids: Sequence[int], series: Mapping[str, Sequence[int]]) -> Figure:
    """Cumulative counts run after run; series named "... (reported)" are dashed."""
    figure, axes = _figure(8.0, 3.6)
    styles = [(BLACK_SIDE, "o"), (WHITE_SIDE, "s"), (BLACK_SIDE, "^"), (WHITE_SIDE, "v")]
    for (label, values), (colour, marker) in zip(series.items(), styles):
        dashed = label.endswith("(reported)")
        axes.plot(list(run_ids), list(values), marker=marker, color=colour, label=label,
                  linestyle="--" if dashed else "-", alpha=0.7 if dashed else 1.0)
    axes.set_xlabel("run")
    axes.set_ylabel("cumulative count")
    axes.set_xticks(list(run_ids))
    axes.set_ylim(bottom=0)
    _counts(axes.yaxis)
    _legend_above(figure, axes, columns=2)
    axes.grid(alpha=0.3)
    return figure


def ply_histogram(plies: Sequence[int]) -> Figure:
    """Histogram of the ply of book positions."""
    figure, axes = _figure(8.0, 3.4)
    low, high = min(plies), max(plies)
    axes.hist(plies, bins=min(60, high - low + 1), range=(low - 0.5, high + 0.5),
              color=BLACK_SIDE)
    axes.set_xlabel("ply")
    axes.set_ylabel("positions")
    _counts(axes.xaxis)
    _counts(axes.yaxis)
    axes.grid(axis="y", alpha=0.3)
    return figure


def value_histogram(values: Mapping[str, Sequence[int]]) -> Figure:
    """Overlaid histograms of the best move's value (cp), one per side to move."""
    figure, axes = _figure(8.0, 3.4)
    everything = [v for series in values.values() for v in series]
    low, high = min(everything), max(everything)
    if low == high:
        low, high = low - 1, high + 1
    for (label, series), colour in zip(values.items(), (BLACK_SIDE, WHITE_SIDE)):
        if series:
            axes.hist(list(series), bins=40, range=(low, high), alpha=0.6, color=colour,
                      label=label)
    axes.set_xlabel("best move value (cp, side to move)")
    axes.set_ylabel("positions")
    _counts(axes.yaxis)
    _legend_above(figure, axes)
    axes.grid(axis="y", alpha=0.3)
    return figure


def mistakes_plot(labels: Sequence[str], counts: Mapping[str, Sequence[int]]) -> Figure:
    """Stacked bars of the mistakes found by each refine run (one series per kind)."""
    figure, axes = _figure(8.0, 3.4)
    x = list(range(len(labels)))
    bottom = [0] * len(labels)
    for (kind, series), colour in zip(counts.items(), (LOSS, BLACK_SIDE, WHITE_SIDE, WIN)):
        axes.bar(x, list(series), bottom=bottom, color=colour, label=kind)
        bottom = [a + b for a, b in zip(bottom, series)]
    axes.set_xticks(x, list(labels), parse_math=False)
    axes.set_ylabel("mistakes")
    _counts(axes.yaxis)
    _legend_above(figure, axes)
    axes.grid(axis="y", alpha=0.3)
    return figure
