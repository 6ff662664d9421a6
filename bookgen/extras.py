"""Optional dependencies (extras) and the one-line error when one is missing.

``pip install bookgen`` installs what the built-in evaluator, USI engines,
``grow``, ``refine``, ``starts``, ``suite``, ``match`` and ``rate`` need. Three
extras add the rest (``bookgen[all]`` is all of them):

- ``nn``: torch, onnx and onnxruntime, for the network evaluators
  (``torch:PATH``, ``onnx:PATH``), ``bookgen model`` and ``bookgen train``;
- ``report``: matplotlib, for ``bookgen report``;
- ``serve``: starlette and uvicorn, for ``bookgen serve`` (the book explorer).
- ``ray``: Ray, for ``--cluster`` (:mod:`bookgen.workers.cluster`).

``gpu`` is ``nn`` for NVIDIA GPUs (onnxruntime-gpu instead of onnxruntime,
with a CUDA build of torch installed first); it provides the same modules, so
messages name ``nn``.

Code that needs one calls :func:`require_extra` before importing it.
"""

from __future__ import annotations

import importlib.util

from bookgen.errors import BookgenError

__all__ = ["EXTRAS", "MissingExtra", "require_extra"]

# extra -> the modules it provides
EXTRAS = {"nn": ("torch", "onnx", "onnxruntime"), "report": ("matplotlib",),
          "serve": ("starlette", "uvicorn"), "ray": ("ray",)}


class MissingExtra(BookgenError):
    """A feature needs a module of an extra that is not installed."""

    def __init__(self, module: str, extra: str, feature: str) -> None:
        super().__init__(f"{feature} needs {module}, which is not installed: "
                         f"pip install 'bookgen[{extra}]'")
        self.module = module
        self.extra = extra
        self.feature = feature

    def __reduce__(self) -> tuple[type[MissingExtra], tuple[str, str, str]]:
        # (raised in worker processes too: it must pickle with its three arguments)
        return MissingExtra, (self.module, self.extra, self.feature)


def require_extra(module: str, extra: str, feature: str) -> None:
    """Raise :class:`MissingExtra` if ``module`` (of the extra ``extra``) cannot be
    found; ``feature`` names what needs it in the message ("model init", "the
    torch:model.pt evaluator").

    The module is looked up, not imported (torch must be imported only after
    :mod:`bookgen.engines.network.model` has set its thread wait policy). An
    installed but broken module passes here and fails with its own error when
    imported.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):   # an import hook refuses it; None in sys.modules
        found = False
    if not found:
        raise MissingExtra(module, extra, feature)
