"""Tasks on a Ray cluster: :class:`RayRunner`, a :class:`~bookgen.workers.pool.TaskRunner`
whose workers are Ray actors, and :class:`ClusterSettings`, the part of grow's,
refine search's, refine mistakes', self-play's and match's settings that says
which cluster and what each actor needs (``--cluster``, ``--worker-resources``,
``--workers``).

Each actor runs the stage's initializer once (its own engine or network, for
its whole life) and then the stage's task function on the tasks it is given,
exactly as a worker of :class:`~bookgen.workers.pool.PoolRunner` does. The
driver (this process) keeps the queue of tasks, hands them to live actors and
returns the results; it stays the only writer of the book or results file.

Faults: an actor that dies (its process killed, out of memory, its node gone)
is replaced by a new one (placed wherever the cluster has room; it waits for
room when none is left) and the tasks it held go back to the front of the
queue. Its results never come back, so no task's result is returned twice,
and none is lost. A task that lost its actor :data:`MAX_ATTEMPTS` times is
given up: its result is then ``on_lost(task, why)`` when the stage can record
a failure (refine search: a failed position, tried again by a later run), else
the runner raises :class:`WorkerLost` (a
:class:`~bookgen.workers.pool.BrokenProcessPool`, what a dead local worker
raises). An exception raised by the initializer or by a task is raised here
as it was raised there, as with local workers.

Ray is the optional extra ``bookgen[ray]``: it is imported only when a runner
is made (:func:`bookgen.extras.require_extra` names the extra when it is
missing). Engines and model files reach the actors by path: the path given on
the command line must hold the same engine or model on every node.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bookgen.errors import BookgenError, SettingsError
from bookgen.extras import require_extra

__all__ = ["MAX_ATTEMPTS", "ClusterSettings", "RayRunner", "WorkerLost", "connected",
           "parse_worker_resources"]

T = TypeVar("T")
R = TypeVar("R")

MAX_ATTEMPTS = 3
"""How many times one task may lose its actor before the run gives up on it."""

# --worker-resources names that are actor options; any other name is a custom resource.
_OPTIONS = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}


class WorkerLost(BrokenProcessPool):
    """A task lost its actor :data:`MAX_ATTEMPTS` times (or no actor could be started)."""


def parse_worker_resources(texts: tuple[str, ...] | list[str]) -> dict[str, float]:
    """``("num_gpus=1", "num_cpus=4,fsf=1")`` as ``{"num_gpus": 1.0, "num_cpus": 4.0,
    "fsf": 1.0}``; a bad item is a :class:`SettingsError` of ``cluster.worker_resources``."""
    resources: dict[str, float] = {}
    for text in texts:
        for item in text.split(","):
            name, sep, value = item.strip().partition("=")
            name = name.strip()
            try:
                amount = float(value)
            except ValueError:
                amount = math.nan
            if not sep or not name or not math.isfinite(amount):
                raise SettingsError("cluster.worker_resources",
                                    f"bad {SettingsError.FIELD} item {item.strip()!r}: "
                                    "expected NAME=AMOUNT (num_cpus=4, num_gpus=1, fsf=1)")
            resources[name] = amount
    return resources


@dataclass(frozen=True)
class ClusterSettings:
    """Where a command's workers run when it runs them on a Ray cluster.

    ``address``: ``local`` (a throw-away Ray instance on this machine, ended
    with the command), ``auto`` (the cluster this machine belongs to, started
    with ``ray start``), ``HOST:PORT`` of a head node, or ``ray://HOST:10001``
    (Ray Client). ``worker_resources``: what one actor needs, Ray's names
    (``num_cpus``, ``num_gpus``, ``memory`` in bytes) or custom resources of
    the nodes (``fsf=1``); default one CPU. ``workers``: how many actors
    (None: as many as the cluster can hold)."""

    address: str = "local"
    worker_resources: Mapping[str, float] = field(default_factory=dict, hash=False)
    workers: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "worker_resources", dict(self.worker_resources))
        if not self.address.strip():
            raise SettingsError("cluster.address", "must not be empty (local, auto, "
                                "HOST:PORT or ray://HOST:PORT)")
        for name, amount in self.worker_resources.items():
            if not amount >= 0:
                raise SettingsError("cluster.worker_resources",
                                    f"{name}={amount:g}: must not be negative")
        if self.workers is not None and self.workers < 1:
            raise SettingsError("cluster.workers", "must be at least 1")
        # (a run on a cluster fails here, before it writes anything, without Ray)
        require_extra("ray", "ray", "--cluster")

    def actor_options(self) -> dict[str, Any]:
        """Ray's options of one actor: ``num_cpus`` (1 unless given), ``num_gpus``,
        ``memory`` and the custom ``resources``."""
        options: dict[str, Any] = {"num_cpus": 1.0}
        custom: dict[str, float] = {}
        for name, amount in self.worker_resources.items():
            if name in _OPTIONS:
                options[name] = amount
            else:
                custom[name] = amount
        if custom:
            options["resources"] = custom
        return options

    def needs(self) -> dict[str, float]:
        """What one actor takes of the cluster's resources, by Ray's resource names."""
        options = self.actor_options()
        needs = {_OPTIONS[name]: options[name] for name in _OPTIONS if name in options}
        needs.update(options.get("resources", {}))
        return {name: amount for name, amount in needs.items() if amount > 0}

    def params(self) -> dict[str, Any]:
        """How a run's ``runs.params`` records it."""
        return {"address": self.address, "worker_resources": dict(self.worker_resources),
                "workers": self.workers}


def _ray() -> Any:
    require_extra("ray", "ray", "--cluster")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # send nothing to Ray's servers
    return importlib.import_module("ray")


def connect(address: str) -> bool:
    """Connect this process to the cluster at ``address`` (see :class:`ClusterSettings`),
    unless it is connected already; True when it connected (and should disconnect)."""
    ray = _ray()
    if ray.is_initialized():
        return False
    # The actors' output stays in the cluster's logs; so do the raylets' notices, which
    # Ray would print on standard output (the commands' --json): bookgen says itself
    # on standard error when it lost a worker. (A private switch: without it, only
    # the notices come back.)
    try:
        worker: Any = importlib.import_module("ray._private.worker")
        worker._worker_logs_enabled = False
    except (ImportError, AttributeError):
        pass
    quiet: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        if address == "local":   # a new instance, even where a cluster runs already
            ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1",
                     **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, ValueError, RuntimeError) as error:
        raise BookgenError(f"--cluster {address}: cannot connect: "
                           f"{str(error).strip().splitlines()[0]}") from None
    return True


@contextmanager
def connected(cluster: ClusterSettings | None) -> Iterator[None]:
    """Stay connected to ``cluster`` (None: do nothing) for a block that makes several
    runners (``refine mistakes --iterate``: a ``local`` cluster is started once)."""
    owns = connect(cluster.address) if cluster is not None else False
    try:
        yield
    finally:
        if owns:
            _ray().shutdown()


class _Worker:
    """One actor: ``initializer(*initargs)`` once, then ``function`` on each task."""

    def __init__(self, function: Callable[[Any], Any], initializer: Callable[..., None],
                 initargs: tuple[Any, ...]) -> None:
        self.function = function
        self.error: BaseException | None = None
        try:
            initializer(*initargs)
        except Exception as error:  # raised by ready(), as the task error it is
            self.error = error

    def ready(self) -> int:
        if self.error is not None:
            raise self.error
        return os.getpid()

    def run(self, task: Any) -> Any:
        return self.function(task)


@dataclass
class _Slot:
    """An actor of the runner and the tasks it holds (ids)."""

    actor: Any
    ready: Any                      # the ObjectRef of its ready() call until it is live
    live: bool = False
    tasks: set[int] = field(default_factory=set)


class RayRunner(Generic[T, R]):
    """Tasks run by ``function`` (a module-level function) in Ray actors, each of which
    ran ``initializer(*initargs)`` once; ``queued_per_worker`` tasks are given to an
    actor at once (queued ones hide the round trip). ``on_lost(task, why)``: the
    result of a task given up (see the module docstring; None: raise WorkerLost).
    ``most``: no more actors than this (a run of 3 tasks needs no 100 actors)."""

    def __init__(self, cluster: ClusterSettings, function: Callable[[T], R],
                 initializer: Callable[..., None], initargs: tuple[Any, ...],
                 queued_per_worker: int = 1,
                 on_lost: Callable[[T, str], R] | None = None,
                 most: int | None = None) -> None:
        self.ray = _ray()
        self.cluster = cluster
        self.on_lost = on_lost
        self.queued_per_worker = queued_per_worker
        self.owns_connection = connect(cluster.address)
        self.exceptions = importlib.import_module("ray.exceptions")
        try:
            self.workers = cluster.workers or self._fitting()
            if most is not None:
                self.workers = max(1, min(self.workers, most))
            self.actor_class = self.ray.remote(_Worker).options(
                max_restarts=0, max_task_retries=0, **cluster.actor_options())
            # (the initargs go to the object store once, not once per actor)
            self.args = (function, initializer, self.ray.put(initargs))
            self.slots: list[_Slot] = [self._start() for _ in range(self.workers)]
        except BaseException:
            self._disconnect()
            raise
        self.tasks: dict[int, T] = {}
        self.attempts: dict[int, int] = {}
        self.queue: deque[int] = deque()
        self.running: dict[Any, tuple[_Slot, int]] = {}   # ObjectRef -> its actor and task
        self.next_id = 0
        self.replaced = 0

    def _fitting(self) -> int:
        """How many actors the cluster can hold (at least 1)."""
        total = self.ray.cluster_resources()
        needs = self.cluster.needs()
        if not needs:
            return max(1, int(total.get("CPU", 1)))
        fits = min(int(total.get(name, 0) // amount) for name, amount in needs.items())
        if fits < 1:
            wanted = ", ".join(f"{name}={amount:g}" for name, amount in needs.items())
            raise BookgenError(f"--cluster {self.cluster.address}: no node has what one worker "
                               f"needs ({wanted}; --worker-resources)")
        return fits

    def _start(self) -> _Slot:
        function, initializer, initargs = self.args
        actor = self.actor_class.remote(function, initializer, initargs)
        return _Slot(actor, actor.ready.remote())

    # -- the TaskRunner interface

    def capacity(self) -> int:
        return self.workers * self.queued_per_worker

    def live_workers(self) -> int:
        """The actors started and not lost."""
        return sum(slot.live for slot in self.slots)

    def submit(self, task: T) -> None:
        task_id = self.next_id
        self.next_id += 1
        self.tasks[task_id] = task
        self.queue.append(task_id)
        self._dispatch()

    def collect(self) -> list[R]:
        """Block until at least one task is done; return all done ones."""
        ray = self.ray
        while True:
            self._dispatch()
            waiting = list(self.running) + [slot.ready for slot in self.slots if not slot.live]
            if not self.running and not self.queue:
                raise RuntimeError("collect() with no task submitted")
            # A timeout, so that Ctrl-C (a Python signal handler) runs within a second.
            done, _ = ray.wait(waiting, num_returns=1, timeout=1.0)
            if not done:
                continue
            done, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
            results: list[R] = []
            for ref in done:   # (a lost actor's other refs are gone by now)
                if ref in self.running:
                    self._finished(ref, results)
                    continue
                starting = [slot for slot in self.slots if slot.ready is ref and not slot.live]
                if starting:
                    self._started(starting[0])
            if results:
                return results

    def close(self) -> None:
        """Drop the queued tasks and end the actors (their engines quit with them)."""
        self._end(graceful=True)

    def terminate(self) -> None:
        """Kill the actors now (their engines die with them), abandoning the tasks."""
        self._end(graceful=False)

    # -- inside

    def _dispatch(self) -> None:
        for slot in self.slots:
            while slot.live and self.queue and len(slot.tasks) < self.queued_per_worker:
                task_id = self.queue.popleft()
                slot.tasks.add(task_id)
                self.running[slot.actor.run.remote(self.tasks[task_id])] = (slot, task_id)

    def _started(self, slot: _Slot) -> None:
        try:
            self.ray.get(slot.ready)
        except self.exceptions.RayTaskError as error:  # the initializer raised
            raise _cause(error) from None
        except self.exceptions.RayError:
            self._lost(slot)
            return
        slot.live = True

    def _finished(self, ref: Any, results: list[R]) -> None:
        slot, task_id = self.running.pop(ref)
        slot.tasks.discard(task_id)
        try:
            result = self.ray.get(ref)
        except self.exceptions.RayTaskError as error:  # the task raised
            raise _cause(error) from None
        except self.exceptions.RayError:   # its actor died (process, memory, node)
            self.attempts[task_id] = self.attempts.get(task_id, 0) + 1
            if self.attempts[task_id] < MAX_ATTEMPTS:
                self.queue.appendleft(task_id)
            elif self.on_lost is None:
                raise WorkerLost(f"task {self.tasks[task_id]!r} lost its worker "
                                 f"{MAX_ATTEMPTS} times; the last time: "
                                 f"{_first_line(self.exceptions, ref, self.ray)}") from None
            else:
                why = (f"its worker was lost {MAX_ATTEMPTS} times; the last time: "
                       f"{_first_line(self.exceptions, ref, self.ray)}")
                results.append(self.on_lost(self.tasks.pop(task_id), why))
                del self.attempts[task_id]
            if slot in self.slots:
                self._lost(slot)
            return
        del self.tasks[task_id]
        self.attempts.pop(task_id, None)
        results.append(result)

    def _lost(self, slot: _Slot) -> None:
        """Replace a dead actor; its other tasks go back to the front of the queue."""
        print("bookgen: a worker on the cluster was lost (its process, memory or node): "
              "replaced, its tasks resubmitted", file=sys.stderr, flush=True)
        for ref, (owner, task_id) in list(self.running.items()):
            if owner is slot:
                del self.running[ref]
                self.queue.appendleft(task_id)
        self.ray.kill(slot.actor, no_restart=True)
        self.replaced += 1
        if self.replaced > max(10, 3 * self.workers):
            raise WorkerLost(f"--cluster {self.cluster.address}: {self.replaced} workers "
                             "lost; giving up")
        self.slots[self.slots.index(slot)] = self._start()

    def _end(self, *, graceful: bool) -> None:
        slots, self.slots = getattr(self, "slots", []), []
        self.queue.clear()
        self.running.clear()
        if graceful:
            # Each actor exits once its tasks are done: its engine quits as at the
            # end of a local worker (atexit handlers run).
            ends = [slot.actor.__ray_terminate__.remote() for slot in slots if slot.live]
            if ends:
                self.ray.wait(ends, num_returns=len(ends), timeout=30)
        for slot in slots:
            self.ray.kill(slot.actor, no_restart=True)
        self._disconnect()

    def _disconnect(self) -> None:
        if self.owns_connection:
            self.owns_connection = False
            self.ray.shutdown()


def _cause(error: Any) -> BaseException:
    """The exception a task or an initializer raised, as it was raised."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else BookgenError(str(error))


def _first_line(exceptions: Any, ref: Any, ray: Any) -> str:
    try:
        ray.get(ref)
    except exceptions.RayError as error:
        return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ""
