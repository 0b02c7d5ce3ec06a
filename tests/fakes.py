"""What tests share: the one fake engine, the session engine's event loop and its bridge to another
loop, and the one manifest writer. A support module (like `needs.py`), not a test module: test
files import from here, never from each other.

The fake follows the documented Engine interface and is for unit tests of one component only
(commands run the real engine): `generate` yields AudioChunks, raises RequestFailed for one
request after the audio it delivered, or EngineDead when the engine as a whole can serve no more;
`stats()` returns monotonic counters; `close()` frees it. No private field of any engine is read.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from typer.testing import CliRunner

from omnicli.benchmark.outputs import ReportPlan
from omnicli.benchmark.session import BenchObserver, BenchSession, PassResult, ProfileRun, RoundResult
from omnicli.cli import app
from omnicli.driver import LoadShape, Prompt, RequestRecord
from omnicli.driver.pool import LocalPool
from omnicli.engine.request import AudioChunk, EngineDead, EngineStats, RequestFailed, RequestInfo, TTSRequest
from omnicli.evaluation.asr.base import AsrBackend
from omnicli.manifest import read_manifest
from omnicli.profile import load_profile
from omnicli.synth.plan import RESULTS, SUMMARY, input_digest, plan_run
from omnicli.synth.results import Status, SynthResult
from omnicli.synth.run import SynthRun
from omnicli.synth.shard import ShardSpec, select_shard
from omnicli.synth.summary import build_synth_summary, write_summary
from tests import virtual_time
from tests.conftest import DEMO_MANIFEST, TEST_PROFILE_SETS

SR = 1000  # the fake's default sample rate: 100-sample chunks are 0.1 s


class FakeEngine:
    """`chunks` chunks of `samples` samples, one every `step` s. The text selects a behaviour:
    "fail" fails the request after its audio, "empty" ends without audio, "hang" never ends,
    "die" kills the engine (EngineDead for it and every later request).

    `die_after`: the engine dies after that many requests. `hang_after`: after that many requests
    a stage hangs, as the real engine's do: a request waits `hang_s` (its stage_timeout_s), then
    fails with EngineDead; the engine classifies the failure, callers do not ask it.
    """

    channels = 1
    model_name, device, startup_seconds = "fake", "cpu", 0.0  # what EngineLike declares
    resolved = None  # callers that need one are given the profile

    def __init__(self, step=0.005, chunks=3, samples=100, die_after=None, hang_after=None, hang_s=0.2,
                 sample_rate=SR):
        self.sample_rate = sample_rate
        self.step, self.chunks, self.samples = step, chunks, samples
        self.die_after = die_after
        self.hang_after, self.hang_s = hang_after, hang_s
        self.in_flight = 0
        self.peak = 0
        self.seen: list[str] = []
        self.closed = False
        self.tokens = 0
        self.refs: set[str] = set()
        self.failure: str | None = None  # why the engine is dead, once it is

    async def generate(self, req: TTSRequest):
        self.seen.append(req.request_id)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        ref = "hot" if req.ref_text in self.refs else "cold"
        self.refs.add(req.ref_text)
        try:
            if self.hang_after is not None and len(self.seen) > self.hang_after:
                await asyncio.sleep(self.hang_s)
                self.failure = "codec stage stopped: RuntimeError('stuck')"
            if req.text == "die":
                self.failure = self.failure or "codec stage stopped: RuntimeError('injected')"
            if self.die_after is not None and len(self.seen) > self.die_after:
                self.failure = self.failure or "talker process exited"
            if self.failure:
                raise EngineDead(self.failure)
            if req.text == "hang":
                await asyncio.sleep(3600)
            n = 0 if req.text == "empty" else self.samples
            for i in range(self.chunks):
                await asyncio.sleep(self.step)
                self.tokens += 10
                last = i == self.chunks - 1 and req.text != "fail"
                info = RequestInfo(finish_reason="stop", ref_cache=ref) if last else None
                yield AudioChunk(np.full(n, 0.1, np.float32), is_last=last, t=time.perf_counter(), info=info)
            if req.text == "fail":
                raise RequestFailed(req.request_id, "codec chunk over budget", RequestInfo(ref_cache=ref))
        finally:
            self.in_flight -= 1

    def stats(self) -> EngineStats:
        return EngineStats(talker_tokens=self.tokens, talker_time_s=self.tokens / 1000, codec_steps=self.tokens // 10,
                           codec_rows=self.tokens // 10)

    def write_run_files(self, run_dir) -> list:
        return []  # as the native engine: nothing beside the results

    async def close(self) -> None:
        self.closed = True


class TokenEngine(FakeEngine):
    """The fake with the talker's token timings, for vLLM's latency keys: a talker output every
    `step` s (the first after `first`), a chunk of 50 samples every 2 outputs, the RequestInfo on a
    last, empty chunk. Text "fail" fails after some audio, "empty" ends without audio. Keeps the
    requests it was asked (`requests`)."""

    model_name = "fake/tiny"

    def __init__(self, tokens=6, first=0.004, step=0.002):
        super().__init__(step=step)
        self.talker_tokens, self.first = tokens, first
        self.requests: list[TTSRequest] = []

    async def generate(self, req: TTSRequest):
        self.requests.append(req)
        info = RequestInfo(prompt_tokens=len(req.text), submitted_at=time.perf_counter())
        await asyncio.sleep(self.first)
        for i in range(self.talker_tokens):
            if i:
                await asyncio.sleep(self.step)
            info.token_times.append(time.perf_counter())
            info.first_token_at = info.token_times[0]
            info.talker_tokens += 1
            if i % 2 == 1 and req.text != "empty":
                if req.text == "fail" and i > 2:
                    raise RequestFailed(req.request_id, "boom", info)
                yield AudioChunk(np.zeros(50, np.float32), False, time.perf_counter())
        yield AudioChunk(np.zeros(0, np.float32), True, time.perf_counter(), info)



class LengthAsr(AsrBackend):
    """Stands in for Whisper in unit tests of the evaluation loop: 'one' per clip, remembering each
    clip's length. `truncates`: whether the caller cuts clips to Whisper's window first."""

    backend = "length"

    def __init__(self, truncates: bool = True):
        super().__init__(model="length", language="en", device="cpu")
        self.truncates_to_window = truncates
        self.lengths: list[int] = []

    def transcribe(self, clips):
        self.lengths += [len(c) for c in clips]
        return ["one"] * len(clips)

    def decoding_settings(self):
        return {}


def prompts(texts: Iterable[str]) -> list[Prompt]:
    """Bench prompts `u0, u1, ...` over two alternating references (so the fake sees hot and cold ones)."""
    return [Prompt(f"u{i}", TTSRequest(request_id="", text=t, ref_text=f"ref{i % 2}")) for i, t in enumerate(texts)]


class Recorder(BenchObserver):
    """A bench observer that remembers what it heard."""

    def __init__(self):
        self.events = []
        self.rounds = []

    def phase_start(self, description, total):
        self.events.append(("phase", description, total))

    def request_done(self, record):
        self.events.append(("done", record.utt))

    def round_done(self, run, shape, index, result, engine):
        self.rounds.append((run.label, shape.label, index, [r.pcm is not None for r in result.records]))

    def warning(self, message):
        self.events.append(("warning", message))


def session_for(engines, texts, plan, labels=("a",), observer=None, engine_kwargs=None):
    """A bench session of one profile run per label over `texts`, each run's engine a FakeEngine made
    with `engine_kwargs[label]` and appended to `engines`."""

    kwargs = engine_kwargs or {}

    async def start(profile):
        engine = FakeEngine(**kwargs.get(profile.name, {}))
        engines.append(engine)
        return engine

    runs = [ProfileRun(label, tiny_profile(label)) for label in labels]
    return BenchSession(runs, prompts(texts), plan, LocalPool.factory(start), observer)


class StopAt(Recorder):
    """Sets the session's stop `delay` s into the phase named `description`."""

    def __init__(self, description, delay):
        super().__init__()
        self.description, self.delay = description, delay
        self.session = None

    def phase_start(self, description, total):
        super().phase_start(description, total)
        if description == self.description:
            asyncio.get_running_loop().call_later(self.delay, self.session.stop.set)


def run_stopped(session, observer):
    """Runs the session on virtual time (tests/virtual_time.py); returns its length in (virtual) seconds."""
    observer.session = session

    async def timed():
        t0 = virtual_time.now()
        await session.run()
        return virtual_time.now() - t0

    return virtual_time.run(timed())


class EngineLoop:
    """An engine on its own event loop in a background thread (an engine is bound to the loop it
    started on); `run(coro)` runs a coroutine there from the test's thread."""

    def __init__(self, start: Callable[[], Awaitable[Any]], timeout: float = 600, name: str = "test-engine-loop"):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self.engine = self.run(start(), timeout)

    def run(self, coro, timeout: float = 300):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self, timeout: float = 60) -> None:
        try:
            self.run(self.engine.close(), timeout)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)


class CrossLoopEngine:
    """An `EngineLoop`'s engine seen from another event loop (a command's own `asyncio.run`): each
    request runs on the engine's loop and its chunks are handed over, in order, to the caller's;
    closing is the owner's, so `close` does nothing."""

    def __init__(self, harness: EngineLoop):
        self.harness = harness
        engine = harness.engine
        self.resolved, self.sample_rate = engine.resolved, engine.sample_rate
        self.model_name, self.device, self.startup_seconds = engine.model_name, engine.device, 0.0

    def __getattr__(self, name):  # anything else the command reads: the engine's own
        return getattr(self.harness.engine, name)

    def stats(self):
        return self.harness.engine.stats()

    def write_run_files(self, run_dir):
        return self.harness.engine.write_run_files(run_dir)

    async def close(self) -> None:
        pass  # the session's engine outlives one command

    async def generate(self, request):
        here = asyncio.get_running_loop()
        handed: asyncio.Queue = asyncio.Queue()

        async def pump():
            try:
                async for chunk in self.harness.engine.generate(request):
                    here.call_soon_threadsafe(handed.put_nowait, (chunk, None))
            except BaseException as exc:  # re-raised on the caller's loop
                here.call_soon_threadsafe(handed.put_nowait, (None, exc))
                return
            here.call_soon_threadsafe(handed.put_nowait, (None, None))

        running = asyncio.run_coroutine_threadsafe(pump(), self.harness.loop)
        try:
            while True:
                chunk, error = await handed.get()
                if error is not None:
                    raise error
                if chunk is None:
                    return
                yield chunk
        finally:
            running.cancel()


# the command-line arguments that ask for the session engine's profile (share_session_engine checks it)
SESSION_PROFILE = ["--profile", "cpu", *(arg for s in TEST_PROFILE_SETS for arg in ("--set", s))]


def share_session_engine(patch, harness: EngineLoop, *, same_profile: bool = True) -> list[str]:
    """Hands every native engine start (`Engine.start`) in a command run in-process the session's
    engine through a CrossLoopEngine, so the command pays no start-up; returns the names of the
    profiles asked for, in order. `same_profile`: a start for another profile fails the test."""
    from omnicli.engine import Engine

    starts: list[str] = []

    async def start(resolved):
        if same_profile:
            assert resolved.digest == harness.engine.resolved.digest, "the command must ask for the session's profile"
        starts.append(resolved.name)
        return CrossLoopEngine(harness)

    patch.setattr(Engine, "start", staticmethod(start))
    return starts


def native_family_sets(family: str, ckpt: Path) -> list[str]:
    """`--set` arguments for a native family's checkpoint built by `omni models build-tiny` (small capacities)."""
    args = []
    for s in (f"model={family}", f"model_path={ckpt / 'talker'}", f"codec_path={ckpt / 'codec'}",
              "talker.max_num_seqs=8", "codec.max_num_seqs=8", "talker.kv_cache_space_gb=1"):
        args += ["--set", s]
    return args


def demo_prompts(folder: Path) -> list[str]:
    """Copies the demo set's reference wavs to `folder/prompts`; their paths relative to `folder`."""
    shutil.copytree(DEMO_MANIFEST.parent / "prompts", folder / "prompts", dirs_exist_ok=True)
    return [f"prompts/{p.name}" for p in sorted((folder / "prompts").glob("*.wav"))]


def write_manifest(folder: Path, texts: Sequence[str] = (), *, utt: str = "u{}", ref_text: str = "",
                   ref_audio: str | Sequence[str] = "", extra: Sequence[str | bytes] = (),
                   name: str = "meta.lst") -> Path:
    """Writes `folder/name`: a row `utt|ref_text|ref_audio|text` per text (`utt` formatted with the
    row's index; a list of `ref_audio` is cycled), then the lines of `extra` as they are (UTF-8,
    or bytes written untouched: for manifests that are not valid text)."""
    folder.mkdir(parents=True, exist_ok=True)
    audios = [ref_audio] if isinstance(ref_audio, str) else list(ref_audio)
    rows = [f"{utt.format(i)}|{ref_text}|{audios[i % len(audios)]}|{t}" for i, t in enumerate(texts)]
    path = folder / name
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in [*rows, *extra]))
    return path


def run_synth(tmp_path: Path, texts: Sequence[str], **kwargs):
    """A `SynthRun` over a FakeEngine on a manifest of `texts`; (manifest, out, run, rows by utt)."""
    m = read_manifest(write_manifest(tmp_path, texts))
    out = tmp_path / "out"
    run = SynthRun(FakeEngine(), out, resolved=load_profile("cpu"), **kwargs)
    asyncio.run(run.run(plan_run(m, out).todo))
    rows = {r["utt"]: r for r in map(json.loads, (out / RESULTS).read_text().splitlines())}
    return m, out, run, rows


def synth_on(harness: EngineLoop, manifest: Path, out: Path, **kwargs) -> SynthRun:
    """A `SynthRun` of every row of `manifest` still to do, on the harness's engine (its own loop)."""
    parsed = read_manifest(manifest)
    run = SynthRun(harness.engine, out, **kwargs)
    harness.run(run.run(plan_run(parsed, out).todo))
    return run


def results_by_utt(out: Path) -> dict[str, dict]:
    """The rows of `out`'s results.jsonl by utterance id."""
    return {row["utt"]: row for row in map(json.loads, (out / RESULTS).read_text().splitlines())}


def bench_record(utt, start, times, samples, error=None, ref="cold", pcm=None) -> RequestRecord:
    """One request's record as the driver makes it: chunks of `samples` delivered at `times`."""
    return RequestRecord(
        utt=utt,
        request_id=f"id-{utt}",
        start=start,
        end=times[-1] if times and not error else start + 1,
        sample_rate=SR,
        chunk_times=times,
        chunk_samples=samples,
        error=error,
        ref_cache=ref,
        finish_reason="stop",
        text="some text",
        pcm=pcm,
    )


def bench_pass(profile, label="a", concurrency=1, speed=1.0) -> PassResult:
    """A pass of three requests (two with audio, `speed` times as slow, one failed) made by hand."""
    records = [
        bench_record("u0", 0.0, [0.1 * speed, 0.5 * speed], [500, 500]),
        bench_record("u1", 0.0, [0.2 * speed, 1.0 * speed], [1000, 1000], ref="hot"),
        bench_record("u2", 0.1, [0.3], [0], error="boom"),
    ]
    stats = EngineStats(talker_tokens=400, talker_time_s=2.0, codec_steps=10, codec_rows=25, coalescing_waits=3,
                        coalescing_wait_ms=4.5)
    return PassResult(profile=ProfileRun(label, profile), shape=LoadShape(concurrency=concurrency),
                      rounds=[RoundResult(records, stats)], sample_rate=SR, model="omni-tiny", device="cpu",
                      started_at="2025-01-01T00:00:00+00:00", num_prompts=3, warmup_requests=2)


def bench_sweep(profile) -> list[PassResult]:
    """A sweep of two profiles (an A/B) at concurrency 1 and 4, made by hand."""
    return [bench_pass(profile, label, c, speed=speed) for label, speed in (("a", 1.0), ("b", 0.5)) for c in (1, 4)]


REPORT_PERCENTILES = [50.0, 90.0, 99.9]


def report_plan(tmp_path: Path, **options) -> ReportPlan:
    """What `omni bench` would be asked to write under `tmp_path/results` (detailed unless told)."""
    return ReportPlan(REPORT_PERCENTILES, "2026-12-01T00:00:00+00:00", options.pop("detailed", True),
                      tmp_path / "results", None, options.pop("plot", None), **options)


# -- hand-made shard folders ------------------------------------------------------------------

SHARD_SR = 24000


def make_manifest(folder: Path, n: int, extra: Sequence[str] = ()) -> Path:
    """A manifest of `n` rows `u00|||Sentence 0.` ..., then the lines of `extra`."""
    return write_manifest(folder, [f"Sentence {i}." for i in range(n)], utt="u{:02d}", extra=extra)


def make_shard(
    out: Path, manifest: Path, spec: ShardSpec | None, *, failed=(), skip=(), limit=None, profile_sets=()
) -> Path:
    """What `omni synth MANIFEST --out OUT --shard SPEC` leaves: wavs, typed rows, a summary."""
    resolved = load_profile("cpu", overrides=list(profile_sets))
    parsed = select_shard(read_manifest(manifest).limited(limit), spec)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for row in parsed.rows:
        if row.utt in skip:
            continue
        result = SynthResult(
            utt=row.utt,
            status=Status.OK,
            line=row.line_no,
            input_digest=input_digest(row),
            profile_digest=resolved.digest,
        )
        if row.utt in failed:
            result.status, result.error = Status.FAILED, "injected"
        else:
            frames = 240 * (1 + row.line_no % 50)  # a different length per row, so a mix-up shows
            sf.write(out / f"{row.utt}.wav", np.full(frames, 0.05, np.float32), SHARD_SR)
            result.wav, result.audio_seconds = f"{row.utt}.wav", frames / SHARD_SR
        rows.append(result.to_line() + "\n")
    (out / RESULTS).write_text("".join(rows))
    write_summary(
        out,
        build_synth_summary(
            parsed, out, None, resolved=resolved, limit=limit, started_at="t0", shard=str(spec) if spec else None
        ),
    )
    return out


def make_shards(tmp_path: Path, manifest: Path, count: int, **kwargs) -> list[Path]:
    """`make_shard` for every shard of `count`, in tmp_path/shard-I."""
    return [make_shard(tmp_path / f"shard-{i}", manifest, ShardSpec(i, count), **kwargs) for i in range(count)]


def merge(*args) -> object:
    """`omni synth-merge ARGS` in-process."""
    return CliRunner().invoke(app, ["synth-merge", *map(str, args)])


def summary_of(folder: Path) -> dict:
    """A run folder's summary.json."""
    return json.loads((folder / SUMMARY).read_text())


def words(output: str) -> str:
    """`output` with every run of white space one space: messages match however a console wrapped them."""
    return " ".join(output.split())


# --- a real resolved profile for tests that need one but no engine ---

_RESOLVED: dict = {}  # the shipped default, resolved once (reading its YAML takes tens of ms)


def tiny_profile(name: str = "default"):
    """The shipped default profile (omni-tiny) resolved for cpu, named `name`: what a session, a report or
    a pool reads of a profile, real. Tests that give each profile its own fake engine look it up by `name`."""
    import dataclasses

    from omnicli.profile import load_profile

    if "default" not in _RESOLVED:
        _RESOLVED["default"] = load_profile("default", platform="cpu")
    return dataclasses.replace(_RESOLVED["default"], name=name)
