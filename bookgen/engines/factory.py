"""The evaluator named by a spec string or by settings, and the MCTS batch sizes per kind.

``make_evaluator(spec)`` builds one from its command-line name, and
``open_evaluator(settings)`` from :class:`~bookgen.engines.settings.EngineSettings`:

- ``builtin``: material and piece-placement evaluation with a small
  alpha-beta + quiescence search on cshogi (needs nothing installed);
- ``usi:COMMAND``: any USI engine through bookgen's own USI client;
- ``torch:PATH`` / ``onnx:PATH``: a dlshogi-shaped residual network (bookgen's
  model files, dlshogi's ``.npz``/``.pth``/ONNX files), on the device its
  :class:`~bookgen.engines.network.device.NetworkSettings` options choose;
- ``blend:BOOK:INNER``: book priors blended into INNER (dlshogi Use_Book_Policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from bookgen.engines.protocols import AnalysisMode, Evaluator
from bookgen.engines.spec import EngineSpec, parse_spec

if TYPE_CHECKING:  # cshogi stays unloaded for `bookgen --help`
    from bookgen.engines.restart import EngineLabel
    from bookgen.engines.settings import EngineSettings

__all__ = ["DEFAULT_BATCH_SIZES", "DEFAULT_PARALLEL_GAMES", "DEFAULT_PARALLEL_SEARCHES",
           "GPU_BATCH_SIZE", "GPU_PARALLEL_SEARCHES", "batch_size_help", "default_batch_size",
           "default_device", "default_parallel_games", "default_parallel_searches",
           "make_evaluator", "open_evaluator", "parallel_games_help", "parallel_searches_help"]

# Leaves an MCTS search evaluates together, when --batch-size is not given.
# The built-in evaluator costs the same per leaf at any batch size; a network
# pays a fixed price per call. Measured on 2 cores with the 5 x 64 model,
# 3 positions grown at 800 playouts (median of 3 runs, a busy machine): torch
# 5.6 s at batch 1, 4.9 at 8, 2.8 at 16, 3.9 at 32; onnx 3.0 s at 1 and 2.1-3.1
# at 8-64. 16 keeps the search close to one leaf at a time (50 batches for 800
# playouts). usi: evaluators search by themselves and do not use it.
DEFAULT_BATCH_SIZES = {"builtin": 1, "usi": 1, "torch": 16, "onnx": 16}
# A network on a GPU: a batch of 256 costs little more than a batch of 1
# (dlshogi runs batches in the hundreds), filled by 64 searches of 4 leaves.
GPU_BATCH_SIZE = 256
GPU_PARALLEL_SEARCHES = 64
_NETWORKS = ("torch", "onnx")


def default_device(spec: str | EngineSpec, options: Mapping[str, Any] | None = None) -> str:
    """``"cuda"`` or ``"cpu"``: where the evaluator of ``spec`` (``blend:BOOK:INNER``:
    INNER) runs with its constructor ``options`` (``device``, ``fp16``,
    ``providers``; none: ``auto``), for the defaults below
    (:func:`bookgen.engines.network.device.device_class`). Only networks ask
    for a GPU; the others are ``"cpu"``."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    kind = spec.base.kind
    if kind not in _NETWORKS:
        return "cpu"
    from bookgen.engines.network.device import NetworkSettings, device_class

    options = options or {}
    settings = NetworkSettings(device=options.get("device", "auto"),
                               fp16=bool(options.get("fp16", False)),
                               providers=options.get("providers") or ())
    return device_class(settings, kind)


def _by_kind(defaults: dict[str, int], gpu: int, spec: str | EngineSpec,
             options: Mapping[str, Any] | None) -> int:
    """``defaults`` for the kind of the spec that evaluates (``blend:BOOK:INNER``:
    INNER's), ``gpu`` for a network on a GPU."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    kind = spec.base.kind
    if kind in _NETWORKS and default_device(spec, options) == "cuda":
        return gpu
    return defaults.get(kind, 1)


def default_batch_size(spec: str | EngineSpec, options: Mapping[str, Any] | None = None) -> int:
    """The MCTS batch size used for ``spec`` when none is given (``blend:BOOK:INNER``:
    INNER's), on the device its evaluator ``options`` choose (:func:`default_device`)."""
    return _by_kind(DEFAULT_BATCH_SIZES, GPU_BATCH_SIZE, spec, options)


# Positions one grow worker expands at once (``--parallel-searches``) when not
# given: their searches' leaves share the evaluator's batches. The built-in
# evaluator gains nothing from batches; a network fills its batch of 16 with
# 4 searches of 4 leaves each (less virtual loss in each search than one
# search of 16 leaves), see benchmarks/bench_grow.py --network.
DEFAULT_PARALLEL_SEARCHES = {"builtin": 1, "usi": 1, "torch": 4, "onnx": 4}


def default_parallel_searches(spec: str | EngineSpec,
                              options: Mapping[str, Any] | None = None) -> int:
    """``grow --parallel-searches`` for ``spec``
    when none is given (``blend:BOOK:INNER``: INNER's), on the device its evaluator
    ``options`` choose (:func:`default_device`)."""
    return _by_kind(DEFAULT_PARALLEL_SEARCHES, GPU_PARALLEL_SEARCHES, spec, options)


# Games one self-play worker plays at once (``selfplay --parallel-games``) when
# not given: on the CPU one (each game's search takes the whole batch, as
# before: games played together search with batch / K leaves and were no
# faster here, see benchmarks/bench_selfplay.py --network); on a GPU 64.
DEFAULT_PARALLEL_GAMES = {"builtin": 1, "usi": 1, "torch": 1, "onnx": 1}


def default_parallel_games(spec: str | EngineSpec,
                           options: Mapping[str, Any] | None = None) -> int:
    """``selfplay --parallel-games`` for an MCTS player over ``spec`` when none is
    given, on the device its evaluator ``options`` choose (:func:`default_device`)."""
    return _by_kind(DEFAULT_PARALLEL_GAMES, GPU_PARALLEL_SEARCHES, spec, options)


def parallel_games_help() -> str:
    """:func:`default_parallel_games` in words, for the --parallel-games help text."""
    return (f"default: {_network_default(DEFAULT_PARALLEL_GAMES, GPU_PARALLEL_SEARCHES)}, "
            f"{DEFAULT_PARALLEL_GAMES['builtin']} otherwise")


def _network_default(defaults: dict[str, int], gpu: int) -> str:
    cpu = sorted({size for kind, size in defaults.items() if kind in _NETWORKS})
    assert len(cpu) == 1
    return f"auto: {cpu[0]} on cpu, {gpu} on cuda for torch: and onnx: (by --device)"


def parallel_searches_help() -> str:
    """The defaults above in words, for --parallel-searches help texts."""
    return (f"default: {_network_default(DEFAULT_PARALLEL_SEARCHES, GPU_PARALLEL_SEARCHES)}, "
            f"{DEFAULT_PARALLEL_SEARCHES['builtin']} for builtin and usi: "
            "(blend: as its inner evaluator)")


def batch_size_help() -> str:
    """The defaults above in words, for --batch-size help texts."""
    others = sorted({size for kind, size in DEFAULT_BATCH_SIZES.items()
                     if kind not in _NETWORKS and kind != "usi"})
    assert others == [DEFAULT_BATCH_SIZES["builtin"]]
    return (f"default: {_network_default(DEFAULT_BATCH_SIZES, GPU_BATCH_SIZE)}, "
            f"{others[0]} for builtin (blend: as its inner evaluator)")


def make_evaluator(spec: str | EngineSpec, **options: Any) -> Evaluator:
    """The evaluator named by ``spec`` (an analyser spec); ``options`` go to its
    constructor."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    if spec.kind == "builtin":
        from bookgen.engines.builtin.analyser import BuiltinEvaluator
        return BuiltinEvaluator(**options)
    if spec.kind == "usi":
        from bookgen.engines.usi.analyser import UsiEvaluator
        return UsiEvaluator(spec.argument, **options)
    if spec.kind == "torch":
        from bookgen.engines.network.analyser import TorchEvaluator
        return TorchEvaluator(spec.argument, **options)
    if spec.kind == "onnx":
        from bookgen.engines.network.analyser import OnnxEvaluator
        return OnnxEvaluator(spec.argument, **options)
    if spec.kind == "blend" and spec.inner is not None:
        from bookgen.engines import blend
        blend_options = {name: options.pop(name) for name in blend.OPTIONS if name in options}
        blend.check_options(**blend_options)
        inner = make_evaluator(spec.inner, **options)
        try:
            return blend.BlendEvaluator(spec.argument, inner, **blend_options)
        except BaseException:
            inner.close()
            raise
    raise ValueError(f"{spec} is not an analyser")


def open_evaluator(settings: EngineSettings, mode: AnalysisMode = "multipv-lines",
                   label: EngineLabel | None = None) -> Evaluator:
    """The evaluator ``settings`` describe.

    ``mode="best-line"`` (refine search) analyses each position as one best
    line: the built-in search with margin 0 and no priors (depth 4 unless
    the limits say), a USI engine in its ``best-line`` mode. ``label`` words
    a USI engine's start errors (default: the evaluator's words).
    """
    options = settings.evaluator_options()
    kind = settings.spec.base.kind
    if mode == "best-line":
        if kind == "builtin":
            from bookgen.engines.builtin.alphabeta import PLAY_DEPTH

            options.setdefault("depth", PLAY_DEPTH)
            options.update(margin=0, priors=False)
        elif kind == "usi":
            options["mode"] = mode
        else:
            raise ValueError(f"{settings.spec} has no best-line mode")
    if kind == "usi" and label is not None:
        options["label"] = label
    return make_evaluator(settings.spec, **options)
