"""Option decorators that several commands share.

Each factory takes the help text its commands show today (they differ in
wording from command to command), so that sharing a decorator changes no
``--help``. Only what is needed to build the help texts is imported here: the
book's default file name and the evaluators' default batch sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from bookgen.engines.factory import batch_size_help
from bookgen.errors import BookgenError, SettingsError
from bookgen.store import DEFAULT_BOOK

if TYPE_CHECKING:
    from bookgen.workers.cluster import ClusterSettings

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

DEFAULT_TIMEOUT_HELP = (
    "By default the wait scales with the limit: 1.5 x the time + 10 s for byoyomi or "
    "movetime, 10 s + nodes / 10,000 s for --nodes (20 s for 100,000 nodes), "
    "10 s + 2^(depth/2) / 16 s for --depth (74 s for depth 20).")
"""The defaults of ``--engine-timeout``
(:func:`bookgen.engines.usi.client.default_search_timeout`)."""

wait_option = click.option(
    "--wait", is_flag=True,
    help="If another bookgen command is writing the book, wait for it to finish "
         "(default: fail at once, naming it).")


def book_option(help: str = "The SQLite book file.", *,
                default: str | None = DEFAULT_BOOK) -> Decorator:
    """``-b/--book``: the book file (``default`` None: no book unless given)."""
    return click.option("-b", "--book", default=default, show_default=default is not None,
                        type=click.Path(dir_okay=False), help=help)


def output_option(help: str, *, required: bool = True) -> Decorator:
    """``-o/--output``: the file a command writes."""
    return click.option("-o", "--output", required=required, type=click.Path(dir_okay=False),
                        help=help)


def json_option(help: str = "Print the summary as JSON.") -> Decorator:
    """``--json``: print the result as JSON (parameter ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def seed_option(help: str | None = None) -> Decorator:
    """``--seed``: an integer seed, default 0."""
    return click.option("--seed", type=int, default=0, show_default=True, help=help)


def workers_option(help: str, *, default: int | None = 1) -> Decorator:
    """``--workers``: processes working at once (``default`` None: the library decides)."""
    return click.option("--workers", type=click.IntRange(1), default=default,
                        show_default=default is not None, help=help)


def batch_size_option(help: str) -> Decorator:
    """``--batch-size`` of an MCTS search; ``help`` is followed by the defaults."""
    return click.option("--batch-size", type=click.IntRange(1), default=None,
                        help=help + batch_size_help() + ".")


def draw_value_options(black_help: str) -> Decorator:
    """``--draw-value-black`` and ``--draw-value-white``, per mille of a win."""
    black = click.option("--draw-value-black", type=click.IntRange(0, 1000), default=500,
                         show_default=True, help=black_help)
    white = click.option("--draw-value-white", type=click.IntRange(0, 1000), default=500,
                         show_default=True, help="The same for white.")
    return lambda function: black(white(function))


# The USI limits and options of grow, refine search and selfplay (each command
# orders and words them its own way).

def engine_options_option(help: str) -> Decorator:
    """``--engine-option NAME=VALUE`` (repeatable; parameter ``engine_options``)."""
    return click.option("--engine-option", "engine_options", multiple=True,
                        metavar="NAME=VALUE", help=help)


def nodes_option(help: str) -> Decorator:
    return click.option("--nodes", type=click.IntRange(1), help=help)


def byoyomi_option(help: str) -> Decorator:
    return click.option("--byoyomi", type=click.IntRange(1), help=help)


def movetime_option(help: str = "usi: go movetime MS.") -> Decorator:
    return click.option("--movetime", type=click.IntRange(1), help=help)


def depth_option(help: str) -> Decorator:
    return click.option("--depth", type=click.IntRange(1), help=help)


def engine_timeout_option(help: str) -> Decorator:
    """``--engine-timeout`` in seconds; ``help`` is followed by the defaults."""
    return click.option("--engine-timeout", type=click.FloatRange(0, min_open=True),
                        help=help + " " + DEFAULT_TIMEOUT_HELP)


# A Ray cluster for the workers of grow, refine search, refine mistakes --iterate,
# selfplay and match (bookgen.workers.cluster).

CLUSTER_HELP = (
    "Run the workers as actors of a Ray cluster (pip install 'bookgen[ray]'): local (a "
    "throw-away Ray instance on this machine), auto (the cluster this machine joined with "
    "'ray start'), HOST:PORT of the head node, or ray://HOST:10001. The book (results file, "
    "output) stays here, written by this process only. Engines and models are given by path: "
    "the same path must hold them on every node. {workers} is then the number of actors "
    "(default: as many as the cluster holds).")


def cluster_options(workers_flag: str = "--workers") -> Decorator:
    """``--cluster ADDRESS`` and ``--worker-resources NAME=AMOUNT`` (repeatable);
    :func:`cluster_settings` makes their settings."""
    cluster = click.option("--cluster", metavar="ADDRESS",
                           help=CLUSTER_HELP.format(workers=workers_flag))
    resources = click.option(
        "--worker-resources", "worker_resources", multiple=True, metavar="NAME=AMOUNT",
        help="--cluster: what each worker actor needs (repeatable, or comma-separated): "
             "num_cpus (default 1), num_gpus, memory (bytes), or a custom resource the "
             "nodes were started with (ray start --resources '{\"fsf\": 1}'; fsf=1).")
    return lambda function: cluster(resources(function))


def cluster_settings(address: str | None, worker_resources: tuple[str, ...],
                     workers_param: str = "workers") -> ClusterSettings | None:
    """The settings of ``--cluster``/``--worker-resources`` (None without ``--cluster``);
    the number of actors is the command's ``workers_param`` when given on the command
    line, else as many as the cluster holds."""
    from bookgen.workers.cluster import ClusterSettings, parse_worker_resources

    if address is None:
        if worker_resources:
            raise BookgenError("--worker-resources applies to --cluster only")
        return None
    context = click.get_current_context()
    workers = None
    if context.get_parameter_source(workers_param) is not ParameterSource.DEFAULT:
        workers = context.params[workers_param]
    try:
        return ClusterSettings(address, parse_worker_resources(worker_resources), workers)
    except SettingsError as error:
        if error.field == "cluster.workers":  # the command's own flag (match: --concurrency)
            raise SettingsError(workers_param, error.message) from None
        raise


def network_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--device``, ``--fp16``, ``--providers``, ``--trt-cache`` and
    ``--dlshogi-network``: where a ``torch:``/``onnx:`` network runs. The command
    gets them as one parameter, ``network``, a
    :class:`~bookgen.engines.network.device.NetworkSettings` (put this decorator
    right above the function, under ``reports_errors``, which then reports its
    errors)."""
    from functools import wraps

    @wraps(function)
    def wrapper(*args: Any, device: str, fp16: bool, providers: str | None,
                trt_cache: str | None, dlshogi_network: str | None, **kwargs: Any) -> Any:
        from bookgen.engines.network.device import NetworkSettings, parse_providers

        network = NetworkSettings(device=device, fp16=fp16, providers=parse_providers(providers),
                                  trt_cache=trt_cache, dlshogi_network=dlshogi_network)
        return function(*args, network=network, **kwargs)

    options = [
        click.option("--device", default="auto", show_default=True, metavar="DEVICE",
                     help="torch:/onnx: where the network runs: auto (CUDA when present), "
                          "cpu, cuda or cuda:N. A GPU asked for but missing is an error."),
        click.option("--fp16", is_flag=True,
                     help="torch:/onnx: compute in half precision (GPU only)."),
        click.option("--providers", metavar="LIST",
                     help="onnx: onnxruntime execution providers to use, in order, from "
                          "tensorrt, cuda, cpu [default: by --device: tensorrt, cuda, cpu "
                          "where offered]."),
        click.option("--trt-cache", type=click.Path(file_okay=False),
                     help="onnx: directory where TensorRT keeps the engines it builds."),
        click.option("--dlshogi-network", metavar="NAME",
                     help="torch: dlshogi's network name of a dlshogi .npz/.pth model "
                          "(e.g. resnet10_swish, resnet15x224_swish), for its activation "
                          "[default: ReLU, or swish for resnet10_swish's layout]."),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper
