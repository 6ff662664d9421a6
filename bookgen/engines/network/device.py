"""Where a network runs: the device, fp16, onnxruntime's execution providers.

:class:`NetworkSettings` is the one description of how a ``torch:`` or
``onnx:`` evaluator runs, for every command that opens one (grow, refine's
``--iterate`` grow runs, self-play, matches, and ``blend:BOOK:INNER`` for its
INNER): ``device`` (``auto``, ``cpu``, ``cuda`` or ``cuda:N``), ``fp16``,
onnxruntime's ``providers``, the TensorRT engine cache and, for dlshogi's own
model files, dlshogi's network name (which fixes the activation, see
:mod:`bookgen.engines.network.dlshogi_models`). Its :meth:`~NetworkSettings.options`
are the evaluator constructor options that differ from the defaults.

The choice itself is made here without torch or onnxruntime imported, from
what they report (:func:`torch_device`, :func:`onnx_providers`), so that tests
can give a fake list of providers or a fake ``torch.cuda``. ``auto`` takes a
GPU when one is there and the CPU otherwise; a GPU that is asked for
(``cuda``, ``cuda:N``, ``--providers cuda`` or ``tensorrt``, ``--fp16``) but
cannot be had is a one-line :class:`~bookgen.errors.BookgenError`, never a
quiet run on the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bookgen.engines.network.naming import parse_network_name
from bookgen.errors import BookgenError, SettingsError

__all__ = ["DEVICES_HELP", "GPU_INSTALL", "PROVIDER_NAMES", "NetworkSettings", "device_class",
           "gpu_present", "onnx_providers", "parse_providers", "torch_device"]

GPU_INSTALL = "pip install 'bookgen[gpu]' (onnxruntime-gpu) and a CUDA build of torch"
DEVICES_HELP = "auto (CUDA when present), cpu, cuda or cuda:N"

# onnxruntime's execution providers that bookgen chooses from, best first.
PROVIDER_NAMES = {"tensorrt": "TensorrtExecutionProvider", "cuda": "CUDAExecutionProvider",
                  "cpu": "CPUExecutionProvider"}
_GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
_DEVICE = re.compile(r"auto|cpu|cuda(:(0|[1-9][0-9]{0,2}))?")


def parse_providers(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"tensorrt,cuda"`` (short or full onnxruntime names, in order) as full names."""
    if text is None:
        return ()
    items = text.split(",") if isinstance(text, str) else list(text)
    names: list[str] = []
    full = {name.lower(): name for name in PROVIDER_NAMES.values()}
    for item in (str(i).strip() for i in items):
        name = PROVIDER_NAMES.get(item.lower()) or full.get(item.lower())
        if name is None:
            raise SettingsError("network.providers",
                                f"has {item!r}: use {', '.join(PROVIDER_NAMES)} (in the order "
                                "to try them) or their onnxruntime names")
        if name not in names:
            names.append(name)
    return tuple(names)


@dataclass(frozen=True)
class NetworkSettings:
    """How a network evaluator runs (see the module's text).

    ``device``: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``. ``fp16``: compute
    in half precision (a GPU only). ``providers``: onnxruntime execution
    providers to try in this order (full names; empty: chosen by ``device``).
    ``trt_cache``: a directory where TensorRT keeps its built engines.
    ``dlshogi_network``: dlshogi's network name of a dlshogi ``.npz``/``.pth`` model
    (``resnet10_swish``, ``resnet15x224_swish``, ...; None: from the weights,
    ReLU unless the layout is ``resnet10_swish``'s).
    """

    device: str = "auto"
    fp16: bool = False
    providers: tuple[str, ...] = ()
    trt_cache: str | None = None
    dlshogi_network: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise SettingsError("network.device", f"must be {DEVICES_HELP}, not {self.device!r}")
        if not isinstance(self.fp16, bool):
            raise SettingsError("network.fp16", f"must be true or false, not {self.fp16!r}")
        object.__setattr__(self, "providers", parse_providers(self.providers))
        gpu = any(p in _GPU_PROVIDERS for p in self.providers)
        if self.device == "cpu" and gpu:
            raise SettingsError("network.providers", f"{SettingsError.FIELD} name a GPU but "
                                f"{SettingsError.mention('network.device')} is cpu")
        if self.device.startswith("cuda") and self.providers and not gpu:
            raise SettingsError("network.providers", f"{SettingsError.FIELD} name no GPU but "
                                f"{SettingsError.mention('network.device')} is {self.device}")
        if self.fp16 and (self.device == "cpu" or (self.providers and not gpu)):
            raise SettingsError("network.fp16", "needs a GPU (the CPU computes in fp32; an "
                                "fp16 ONNX file runs on the CPU without it)")
        if self.trt_cache is not None and not str(self.trt_cache):
            raise SettingsError("network.trt_cache", "must be a directory name")
        if self.dlshogi_network is not None:
            parse_network_name(self.dlshogi_network)

    @property
    def wants_gpu(self) -> bool:
        """A GPU is asked for (not only taken when present)."""
        return (self.device.startswith("cuda") or self.fp16
                or any(p in _GPU_PROVIDERS for p in self.providers))

    @property
    def device_index(self) -> int:
        """N of ``cuda:N`` (0 otherwise)."""
        return int(self.device.partition(":")[2] or 0)

    def options(self) -> dict[str, Any]:
        """The evaluator constructor options that differ from the defaults (in
        this order), as grow records them in its runs."""
        options: dict[str, Any] = {}
        if self.device != "auto":
            options["device"] = self.device
        if self.fp16:
            options["fp16"] = True
        if self.providers:
            options["providers"] = ",".join(self.providers)
        if self.trt_cache is not None:
            options["trt_cache"] = str(self.trt_cache)
        if self.dlshogi_network is not None:
            options["dlshogi_network"] = self.dlshogi_network
        return options


def torch_device(settings: NetworkSettings, cuda: Any, cuda_build: str | None) -> str:
    """The torch device ``settings`` choose: ``"cpu"`` or ``"cuda:N"``.

    ``cuda`` is ``torch.cuda`` (``is_available()``, ``device_count()``) and
    ``cuda_build`` ``torch.version.cuda`` (None for a CPU build of torch).
    """
    if settings.providers or settings.trt_cache is not None:
        raise BookgenError("providers and the TensorRT cache apply to onnx: models only "
                           "(torch: takes a device)")
    if settings.device == "cpu":
        return "cpu"
    if cuda_build is None:
        if not settings.wants_gpu:
            return "cpu"
        raise BookgenError(f"device {settings.device}{' with fp16' if settings.fp16 else ''} "
                           f"asked for, but this torch is a CPU build: {GPU_INSTALL}")
    count = int(cuda.device_count()) if cuda.is_available() else 0
    if count == 0:
        if not settings.wants_gpu:
            return "cpu"
        raise BookgenError(f"device {settings.device} asked for, but CUDA finds no GPU "
                           "(check the driver and CUDA_VISIBLE_DEVICES)")
    if settings.device_index >= count:
        raise BookgenError(f"device {settings.device} asked for, but CUDA finds {count} "
                           f"GPU{'s' if count > 1 else ''} (cuda:0 to cuda:{count - 1})")
    return f"cuda:{settings.device_index}"


def onnx_providers(settings: NetworkSettings, available: Sequence[str]
                   ) -> list[tuple[str, dict[str, Any]]]:
    """onnxruntime's providers with their options, in order, for ``settings``, from
    ``available`` (``onnxruntime.get_available_providers()``).

    ``auto`` takes TensorRT, CUDA and the CPU in that order where offered; ``cuda``
    TensorRT where offered and CUDA, which must be; ``cpu`` the CPU. Providers
    asked for by name must all be offered.
    """
    if settings.dlshogi_network is not None:
        raise BookgenError("a dlshogi network name applies to torch: models (.npz, .pth) "
                           "only: an ONNX file holds its activation")
    offered = list(available)
    if settings.providers:
        missing = [p for p in settings.providers if p not in offered]
        if missing:
            raise BookgenError(f"{', '.join(missing)} asked for, but this onnxruntime offers "
                               f"only {', '.join(offered) or 'none'}: "
                               + (GPU_INSTALL if any(p in _GPU_PROVIDERS for p in missing)
                                  else "reinstall onnxruntime"))
        chosen = list(settings.providers)
    elif settings.device == "cpu":
        chosen = ["CPUExecutionProvider"]
    elif settings.wants_gpu:
        if "CUDAExecutionProvider" not in offered:
            raise BookgenError(f"device {settings.device}{' with fp16' if settings.fp16 else ''}"
                               f" asked for, but this onnxruntime offers only "
                               f"{', '.join(offered) or 'none'}: {GPU_INSTALL}")
        chosen = [p for p in _GPU_PROVIDERS if p in offered]
    else:
        chosen = [p for p in (*_GPU_PROVIDERS, "CPUExecutionProvider") if p in offered]
    if "CPUExecutionProvider" not in chosen and "CPUExecutionProvider" in offered:
        chosen.append("CPUExecutionProvider")  # for the nodes a GPU provider does not take
    if settings.fp16 and chosen[0] == "CPUExecutionProvider":
        raise BookgenError("fp16 asked for, but onnxruntime would run on the CPU")
    index = settings.device_index
    result: list[tuple[str, dict[str, Any]]] = []
    for name in chosen:
        options: dict[str, Any] = {}
        if name == "TensorrtExecutionProvider":
            options = {"device_id": index, "trt_fp16_enable": settings.fp16}
            if settings.trt_cache is not None:
                options.update(trt_engine_cache_enable=True,
                               trt_engine_cache_path=str(settings.trt_cache))
        elif name == "CUDAExecutionProvider":
            options = {"device_id": index}
        result.append((name, options))
    return result


def gpu_present(runtime: str) -> bool:
    """Whether ``runtime`` (``"torch"`` or ``"onnx"``) offers a GPU here: a CUDA
    build of torch that finds a GPU, or an onnxruntime with the CUDA provider.
    The one device query behind :func:`device_class` (tests replace it)."""
    if runtime == "torch":
        try:
            import torch
        except ImportError:
            return False
        return (torch.version.cuda is not None and torch.cuda.is_available()
                and torch.cuda.device_count() > 0)
    try:
        import onnxruntime
    except ImportError:
        return False
    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def device_class(settings: NetworkSettings, runtime: str) -> str:
    """``"cuda"`` or ``"cpu"``: where a ``runtime`` network (``"torch"`` or
    ``"onnx"``) runs with ``settings``, for the defaults that depend on it
    (batch size, parallel searches). A GPU asked for counts as there (the
    evaluator says so when it is not); ``auto`` asks :func:`gpu_present`."""
    if settings.device == "cpu" or (settings.providers and not settings.wants_gpu):
        return "cpu"
    if settings.wants_gpu:
        return "cuda"
    return "cuda" if gpu_present(runtime) else "cpu"
