"""The report's figures (``bookgen.analysis.plots``): whole-number ticks on axes that count,
and legends that leave the bars and lines uncovered.

The figures are inspected as matplotlib objects after drawing them with
their own Agg renderer: tick positions inside the view limits, the legends'
window extents against every drawn bar and every plotted point.
"""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from bookgen.analysis import plots

# Small counts (left alone, matplotlib ticks them at 0.5 or 0.25 steps), and bars
# and lines that fill the axes, so no spot inside them is free for a legend.
FIGURES = {
    "wdl": lambda: plots.wdl_plot(["strong", "weak"], [11, 3], [2, 2], [3, 11]),
    "colour": lambda: plots.colour_score_plot(["strong", "weak"], [0.94, 0.96], [0.92, 0.9]),
    "lengths": lambda: plots.length_histogram(
        {"black won": list(range(50, 62)), "white won": list(range(50, 62)), "draw": [55]}),
    "growth": lambda: plots.book_growth_plot(
        [1, 2, 3], {"positions (in book)": [1, 2, 3], "moves (in book)": [1, 3, 3],
                    "positions (reported)": [1, 1, 2], "moves (reported)": [0, 0, 0]}),
    "ply": lambda: plots.ply_histogram([1, 2, 2, 3, 3, 4]),
    "values": lambda: plots.value_histogram({"black to move": list(range(-40, 40, 2)),
                                             "white to move": list(range(-39, 41, 2))}),
    "mistakes": lambda: plots.mistakes_plot(["3", "4", "5"], {"diff": [1, 2, 1],
                                                              "missed_mate": [1, 0, 1]}),
    "ratings": lambda: plots.ratings_plot(["a", "b"], [10.0, -10.0], [5.0, 5.0]),
}

# (figure, axis) pairs that count games, positions, plies, mistakes or book rows.
COUNT_AXES = [("lengths", "x"), ("lengths", "y"), ("growth", "y"), ("ply", "x"), ("ply", "y"),
              ("values", "y"), ("mistakes", "y")]


def drawn(name: str) -> Figure:
    figure = FIGURES[name]()
    assert isinstance(figure, Figure)
    figure.canvas.draw()
    return figure


@pytest.mark.parametrize(("name", "axis"), COUNT_AXES)
def test_count_axes_have_whole_number_ticks(name, axis):
    figure = drawn(name)
    axes = figure.axes[0]
    which = axes.xaxis if axis == "x" else axes.yaxis
    low, high = sorted(which.get_view_interval())
    ticks = [t for t in which.get_majorticklocs() if low - 1e-9 <= t <= high + 1e-9]
    assert len(ticks) >= 2, ticks
    assert all(float(t).is_integer() for t in ticks), f"{name} {axis}: {ticks}"


def _overlap(a, b) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(width, 0.0) * max(height, 0.0)


@pytest.mark.parametrize("name", ["wdl", "colour", "lengths", "growth", "values", "mistakes"])
def test_legends_leave_the_data_uncovered(name):
    figure = drawn(name)
    renderer = figure.canvas.get_renderer()
    legends = list(figure.legends) + [a.get_legend() for a in figure.axes if a.get_legend()]
    assert legends, f"{name} has no legend"
    boxes = [legend.get_window_extent(renderer) for legend in legends]
    bars = [p.get_window_extent(renderer) for a in figure.axes for p in a.patches
            if isinstance(p, Rectangle) and p.get_width() and p.get_height()]
    points = [xy for a in figure.axes for line in a.get_lines()
              for xy in line.get_transform().transform(line.get_xydata())]
    assert bars or points
    for box in boxes:
        for bar in bars:
            assert _overlap(box, bar) < 1.0, f"{name}: the legend covers a bar"
        for x, y in points:
            assert not box.contains(x, y), f"{name}: the legend covers a plotted point"


def test_png_bytes():
    assert plots.png(FIGURES["wdl"]()).startswith(b"\x89PNG\r\n\x1a\n")
