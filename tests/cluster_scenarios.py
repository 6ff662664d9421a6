"""The cluster scenarios of tests/test_cluster.py, run in one process that owns a
real two-node Ray cluster (``ray.cluster_utils.Cluster``, one CPU per node).

Run as ``python tests/cluster_scenarios.py DIR`` inside a private network
namespace whose only interface is loopback, and a private process namespace
whose first process it is (test_cluster.py starts it under ``unshare --net
--pid``): Ray binds 127.0.0.1 and can reach nothing else, and every process
of the cluster dies with this one, however it ends. Every
command is the real ``bookgen`` command line in a process of its own, a driver
that connects to the cluster with ``--cluster ADDRESS``; the local runs it is
compared with are the same commands without ``--cluster``. What each scenario
did (exit codes, ``--json`` outputs, stderr) goes to DIR/report.json, its
books and results files stay in DIR: the tests read and compare them.

Faults come at fault points (``BOOKGEN_FAULT``), never after a sleep: the
driver stops itself (SIGSTOP) at its N-th recorded result, this process waits
for the stop (``waitpid`` with ``WUNTRACED``), removes a node or kills an
actor, and lets the driver go on (SIGCONT).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAKES = ROOT / "tests" / "fake_engines"
PYTHON = sys.executable
FSF = "/usr/games/fairy-stockfish"
NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 80 * 1024 ** 2,
        "resources": {"fsf": 1}}
TIMEOUT = 240


class Scenarios:
    def __init__(self, folder: Path, address: str) -> None:
        self.folder = folder
        self.address = address
        self.report: dict[str, object] = {}

    def run(self, name: str, *args: object, fault: str | None = None,
            cluster: bool = True) -> dict[str, object]:
        """``bookgen ARGS [--cluster ADDRESS]`` to the end; its exit code, stdout, stderr."""
        process = self.start(*args, fault=fault, cluster=cluster)
        stdout, stderr = process.communicate(timeout=TIMEOUT)
        return self.record(name, process.returncode, stdout, stderr)

    def start(self, *args: object, fault: str | None = None,
              cluster: bool = True) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if k != "BOOKGEN_FAULT"}
        if fault is not None:
            env["BOOKGEN_FAULT"] = fault
        command = [PYTHON, "-m", "bookgen.cli", *map(str, args)]
        if cluster:
            command += ["--cluster", self.address]
        return subprocess.Popen(command, cwd=self.folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def record(self, name: str, returncode: int, stdout: str, stderr: str
               ) -> dict[str, object]:
        entry = {"returncode": returncode, "stdout": stdout, "stderr": stderr[-4000:]}
        self.report[name] = entry
        return entry


def wait_stopped(process: subprocess.Popen) -> None:
    """Until ``process`` stops itself at its fault point (an event, not a time)."""
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        raise SystemExit(f"the driver ended instead of stopping: {status}")


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    os.kill(process.pid, signal.SIGCONT)
    stdout, stderr = process.communicate(timeout=TIMEOUT)
    return process.returncode, stdout, stderr


def actor_pids() -> list[int]:
    """The processes of this process tree running a bookgen worker actor."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if command.startswith("ray::_Worker") and _descends(int(entry.name), os.getpid()):
            found.append(int(entry.name))
    return sorted(found)


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 0:
        if pid == ancestor:
            return True
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat.rpartition(")")[2].split()[1])
    return False


def _poisoned(task: int) -> int:
    """A task function whose negative tasks kill their actor's process."""
    if task < 0:
        os._exit(3)
    return task


def _nothing() -> None:
    pass


def runner_scenarios(s: Scenarios) -> None:
    """The runner itself, driven from this process: a task that kills every actor it
    is given, among tasks that do not."""
    import ray

    from bookgen.workers.cluster import ClusterSettings, RayRunner, WorkerLost

    ray.init(address=s.address, logging_level="ERROR", log_to_driver=False)
    try:
        runner: RayRunner[int, object] = RayRunner(
            ClusterSettings(s.address, workers=2), _poisoned, _nothing, (),
            on_lost=lambda task, why: ["lost", task, why])
        tasks = [0, 1, 2, -1, 3, 4, 5, 6]
        for task in tasks:
            runner.submit(task)
        results: list[object] = []
        while len(results) < len(tasks):
            results += runner.collect()
        runner.close()
        s.report["poisoned_skipped"] = {"results": results, "replaced": runner.replaced}
        runner = RayRunner(ClusterSettings(s.address, workers=2), _poisoned, _nothing, ())
        runner.submit(-1)
        try:
            runner.collect()
            error = ""
        except WorkerLost as lost:
            error = str(lost)
        runner.terminate()
        s.report["poisoned_raised"] = error
    finally:
        ray.shutdown()


def main() -> None:
    folder = Path(sys.argv[1]).resolve()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True,
                      head_node_args={**NODE, "include_dashboard": False})
    cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    s = Scenarios(folder, cluster.address)
    s.report["cluster_start_s"] = round(time.perf_counter() - started, 1)
    s.report["address"] = cluster.address
    try:
        scenarios(s, cluster)
    finally:
        (folder / "report.json").write_text(json.dumps(s.report, indent=1))
        cluster.shutdown()


def scenarios(s: Scenarios, cluster: object) -> None:
    fake = f"usi:{PYTHON} {FAKES / 'crash_engine.py'}"
    grow = ("grow", "--playouts", "20", "--max-ply", "3", "--positions", "500", "--json")
    # grow with the built-in evaluator: one actor (the order of a local run), then two
    # (the same exhausted tree, in another order)
    s.run("grow_local", *grow, "-b", "grow-local.sqlite", cluster=False)
    s.run("grow_cluster_1", *grow, "-b", "grow-cluster-1.sqlite", "--workers", "1")
    s.run("grow_cluster_2", *grow, "-b", "grow-cluster-2.sqlite")
    # --cluster local: a throw-away instance of its own (not the cluster running here)
    s.run("grow_local_instance", *grow, "-b", "grow-local-instance.sqlite", "--workers", "1",
          "--cluster", "local", cluster=False)
    # grow with fairy-stockfish, on nodes that have it (a custom resource)
    fsf = ("grow", "--evaluator", f"usi:{FSF}", "--engine-option", "Threads=1",
           "--engine-option", "USI_Hash=16", "--nodes", "3000", "--multipv", "4",
           "--positions", "8", "--json")
    s.run("fsf_local", *fsf, "-b", "fsf-local.sqlite", cluster=False)
    s.run("fsf_cluster", *fsf, "-b", "fsf-cluster.sqlite", "--workers", "1",
          "--worker-resources", "num_cpus=1,fsf=1")
    # refine search (two actors) and a match (two actors) against the local runs
    for name in ("local", "cluster"):
        book = f"search-{name}.sqlite"
        (s.folder / book).write_bytes((s.folder / "grow-local.sqlite").read_bytes())
        s.run(f"search_{name}", "refine", "search", "-b", book, "--depth", "2", "--json",
              cluster=name == "cluster")
    (s.folder / "openings.txt").write_text("startpos\nstartpos moves 7g7f\n"
                                           "startpos moves 2g2f 8c8d\n")
    for name in ("local", "cluster"):
        s.run(f"match_{name}", "match", "--builtin", "a", "--builtin", "b", "--option",
              "a:depth=1", "--option", "b:depth=2", "--openings", "openings.txt", "--nodes",
              "1", "--max-ply", "40", "-o", f"match-{name}.sqlite", "--json", "--quiet",
              cluster=name == "cluster")
    # self-play: the games depend only on the seed and their number
    (s.folder / "starts.txt").write_text("startpos\nstartpos moves 7g7f 3c3d\n")
    for name in ("local", "cluster"):
        s.run(f"selfplay_{name}", "selfplay", "--starts", "starts.txt", "-o",
              f"selfplay-{name}.hcpe", "--games", "4", "--playouts", "10", "--max-ply", "24",
              "--json", cluster=name == "cluster")
    # an engine that crashes on every second search, restarted inside its actor
    for name in ("local", "cluster"):
        book = f"crash-{name}.sqlite"
        (s.folder / book).write_bytes((s.folder / "grow-local.sqlite").read_bytes())
        s.run(f"crash_{name}", "refine", "search", "-b", book, "--engine", fake, "--limit",
              "6", "--json", cluster=name == "cluster")
    # refine mistakes --iterate: its grow runs and its search on one actor
    for name in ("local", "cluster"):
        book = f"mistakes-{name}.sqlite"
        (s.folder / book).write_bytes((s.folder / "search-local.sqlite").read_bytes())
        s.run(f"mistakes_{name}", "refine", "mistakes", "-b", book, "--iterate",
              "--max-iterations", "1", "--expand", "2", "--playouts", "20", "--threshold", "0",
              "--diff", "20", "--workers", "1", "--json", cluster=name == "cluster")
    runner_scenarios(s)
    # an actor killed while the driver waits at its second recorded search
    book = "killed-actor.sqlite"
    (s.folder / book).write_bytes((s.folder / "grow-local.sqlite").read_bytes())
    driver = s.start("refine", "search", "-b", book, "--depth", "2", "--json",
                     fault="refine-search-recorded@2:stop")
    wait_stopped(driver)
    actors = actor_pids()
    if actors:
        os.kill(actors[0], signal.SIGKILL)
    entry = s.record("killed_actor", *finish(driver))
    entry["actors_before"] = len(actors)
    # Ctrl-C at the driver's 3rd expansion: the actors are killed, the run interrupted
    s.run("ctrl_c", "grow", "-b", "ctrl-c.sqlite", "--playouts", "20", "--positions", "40",
          "--json", fault="grow-expanded@3:SIGINT")
    # the driver killed with -9 at its 4th expansion, then the same command again
    again = ("grow", "-b", "killed-driver.sqlite", "--playouts", "20", "--positions", "12",
             "--json")
    s.run("driver_killed", *again, fault="grow-expanded@4")
    s.run("driver_rerun", *again)
    # a node removed while the driver waits at its 3rd expansion: the run goes on
    # on the node left
    driver = s.start("grow", "-b", "node-removed.sqlite", "--playouts", "20", "--positions",
                     "16", "--json", fault="grow-expanded@3:stop")
    wait_stopped(driver)
    worker_nodes = [node for node in cluster.worker_nodes]  # type: ignore[attr-defined]
    cluster.remove_node(worker_nodes[-1])  # type: ignore[attr-defined]
    entry = s.record("node_removed", *finish(driver))
    entry["nodes_before"] = 1 + len(worker_nodes)


if __name__ == "__main__":
    main()
