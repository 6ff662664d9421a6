"""grow, refine search, refine mistakes --iterate, selfplay and match on a real
two-node Ray cluster (``--cluster``, :mod:`bookgen.workers.cluster`).

The cluster (``ray.cluster_utils.Cluster``, two nodes of one CPU each) lives
in one process, tests/cluster_scenarios.py, started inside a private network
namespace whose only interface is loopback (``unshare --net``; the tests run
as root, as CI does): Ray binds 127.0.0.1 and can send nothing anywhere else.
It is also the first process of a private process namespace, so that no Ray
process outlives it.
That process runs every scenario once (the cluster starts once) as real
``bookgen`` commands, each a driver of its own, and leaves their books,
results and outputs here; each test below compares them with the same
command's local run or checks the book after a fault. Faults come at fault
points: the driver stops itself at its N-th recorded result while a node is
removed or an actor killed, or kills itself (``kill -9``) and is run again.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from bookcheck import analysis_mismatches, expansion_mismatches, inconsistencies, repeated_analyses
from bookgen.errors import SettingsError
from bookgen.workers.cluster import MAX_ATTEMPTS, ClusterSettings, parse_worker_resources
from conftest import PYTHON, ROOT, dump_book, integrity_ok, run_cli

SCENARIOS = ROOT / "tests" / "cluster_scenarios.py"

# The scenarios take 1-2 minutes on a loaded 2-core machine; the first test waits for them.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


class Ran:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.report = json.loads((folder / "report.json").read_text())

    def __getitem__(self, name: str) -> dict:
        return self.report[name]

    def json(self, name: str) -> dict:
        entry = self.report[name]
        assert entry["returncode"] == 0, entry["stderr"]
        return json.loads(entry["stdout"])

    def path(self, name: str) -> Path:
        return self.folder / name


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    folder = tmp_path_factory.mktemp("cluster")
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    assert unshare and ip, "the cluster tests need unshare (util-linux) and ip (iproute2)"
    # A network namespace with loopback only; a process namespace whose first process
    # is the scenarios' (sh execs it): when it ends, or the test kills unshare
    # (--kill-child), the kernel kills every Ray process left in it.
    proc = subprocess.run(
        [unshare, "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c",
         f'{ip} link set lo up && exec "$0" "$@"', PYTHON, str(SCENARIOS), str(folder)],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-6000:]}"
    return Ran(folder)


def _rows(path: Path, query: str) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query).fetchall()
    finally:
        conn.close()


def _book_checks(path: Path) -> None:
    """A grown book as grow keeps it: intact, values consistent, each expansion
    counted once by the run that made it."""
    assert integrity_ok(path)
    assert inconsistencies(path) == {"positions": [], "moves": []}
    assert expansion_mismatches(path) == []


ANALYSES = ("SELECT p.sfen, a.score, a.mate, a.bound, a.depth, a.bestmove, a.pv "
            "FROM analyses a JOIN positions p ON p.id = a.position_id ORDER BY p.sfen")


# --------------------------------------------------------------------------
# the same results as the local backend


def test_grow_builtin_with_one_actor_grows_the_local_book(ran: Ran) -> None:
    local, cluster = ran.json("grow_local"), ran.json("grow_cluster_1")
    assert cluster["status"] == "done" and cluster["expansions"] == local["expansions"] > 50
    a, b = dump_book(ran.path("grow-local.sqlite")), dump_book(ran.path("grow-cluster-1.sqlite"))
    assert a["positions"] == b["positions"] and a["moves"] == b["moves"]
    params = json.loads(b["runs"][0][2])
    assert params["cluster"] == {"address": ran["address"], "worker_resources": {},
                                 "workers": 1}
    assert "cluster" not in json.loads(a["runs"][0][2])


def test_cluster_local_grows_the_local_book(ran: Ran) -> None:
    local, instance = ran.json("grow_local"), ran.json("grow_local_instance")
    assert instance["status"] == "done" and instance["expansions"] == local["expansions"]
    a = dump_book(ran.path("grow-local.sqlite"))
    b = dump_book(ran.path("grow-local-instance.sqlite"))
    assert a["positions"] == b["positions"] and a["moves"] == b["moves"]
    assert json.loads(b["runs"][0][2])["cluster"]["address"] == "local"


def test_grow_builtin_with_two_actors_exhausts_the_tree(ran: Ran) -> None:
    summary = ran.json("grow_cluster_2")
    assert summary["status"] == "done" and summary["stop_reason"] == "nothing left to expand"
    path = ran.path("grow-cluster-2.sqlite")
    _book_checks(path)
    expanded = _rows(path, "SELECT count(*) FROM positions WHERE expanded_run IS NOT NULL")
    assert expanded == [(summary["expansions"],)]
    assert json.loads(dump_book(path)["runs"][0][2])["cluster"]["workers"] is None


def test_grow_fairy_stockfish_on_nodes_that_have_it(ran: Ran) -> None:
    local, cluster = ran.json("fsf_local"), ran.json("fsf_cluster")
    assert cluster["status"] == "done" and cluster["expansions"] == local["expansions"] == 8
    a, b = dump_book(ran.path("fsf-local.sqlite")), dump_book(ran.path("fsf-cluster.sqlite"))
    assert a["positions"] == b["positions"] and a["moves"] == b["moves"]
    resources = json.loads(b["runs"][0][2])["cluster"]["worker_resources"]
    assert resources == {"num_cpus": 1.0, "fsf": 1.0}


def test_refine_search_on_two_actors_gives_the_local_analyses(ran: Ran) -> None:
    local, cluster = ran.json("search_local"), ran.json("search_cluster")
    assert cluster["analysed"] == local["analysed"] == local["selected"] > 50
    assert cluster["failed"] == 0
    a = _rows(ran.path("search-local.sqlite"), ANALYSES)
    b = _rows(ran.path("search-cluster.sqlite"), ANALYSES)
    assert a == b and len(b) == cluster["analysed"]


def test_match_on_two_actors_gives_the_local_games(ran: Ran) -> None:
    local, cluster = ran.json("match_local"), ran.json("match_cluster")
    assert cluster["played"] == local["played"] == 6
    assert cluster["points"] == local["points"]
    games = ("SELECT game_key, round, pair, opening, start_sfen, black, white, result, reason, "
             "detail, plies, moves FROM games ORDER BY game_key")
    a = _rows(ran.path("match-local.sqlite"), games)
    b = _rows(ran.path("match-cluster.sqlite"), games)
    assert a == b and len(b) == 6
    players = "SELECT name, spec, options, engine, author FROM players ORDER BY name"
    assert (_rows(ran.path("match-local.sqlite"), players)
            == _rows(ran.path("match-cluster.sqlite"), players))


def test_selfplay_on_two_actors_writes_the_local_records(ran: Ran) -> None:
    local, cluster = ran.json("selfplay_local"), ran.json("selfplay_cluster")
    assert cluster["games"] == local["games"] == 4 and cluster["positions"] > 0
    data = ran.path("selfplay-cluster.hcpe").read_bytes()
    assert data == ran.path("selfplay-local.hcpe").read_bytes() and len(data) > 0


def test_refine_mistakes_iterate_on_the_cluster_extends_as_locally(ran: Ran) -> None:
    local, cluster = ran.json("mistakes_local"), ran.json("mistakes_cluster")
    assert local["rounds"][0]["mistakes"] > 0 and local["rounds"][0]["expanded"] > 0
    assert cluster["rounds"] == local["rounds"]
    a = dump_book(ran.path("mistakes-local.sqlite"))
    b = dump_book(ran.path("mistakes-cluster.sqlite"))
    assert a["positions"] == b["positions"] and a["moves"] == b["moves"]
    assert (_rows(ran.path("mistakes-local.sqlite"), ANALYSES)
            == _rows(ran.path("mistakes-cluster.sqlite"), ANALYSES))


# --------------------------------------------------------------------------
# faults


def test_an_engine_crashing_in_its_actor_is_restarted_there(ran: Ran) -> None:
    local, cluster = ran.json("crash_local"), ran.json("crash_cluster")
    assert cluster["status"] == "done" and cluster["analysed"] == local["analysed"] == 6
    assert cluster["restarts"] > 0 and cluster["failed"] == 0
    assert (_rows(ran.path("crash-local.sqlite"), ANALYSES)
            == _rows(ran.path("crash-cluster.sqlite"), ANALYSES))


def test_a_killed_actor_is_replaced_and_its_tasks_resubmitted(ran: Ran) -> None:
    entry = ran["killed_actor"]
    assert entry["actors_before"] == 2
    summary = ran.json("killed_actor")
    assert summary["status"] == "done" and summary["analysed"] == summary["selected"] > 50
    assert "a worker on the cluster was lost" in entry["stderr"]
    path = ran.path("killed-actor.sqlite")
    assert repeated_analyses(path) == [] and analysis_mismatches(path) == []
    assert (_rows(path, ANALYSES) == _rows(ran.path("search-local.sqlite"), ANALYSES))


def test_a_task_that_kills_its_actors_is_given_up_after_three(ran: Ran) -> None:
    """The other tasks come back once each; the poisoned one is the stage's failure
    (refine search: a failed position) or an error naming it."""
    skipped = ran["poisoned_skipped"]
    numbers = sorted(r for r in skipped["results"] if isinstance(r, int))
    lost = [r for r in skipped["results"] if not isinstance(r, int)]
    assert numbers == [0, 1, 2, 3, 4, 5, 6]
    assert len(lost) == 1 and lost[0][:2] == ["lost", -1]
    assert lost[0][2].startswith(f"its worker was lost {MAX_ATTEMPTS} times")
    assert skipped["replaced"] == MAX_ATTEMPTS
    assert ran["poisoned_raised"].startswith(f"task -1 lost its worker {MAX_ATTEMPTS} times")


def test_ctrl_c_stops_the_driver_and_its_actors(ran: Ran) -> None:
    entry = ran["ctrl_c"]
    assert entry["returncode"] == 130
    summary = json.loads(entry["stdout"])
    assert summary["status"] == "interrupted" and 3 <= summary["expansions"] < 40
    path = ran.path("ctrl-c.sqlite")
    _book_checks(path)
    runs = _rows(path, "SELECT status, json_extract(counts, '$.expansions') FROM runs")
    assert runs == [("interrupted", summary["expansions"])]
    # (the scenarios after it get both CPUs: its actors are gone)


def test_a_driver_killed_with_kill_9_resumes_when_rerun(ran: Ran) -> None:
    assert ran["driver_killed"]["returncode"] == -9
    rerun = ran.json("driver_rerun")
    assert rerun["status"] == "done" and rerun["expansions"] == 12
    path = ran.path("killed-driver.sqlite")
    _book_checks(path)
    runs = _rows(path, "SELECT id, status, json_extract(counts, '$.expansions') FROM runs")
    assert runs == [(1, "interrupted", 4), (2, "done", 12)]   # marked dead by the rerun
    expanded = _rows(path, "SELECT count(*) FROM positions WHERE expanded_run IS NOT NULL")
    assert expanded == [(16,)]


def test_a_node_removed_mid_run_only_slows_it(ran: Ran) -> None:
    entry = ran["node_removed"]
    assert entry["nodes_before"] == 2
    summary = ran.json("node_removed")
    assert summary["status"] == "done" and summary["expansions"] == 16
    assert "a worker on the cluster was lost" in entry["stderr"]
    path = ran.path("node-removed.sqlite")
    _book_checks(path)
    expanded = _rows(path, "SELECT count(*) FROM positions WHERE expanded_run IS NOT NULL")
    assert expanded == [(16,)]


# --------------------------------------------------------------------------
# settings and flags (no cluster needed)


def test_worker_resources_parse_and_place() -> None:
    resources = parse_worker_resources(["num_gpus=1", "num_cpus=4,fsf=1", "memory=1e9"])
    assert resources == {"num_gpus": 1.0, "num_cpus": 4.0, "fsf": 1.0, "memory": 1e9}
    settings = ClusterSettings("auto", resources)
    assert settings.actor_options() == {"num_cpus": 4.0, "num_gpus": 1.0, "memory": 1e9,
                                        "resources": {"fsf": 1.0}}
    assert settings.needs() == {"CPU": 4.0, "GPU": 1.0, "memory": 1e9, "fsf": 1.0}
    assert ClusterSettings().actor_options() == {"num_cpus": 1.0}


@pytest.mark.parametrize(("make", "field"), [
    (lambda: parse_worker_resources(["num_gpus"]), "cluster.worker_resources"),
    (lambda: parse_worker_resources(["fsf=x"]), "cluster.worker_resources"),
    (lambda: ClusterSettings("auto", {"num_cpus": -1}), "cluster.worker_resources"),
    (lambda: ClusterSettings(" "), "cluster.address"),
    (lambda: ClusterSettings("auto", workers=0), "cluster.workers"),
])
def test_bad_cluster_settings_name_their_field(make, field: str) -> None:
    with pytest.raises(SettingsError) as raised:
        make()
    assert raised.value.field == field


def test_the_flags_say_what_is_wrong_in_one_line(tmp_path: Path) -> None:
    book = tmp_path / "book.sqlite"
    result = run_cli("grow", "-b", book, "--worker-resources", "fsf=1", expect=2)
    assert result.stderr == "bookgen: error: --worker-resources applies to --cluster only\n"
    result = run_cli("grow", "-b", book, "--cluster", "auto", "--worker-resources", "fsf",
                     expect=2)
    assert result.stderr.count("\n") == 1 and "--worker-resources" in result.stderr
    assert not book.exists()
    openings = tmp_path / "openings.txt"
    openings.write_text("startpos\n")
    result = run_cli("match", "--builtin", "a", "--builtin", "b", "--openings", openings,
                     "--concurrency", "0", "--cluster", "auto", "-o", tmp_path / "r.sqlite",
                     expect=2)
    assert result.stderr == "bookgen: error: --concurrency must be at least 1\n"
    assert not (tmp_path / "r.sqlite").exists()
