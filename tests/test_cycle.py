"""``bookgen cycle`` and ``bookgen report --cycle``: a tiny generation through every
stage (a random 1x8 network with the book's priors blended in, Fairy-Stockfish as
the refine engine), killed with SIGKILL in the middle and resumed, config errors, a
changed config refused."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import cshogi
import numpy as np
import pytest

from bookgen.analysis.cycle_report import (
    CycleReportSettings,
    build_cycle_report,
    format_cycle_report,
)
from bookgen.cycle.config import load_config
from bookgen.cycle.generations import STAGES, Generation
from bookgen.errors import BookgenError
from bookgen.position import parse_position_spec
from bookgen.store.results import ResultsFile
from conftest import STARTPOS, run_bookgen_process, run_cli

FAIRY = "/usr/games/fairy-stockfish"

TINY = f"""\
directory = "cycle"
seed = 3

[network]
start = "init"
blocks = 1
channels = 8

[refine]
engine = "usi:{FAIRY}"
options = {{ Threads = "1", USI_Hash = "8" }}
nodes = 300

[grow]
positions = 4
playouts = 4
max_ply = 8

[search]
positions = 6

[mistakes]
threshold_cp = 50
diff_cp = 50

[starts]
source = "mistakes"

[selfplay]
games = 2
opponents = ["self", "refine"]
playouts = 4
max_ply = 24

[train]
epochs = 1
batch_size = 32

[blend]
selfplay = true
match = true

[suite]
max_value_cp = 300
max_ply = 6
limit = 2

[match]
playouts = 4
max_ply = 24
refine_games = 2

[promotion]
test = "fixed"
games = 2
min_los = 0.0

[run]
threads = 1
"""

# Outputs that only depend on the inputs of their stage (not on timing).
DETERMINISTIC = ("input.pt", "mistakes.txt", "mistakes.hcpe", "held-out.hcpe", "starts.txt",
                 "suite.txt",
                 "games/00-self-self.hcpe", "games/01-refine-black.hcpe",
                 "games/01-refine-white.hcpe", "model.pt")


def write_config(folder: Path, text: str = TINY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cycle.toml"
    path.write_text(text)
    return path


def run_cycle(config: Path, *args: object, env: dict[str, str] | None = None):
    return run_bookgen_process("cycle", "-c", config, *args, env=env, timeout=300)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A cycle directory with one uninterrupted generation."""
    config = write_config(tmp_path_factory.mktemp("cycle-whole"))
    done = run_cycle(config, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["generations"][0]["ran"] == list(STAGES)
    return config


def _stamps(gen: Path) -> dict[str, int]:
    return {str(p.relative_to(gen)): p.stat().st_mtime_ns for p in sorted(gen.rglob("*"))
            if p.is_file()}


def test_a_generation_runs_every_stage(finished):
    gen = finished.parent / "cycle" / "gen-000"
    for stage in STAGES:
        assert (gen / "stages" / f"{stage}.json").is_file(), stage
    summary = json.loads((gen / "generation.json").read_text())
    stages = summary["stages"]
    assert summary["network"] == "init" and summary["candidate"] == "gen-000"
    assert stages["grow"]["expansions"] == 4
    assert stages["search"]["analysed"] + stages["search"]["already_analysed"] > 0
    assert stages["selfplay"]["games"] == 2 + 2
    assert {r["opponent"] for r in stages["selfplay"]["runs"]} == {"self", "refine"}
    assert list((gen / "csa").rglob("*.csa"))
    assert stages["train"]["train_records"] > 0 and (gen / "model.pt").stat().st_size
    match = stages["match"]
    assert match["wins"] + match["draws"] + match["losses"] == 2
    # min_los 0: any result promotes; the next generation starts from the trained net
    assert summary["promoted"] and summary["best_network"] == "gen-000/model.pt"
    assert summary["book"]["positions"] == stages["grow"]["positions"]
    # the held-out mistakes never start a game, and training is measured on exactly them
    rule = load_config(finished).mistakes
    found = [line for line in (gen / "mistakes.txt").read_text().splitlines() if line]
    held_out = {line for line in found if rule.held_out(line)}
    starts = set((gen / "starts.txt").read_text().split("\n")) - {""}
    assert held_out and len(held_out) < len(found)
    assert not held_out & starts and starts <= set(found)
    records = np.fromfile(gen / "held-out.hcpe", dtype=cshogi.HuffmanCodedPosAndEval)
    assert 0 < len(records) == stages["mistakes"]["held_out_records"] <= len(held_out)
    board = cshogi.Board()
    held_sfens = {parse_position_spec(line)[0].sfen().rsplit(" ", 1)[0] for line in held_out}
    for record in records:   # hcp keeps no move number
        board.set_hcp(record["hcp"])
        assert board.sfen().rsplit(" ", 1)[0] in held_sfens
    assert stages["train"]["held_out_before"] is not None
    # the intermediate books are gone, the generation's book stays
    assert not (gen / "grown.sqlite").exists() and (gen / "book.sqlite").is_file()
    # a rerun finds everything done and changes nothing
    before = _stamps(gen)
    again = run_cycle(finished, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["generations"][0]["ran"] == []
    assert _stamps(gen) == before


def test_report_cycle(finished):
    directory = finished.parent / "cycle"
    data = json.loads(run_cli("report", "--cycle", directory, "--json", "-s", "0").output)
    (row,) = data["generations"]
    summary = json.loads((directory / "gen-000" / "generation.json").read_text())
    assert row["name"] == "gen-000" and row["promoted"] is True
    assert row["mistakes"] == summary["stages"]["mistakes"]["mistakes"]
    assert row["book_positions"] == summary["book"]["positions"]
    names = {p["name"] for p in data["ratings"]}
    assert names == {"init", "gen-000", "refine"}
    assert next(p for p in data["ratings"] if p["name"] == "init")["rating"] == 0
    assert data["games"] == 2 + 2
    text = run_cli("report", "--cycle", directory, "-s", "0").output
    assert "gen-000" in text.splitlines()[-1] and "refine engine:" in text
    html = directory / "report.html"
    run_cli("report", "--cycle", directory, "-s", "0", "-o", html)
    assert "gen-000" in html.read_text()
    result = run_cli("report", "--cycle", finished.parent, expect=2)
    assert "not a bookgen cycle directory" in result.stderr


def _report_cycle_dir(root: Path, refine_losses: int) -> Path:
    """A hand-made cycle directory: gen-000 (from init) with its match games,
    the refine engine winning 10 games against init and gen-000, save
    ``refine_losses`` of them."""
    gen = root / "cycle" / "gen-000"
    gen.mkdir(parents=True)
    games = ([("gen-000", "init", "black"), ("init", "gen-000", "black"),
              ("gen-000", "init", "draw"), ("init", "gen-000", "white")]
             + [("refine", opponent, "black") for opponent in ("init", "gen-000") * 5])
    for index in range(4, 4 + refine_losses):
        games[index] = (games[index][0], games[index][1], "white")
    with ResultsFile(gen / "match.sqlite") as results:
        match_id = results.begin_match("m", {"test": "m"}, len(games))
        for index, (black, white, result) in enumerate(games):
            results.add_game(match_id, game_key=str(index), round=index, pair=index,
                             opening_index=0, opening="startpos", start_sfen=STARTPOS,
                             black=black, white=white, result=result,
                             reason="resign" if result != "draw" else "max ply", plies=80,
                             moves="7g7f 3c3d")
    match = {"opponent": "init", "wins": 2, "draws": 1, "losses": 1, "elo": None,
             "elo_error": None, "los": None, "verdict": None, "test": "fixed",
             "promoted": True}
    summary = {"name": "gen-000", "network": "init", "promoted": True, "best": "gen-000",
               "book": {"positions": 5, "moves": 4, "ply": {"max": 3, "mean": 1.5}},
               "stages": {"train": {"train_records": 10}, "match": match,
                          "mistakes": {"mistakes": 0, "size_mean_cp": None},
                          "selfplay": {"games": 4}}}
    (gen / "generation.json").write_text(json.dumps(summary))
    return gen.parent


def test_report_cycle_marks_a_perfect_score_as_a_bound(tmp_path):
    directory = _report_cycle_dir(tmp_path / "perfect", 0)
    report = build_cycle_report(directory, CycleReportSettings(20))
    (row,) = report.generations
    assert report.refine_rating_bound == ">" and report.refine_rating_is_bound
    assert row.rating_bound == "" and not row.rating_is_bound
    text = format_cycle_report(report)
    assert f"refine engine: >{report.refine_rating:.0f} ± " in text
    assert "all games won: the rating is a lower bound" in text
    data = json.loads(run_cli("report", "--cycle", directory, "--json", "-s", "20").output)
    assert data["refine_rating_is_bound"] is True and data["refine_rating_bound"] == ">"
    assert data["generations"][0]["rating_is_bound"] is False
    # one loss: the rating is a finite estimate again, printed without a mark
    directory = _report_cycle_dir(tmp_path / "one-loss", 1)
    report = build_cycle_report(directory, CycleReportSettings(20))
    assert report.refine_rating_bound == "" and not report.refine_rating_is_bound
    text = format_cycle_report(report)
    assert f"refine engine: {report.refine_rating:.0f} ± " in text
    assert "lower bound" not in text and "unbounded" not in text


@pytest.mark.parametrize("fault, killed_in", [("cycle-stage@5", "starts"),
                                              ("refine-search-recorded@2", "search")])
def test_kill_9_and_resume(finished, tmp_path, fault, killed_in):
    """SIGKILL inside a stage (or after its outputs, before its marker): the rerun
    keeps the finished stages untouched, redoes that stage and ends with the
    outputs of the uninterrupted run."""
    config = write_config(tmp_path)
    gen = tmp_path / "cycle" / "gen-000"
    killed = run_cycle(config, env={"BOOKGEN_FAULT": fault})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    position = STAGES.index(killed_in)
    assert [s for s in STAGES if (gen / "stages" / f"{s}.json").exists()] == \
        list(STAGES[:position])
    finished_outputs = {name: stamp for name, stamp in _stamps(gen).items()
                        if name.startswith("stages/") or name == "input.pt"}
    resumed = run_cycle(config, "--json")
    assert resumed.returncode == 0, resumed.stderr
    ran = json.loads(resumed.stdout)["generations"][0]
    assert ran["kept"] == list(STAGES[:position]) and ran["ran"] == list(STAGES[position:])
    after = _stamps(gen)
    assert {name: after[name] for name in finished_outputs} == finished_outputs
    whole = finished.parent / "cycle" / "gen-000"
    for name in DETERMINISTIC:
        assert _content(gen / name) == _content(whole / name), name
    ours = json.loads((gen / "generation.json").read_text())
    theirs = json.loads((whole / "generation.json").read_text())
    for stage in ("mistakes", "starts", "selfplay", "suite", "match"):
        assert _without_run_data(ours["stages"][stage]) == \
            _without_run_data(theirs["stages"][stage]), stage
    assert ours["book"] == theirs["book"]


def _content(path: Path) -> object:
    """A file's bytes; a model's weights (torch's archive names the file it was written
    to, a temporary name)."""
    if path.suffix != ".pt":
        return path.read_bytes()
    from bookgen.engines.network.model import load_model

    return {k: v.numpy().tobytes() for k, v in load_model(path).state_dict().items()}


def test_ctrl_c_stops_with_130_and_keeps_the_finished_stages(tmp_path):
    config = write_config(tmp_path)
    gen = tmp_path / "cycle" / "gen-000"
    stopped = run_cycle(config, env={"BOOKGEN_FAULT": "cycle-stage@2:SIGINT"})
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == "bookgen: interrupted"
    # Ctrl-C came after grow's book, before its marker: grow runs again next time
    assert [p.stem for p in (gen / "stages").iterdir()] == ["network"]
    assert (gen / "grown.sqlite").is_file()


def _without_run_data(data: dict) -> dict:
    return {k: v for k, v in data.items() if k not in ("run_id", "seconds")}


def test_a_changed_config_is_refused(finished, tmp_path):
    directory = finished.parent / "cycle"
    before = _stamps(directory)
    changed = finished.with_name("changed.toml")
    changed.write_text(TINY.replace("games = 2\nopponents", "games = 4\nopponents"))
    result = run_cycle(changed)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "selfplay.games differs from the config gen-000 finished with" in line
    assert _stamps(directory) == before
    # the [run] section is not part of a generation's config
    spread = finished.with_name("spread.toml")
    spread.write_text(TINY.replace("threads = 1", "threads = 2"))
    assert run_cycle(spread).returncode == 0


@pytest.mark.parametrize("edit, message", [
    (("games = 2\nopponents", "games = 0\nopponents"), "selfplay.games must be at least 1"),
    (("games = 2\nopponents", "games = 'two'\nopponents"),
     "selfplay.games must be an integer, not 'two'"),
    (("[grow]\n", "[grow]\nspeed = 3\n"), "grow.speed: unknown key"),
    (("test = \"fixed\"", "test = \"bayes\""),
     "promotion.test must be one of fixed, sprt, not 'bayes'"),
    (("engine = \"usi:", "engine = \"gps:"), "refine.engine must be builtin or usi:COMMAND"),
    (("games = 2\nmin_los", "games = 3\nmin_los"),
     "promotion.games must be a positive even number"),
    (("directory = \"cycle\"\n", ""), "directory: missing"),
    (("start = \"init\"", "start = \"model.npz\""),
     "network.start must be 'init' or a bookgen model file (.pt"),
    (("[blend]\nselfplay = true\nmatch = true\n", "[blend]\nselfplay = 1\n"),
     "blend.selfplay must be true or false, not 1"),
    (("diff_cp = 50\n", "diff_cp = 50\nheld_out_share = 1.5\n"),
     "mistakes.held_out_share must be between 0 and 1"),
    (("seed = 3\n", "seed = 3\nmatch = 3\n"), "not valid TOML"),
    (("seed = 3\n", "seed = [\n"), "not valid TOML"),
])
def test_config_errors_name_the_key(tmp_path, edit, message):
    config = write_config(tmp_path, TINY.replace(*edit))
    assert TINY.replace(*edit) != TINY
    result = run_cli("cycle", "-c", config, expect=2)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"bookgen: error: {config}: ") and message in line, line
    assert not (tmp_path / "cycle").exists()
    with pytest.raises(BookgenError, match="^" + str(config)):
        load_config(config)


def test_network_settings_are_checked_before_any_work(tmp_path):
    """The cycle's networks are torch: models: an onnx-only option is refused before
    generation 0 starts."""
    config = write_config(tmp_path)
    result = run_cli("cycle", "-c", config, "--trt-cache", tmp_path / "trt", expect=2)
    (line,) = result.stderr.strip().splitlines()
    assert "apply to onnx: models only" in line
    assert not (tmp_path / "cycle").exists()


def test_a_started_generation_keeps_its_config(tmp_path):
    """Refused also before the generation has finished (its first stages ran with the
    config it recorded)."""
    config = load_config(write_config(tmp_path))
    gen = Generation(config.directory, 0)
    gen.check_config(config)
    gen.mark_done("network", {})
    changed = load_config(write_config(tmp_path / "other", TINY.replace(
        "nodes = 300", "nodes = 400").replace('directory = "cycle"',
                                              f'directory = "{config.directory}"')))
    with pytest.raises(BookgenError, match=r"refine\.nodes differs from the config gen-000 "
                                           "started with"):
        gen.check_config(changed)
    gen.check_config(config)   # the same config again: accepted


def test_a_cycle_can_start_from_a_model_file(finished, tmp_path):
    """network.start: a model file (relative to the config file) becomes generation 0's
    network (the run is killed after that first stage)."""
    model = finished.parent / "cycle" / "gen-000" / "model.pt"
    (tmp_path / "nets").mkdir()
    (tmp_path / "nets" / "start.pt").write_bytes(model.read_bytes())
    config = write_config(tmp_path / "run", TINY.replace('start = "init"',
                                                         'start = "../nets/start.pt"'))
    killed = run_cycle(config, env={"BOOKGEN_FAULT": "cycle-stage-done@1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    gen = tmp_path / "run" / "cycle" / "gen-000"
    assert _content(gen / "input.pt") == _content(model)
    assert json.loads((gen / "stages" / "network.json").read_text())["name"] == "init"


def test_a_section_must_be_a_table(tmp_path):
    text = TINY.replace("[blend]\nselfplay = true\nmatch = true\n", "").replace(
        "seed = 3\n", "seed = 3\nblend = 3\n")
    config = write_config(tmp_path, text)
    result = run_cli("cycle", "-c", config, expect=2)
    assert result.stderr.strip() == f"bookgen: error: {config}: blend: must be a table " \
                                    "([blend])"


def test_the_example_config_loads():
    example = Path(__file__).resolve().parent.parent / "data" / "cycle.toml"
    config = load_config(example)
    assert config.refine.engine == f"usi:{FAIRY}" and config.network.start == "init"
    assert config.fingerprint() == load_config(example).fingerprint()


def test_the_experiment_arms_differ_only_in_their_starts():
    """docs/experiments.md: the three arms of experiments 2 and 3 share everything
    but the start positions of self-play (and their directories)."""
    folder = Path(__file__).resolve().parent.parent / "data" / "experiments"
    arms = {name: load_config(folder / f"{name}.toml") for name in ("mistakes", "initial",
                                                                    "book")}
    sources = {name: config.starts.source for name, config in arms.items()}
    assert sources == {"mistakes": "mistakes", "initial": "initial", "book": "all"}
    rest = [{**config.results_dict(), "starts": None} for config in arms.values()]
    assert rest[0] == rest[1] == rest[2]
    assert len({config.directory for config in arms.values()}) == 3
