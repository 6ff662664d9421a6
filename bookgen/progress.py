"""Progress bars on stderr, shown only when stderr is a terminal."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

# No monitor thread: the importer forks worker processes.
tqdm.monitor_interval = 0


def progress_bar(**kwargs: Any) -> tqdm:
    kwargs.setdefault("disable", None)  # None: off when not a TTY
    kwargs.setdefault("dynamic_ncols", True)
    kwargs.setdefault("leave", False)
    return tqdm(**kwargs)
