"""`omni synth --ray` (omnicli.synth.ray): engines in Ray Data actors, the coordinator the
only writer of results.jsonl.

One local Ray cluster per module, started here with more CPUs than the actors ask
for. The engine tests run the real omni-tiny engine in every actor; the unit tests
drive one `SynthActor` in this process with the fake engine of test_synth_driver
(its contract: RequestFailed for one request, EngineDead for all).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.runtime.cluster import EngineResources, RayCluster
from omnicli.runtime.storage import StorageNotShared, write_probe
from omnicli.synth.plan import RESULTS, SUMMARY, last_results, plan_run
from omnicli.synth.ray import (
    ActorSpec,
    Event,
    ProgressBoard,
    RaySynthRun,
    SynthActor,
    row_from_json,
    row_to_json,
)
from omnicli.synth.results import SynthResult
from omnicli.synth.run import SynthRun
from tests.conftest import DEMO_MANIFEST, REPO, TEST_PROFILE_SETS
from tests.fakes import FakeEngine

pytest.importorskip("ray", reason='needs the ray extra: pip install "omnicli[ray]"')


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    # Workers import omnicli from this checkout, like the test process.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=256 * 1024**2,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    yield ray
    ray.shutdown()


def result_line(utt: str, status: str = "ok") -> str:
    return SynthResult(utt=utt, status=status).to_line()


# -- pure parts ----------------------------------------------------------------------------
def test_board_keeps_the_first_result_of_each_utt_and_hands_each_out_once():
    board = ProgressBoard()
    assert board.report(result_line("a")) and board.report(result_line("b", "failed"))
    assert not board.report(result_line("a"))  # a retried batch reporting a finished row again
    assert board.finished(["a", "c", "b"]) == ["a", "b"]
    board.event(Event.ENGINE_DIED, "on node: stage died")
    board.left_pending(["c", "a"])
    lines, events = board.take()
    assert [json.loads(x)["utt"] for x in lines] == ["a", "b"] and events == [
        (Event.ENGINE_DIED, "on node: stage died")
    ]
    assert board.take() == ([], [])
    assert board.pending() == ["c"]  # "a" finished after all
    assert not board.stopping()
    board.request_stop()
    assert board.stopping()


def test_rows_travel_as_json_and_come_back_equal(tmp_path):
    (tmp_path / "p.wav").write_bytes(b"")
    (tmp_path / "m.lst").write_text("u1|ref text|p.wav|héllo\nu2|||no reference\n")
    (tmp_path / "m.jsonl").write_text('{"utt": "u3", "text": "hi", "voice": "leah"}\n')
    rows = read_manifest(tmp_path / "m.lst").rows + read_manifest(tmp_path / "m.jsonl").rows
    assert rows[-1].voice == "leah"  # a row voice (Orpheus) must reach the actor's engine
    assert [row_from_json(row_to_json(r)) for r in rows] == rows


def test_without_ray_the_flag_says_how_to_install_it(monkeypatch, tmp_path):
    from omnicli.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    result = CliRunner().invoke(app, ["synth", "--demo", "--out", str(tmp_path / "out"), "--ray"])
    assert result.exit_code == 2
    assert 'pip install "omnicli[ray]"' in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()


def test_ray_options_need_the_ray_flag(tmp_path):
    from omnicli.cli import app

    result = CliRunner().invoke(app, ["synth", "--demo", "--out", str(tmp_path / "out"), "--engines", "2"])
    assert result.exit_code == 2 and "need --ray" in result.output


# -- one actor in this process, with a fake engine ------------------------------------------
def fake_actor(ray_cluster, tmp_path, *, engine: FakeEngine, board=None, probe=None, concurrency: int = 4):
    board = board or ray_cluster.remote(num_cpus=0)(ProgressBoard).remote()
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    spec = ActorSpec(
        resolved=load_profile("cpu"), out_dir=out, probe=probe or write_probe(out), concurrency=concurrency
    )
    exits: list[int] = []

    async def start(_resolved):
        return engine

    return SynthActor(spec, board, start_engine=start, die=exits.append), board, exits


def batch_of(tmp_path, texts: list[str]) -> dict:
    (tmp_path / "meta.lst").write_text("".join(f"u{i}|||{t}\n" for i, t in enumerate(texts)))
    return {"row": [row_to_json(r) for r in read_manifest(tmp_path / "meta.lst").rows]}


def test_a_row_that_fails_alone_is_a_failed_row_not_a_retried_batch(ray_cluster, tmp_path):
    actor, board, exits = fake_actor(ray_cluster, tmp_path, engine=FakeEngine())
    actor(batch_of(tmp_path, ["one", "fail", "two"]))
    lines, events = ray_cluster.get(board.take.remote())
    statuses = {json.loads(x)["utt"]: json.loads(x)["status"] for x in lines}
    assert statuses == {"u0": "ok", "u1": "failed", "u2": "ok"}
    assert exits == [] and [k for k, _ in events] == [Event.STARTED]
    assert (tmp_path / "out" / "u0.wav").is_file() and not (tmp_path / "out" / "u1.wav").exists()


def test_a_dead_engine_makes_its_actor_exit_and_the_retry_skips_finished_rows(ray_cluster, tmp_path):
    # one at a time: u0 and u1 finish, u2 kills the engine, u3 never starts
    actor, board, exits = fake_actor(ray_cluster, tmp_path, engine=FakeEngine(), concurrency=1)
    batch = batch_of(tmp_path, ["one", "two", "die", "three"])
    actor(batch)
    assert exits == [1]  # the process would end here; Ray restarts the actor and retries the batch
    lines, events = ray_cluster.get(board.take.remote())
    assert [json.loads(x)["utt"] for x in lines] == ["u0", "u1"]
    assert [k for k, _ in events] == [Event.STARTED, Event.ENGINE_DIED] and "injected" in events[1][1]

    # Ray's retry of the same batch, on a fresh engine: only the rows not yet reported run
    fresh = FakeEngine()
    retried, _, retried_exits = fake_actor(ray_cluster, tmp_path, engine=fresh, board=board, probe=actor.spec.probe)
    fresh_batch = {"row": [r.replace('"die"', '"now fine"') for r in batch["row"]]}  # u2's engine killer, harmless now
    retried(fresh_batch)
    assert sorted(fresh.seen) == ["u2", "u3"] and retried_exits == []
    lines, events = ray_cluster.get(board.take.remote())
    assert sorted(json.loads(x)["utt"] for x in lines) == ["u2", "u3"] and [k for k, _ in events] == [Event.STARTED]


def test_an_actor_writes_its_engines_run_files_into_out_and_tells_the_coordinator(ray_cluster, tmp_path):
    # Was: only a local run wrote them (`engine.write_run_files`): a vLLM-Omni --ray run had no deploy overlay.
    class OverlayEngine(FakeEngine):
        def write_run_files(self, run_dir):
            path = run_dir / "deploy_overlay.yaml"
            path.write_text("stages: []\n")
            return [path]

    actor, board, exits = fake_actor(ray_cluster, tmp_path, engine=OverlayEngine())
    out = tmp_path / "out"
    _, events = ray_cluster.get(board.take.remote())
    assert events == [events[0], (Event.WROTE, str(out / "deploy_overlay.yaml"))] and events[0][0] == Event.STARTED
    assert (out / "deploy_overlay.yaml").read_text() == "stages: []\n" and exits == []

    notes: list[str] = []
    coordinator = RaySynthRun.__new__(RaySynthRun)  # only its event handling, without a pool
    coordinator.on_note, coordinator._wrote = notes.append, set()
    for kind, message in [events[1], events[1]]:  # a second actor writes the same file
        coordinator._on_event(kind, message)
    assert notes == [f"wrote {out / 'deploy_overlay.yaml'}"]


def test_an_actor_that_cannot_see_the_output_folder_says_so(ray_cluster, tmp_path):
    with pytest.raises(StorageNotShared, match="shared by every node"):
        fake_actor(ray_cluster, tmp_path, engine=FakeEngine(), probe=tmp_path / "out" / ".omni-probe-elsewhere")


# -- the real engine in Ray actors ------------------------------------------------------------
def engine_core_pids_of_actors() -> list[int]:
    """vLLM engine-core processes whose parent is a Ray actor of ours (not this process's engine)."""
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "EngineCore" in cmd or "EngineCore" in proc.name():
                parent = psutil.Process(proc.info["ppid"])
                if parent.pid != os.getpid() and "ray::" in " ".join(parent.cmdline()):
                    pids.append(proc.info["pid"])
        except psutil.Error:
            continue
    return pids


@pytest.fixture(scope="module")
def local_reference(engine_harness, tmp_path_factory) -> Path:
    """The demo set synthesized by the plain local run (the session's engine)."""
    out = tmp_path_factory.mktemp("local")
    rows = read_manifest(DEMO_MANIFEST).rows
    engine_harness.run(SynthRun(engine_harness.engine, out, concurrency=4).run(rows))
    return out


@pytest.fixture(scope="module")
def run_with_a_killed_engine(ray_cluster, tmp_path_factory):
    """2 engines on the demo set; once both are up, one actor's vLLM engine core is killed (-9)."""
    out = tmp_path_factory.mktemp("ray")
    resolved = load_profile("cpu", overrides=TEST_PROFILE_SETS, platform="cpu")
    rows = read_manifest(DEMO_MANIFEST).rows
    reported: list[str] = []
    killed: list[int] = []
    ready = threading.Event()

    def on_note(message: str) -> None:
        if message.startswith("engine ready") and len(run.outcome.started) == 2:
            ready.set()

    def kill_one() -> None:
        if ready.wait(600):
            pids = engine_core_pids_of_actors()
            if pids:
                os.kill(pids[-1], signal.SIGKILL)
                killed.append(pids[-1])

    killer = threading.Thread(target=kill_one, daemon=True)
    killer.start()
    with RayCluster(None, EngineResources(engines=2)) as cluster:
        run = RaySynthRun(cluster, out, resolved=resolved, concurrency=4, rows_per_batch=1,
                          on_result=lambda r: reported.append(r.utt), on_note=on_note)
        run.run(rows)
    ready.set()
    killer.join(5)
    return out, run, reported, killed, rows


@pytest.mark.engine
def test_two_engines_give_the_wavs_of_a_local_run(run_with_a_killed_engine, local_reference):
    out, run, _, _, rows = run_with_a_killed_engine
    assert run.engine_error is None and run.output_error is None and run.storage_error is None
    for row in rows:
        assert (out / f"{row.utt}.wav").read_bytes() == (local_reference / f"{row.utt}.wav").read_bytes(), row.utt


@pytest.mark.engine
def test_a_killed_engine_is_restarted_and_every_row_finishes_once(run_with_a_killed_engine):
    out, run, reported, killed, rows = run_with_a_killed_engine
    assert killed, "no engine core of an actor was found to kill"
    assert run.outcome.restarts >= 1 and len(run.outcome.started) >= 3  # two engines, then the restarted one
    assert Counter(reported) == Counter(r.utt for r in rows)  # each row recorded exactly once
    lines = (out / RESULTS).read_text().splitlines()
    assert sorted(json.loads(x)["utt"] for x in lines) == sorted(r.utt for r in rows)
    assert all(json.loads(x)["status"] == "ok" for x in lines) and run.left_pending == []


def omni_synth_ray(out: Path, address: str, *extra: str) -> list[str]:
    sets = [a for s in TEST_PROFILE_SETS for a in ("--set", s)]
    return [
        sys.executable,
        "-m",
        "omnicli",
        "synth",
        str(DEMO_MANIFEST),
        "--out",
        str(out),
        "--ray",
        "--ray-address",
        address,
        "--engines",
        "1",
        "--concurrency",
        "1",
        "--profile",
        "cpu",
        *sets,
        *extra,
    ]


@pytest.mark.engine
def test_resume_after_an_interrupted_ray_run_redoes_only_the_missing_rows(ray_cluster, tmp_path):
    out = tmp_path / "out"
    address = ray_cluster.get_runtime_context().gcs_address  # join this module's cluster: the CLI must leave it running
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen(
        omni_synth_ray(out, address), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / RESULTS).exists() and len((out / RESULTS).read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    summary = json.loads((out / SUMMARY).read_text())
    done = {u for u, r in last_results(out).items() if r.status == "ok"}
    rows = read_manifest(DEMO_MANIFEST).rows
    assert summary["interrupted"] and summary["num_ok"] == len(done) and 2 <= len(done) < len(rows)
    assert ray_cluster.cluster_resources().get("CPU") == 4  # a joined cluster is left running
    before = {u: (out / f"{u}.wav").stat().st_mtime_ns for u in done}

    again = subprocess.run(omni_synth_ray(out, address), capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"{len(done)} done" in again.stderr  # the resume plan, as without --ray
    todo = len(rows) - len(done)
    assert (
        f"synth: {todo}/{todo} done, 0 failed" in again.stderr
    )  # the progress display of a local run (no terminal: plain lines)
    summary = json.loads((out / SUMMARY).read_text())
    assert summary["num_ok"] == len(rows) and summary["this_run"]["attempted"] == len(rows) - len(done)
    assert {u: (out / f"{u}.wav").stat().st_mtime_ns for u in done} == before  # finished rows were not redone
    assert len((out / RESULTS).read_text().splitlines()) == len(rows)
    plan = plan_run(read_manifest(DEMO_MANIFEST), out)
    assert plan.todo == [] and len(plan.done) == len(rows)


# -- the pool fails before any row: what the coordinator says --------------------------------------
def ray_run(tmp_path, resolved) -> RaySynthRun:
    rows = read_manifest(DEMO_MANIFEST).rows[:2]
    with RayCluster(None, EngineResources(engines=1)) as cluster:
        run = RaySynthRun(cluster, tmp_path / "out", resolved=resolved)
        run.run(rows)
    return run


def test_an_engine_that_cannot_start_ends_the_run_naming_the_node(ray_cluster, tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / ".omni-probe-0123abcd").write_text("a driver killed with kill -9 left this")
    # more KV cache than any machine has: Engine.start refuses before loading anything
    run = ray_run(tmp_path, load_profile("cpu", overrides=["talker.kv_cache_space_gb=100000"], platform="cpu"))
    assert (
        run.engine_error is not None
        and str(run.engine_error).startswith("an engine could not start on ")
        and "kv_cache" in str(run.engine_error)
    )
    assert run.results == [] and run.storage_error is None
    assert not list((tmp_path / "out").glob(".omni-probe-*"))  # the stale probe too (was: left for good)


def test_a_worker_that_cannot_see_the_output_folder_stops_the_run(ray_cluster, tmp_path, monkeypatch):
    from omnicli.synth import ray as ray_synth

    def probe_elsewhere(out_dir: Path) -> Path:  # a probe the workers cannot find, as on an unshared disk
        return out_dir / ".omni-probe-on-another-disk"

    monkeypatch.setattr(ray_synth, "write_probe", probe_elsewhere)
    run = ray_run(tmp_path, load_profile("cpu", platform="cpu"))
    assert run.storage_error and "cannot see" in run.storage_error and "shared by every node" in run.storage_error
    assert run.engine_error is None and run.results == []


def test_our_signal_handlers_survive_ray_init():
    from omnicli.synth.ray import keeping_signal_handlers

    def ours(signum, frame):
        pass

    before = signal.signal(signal.SIGTERM, ours)
    try:
        with keeping_signal_handlers():
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(15))  # what ray.init does to a coordinator's SIGTERM
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_mistyped_cluster_address_is_refused_at_once():
    import socket

    from omnicli.synth.ray import unreachable_head

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert unreachable_head(f"127.0.0.1:{port}") is None
    why = unreachable_head(f"127.0.0.1:{port}")  # closed now: nothing answers
    assert why and f"127.0.0.1:{port}" in why and "ray start --head" in why
    assert unreachable_head("auto") is None and unreachable_head(None) is None
    assert "HOST:PORT" in unreachable_head("head:notaport")
