"""Documented reliability rules (docs/reliability.md) checked end to end on the shared real engine:
vLLM ending a request early, and stereo references at another rate."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import soxr

from omnicli.engine import RequestFailed, TTSRequest
from omnicli.engine.talker import TalkerDelta
from tests.conftest import DEMO_MANIFEST
from tests.fakes import results_by_utt, synth_on, write_manifest

pytestmark = pytest.mark.engine

PROMPT = DEMO_MANIFEST.parent / "prompts" / "heart_juice.wav"


def end_early(monkeypatch, engine, victim: str, finish_reason: str, after_deltas: int = 1):
    """Passes the real talker's output through, but for `victim` ends the stream after a few
    deltas with `finish_reason`, as vLLM does when it gives up on a request."""
    real = engine.talker.generate

    async def generate(rid, prompt, max_tokens, seed):
        seen = 0
        async for delta in real(rid, prompt, max_tokens, seed):
            if rid.startswith(f"{victim}#") and seen == after_deltas:
                yield TalkerDelta([], True, finish_reason)
                return
            seen += 1
            yield delta

    monkeypatch.setattr(engine.talker, "generate", generate)

def test_vllm_ending_a_request_early_fails_that_row_with_the_reason_not_a_truncated_wav(
    engine_harness, fresh_engine_state, tmp_path, monkeypatch
):
    engine = engine_harness.engine
    manifest = write_manifest(
        tmp_path / "set", extra=["cut|||This one is ended early by the talker.", "whole|||This one is not."]
    )
    end_early(monkeypatch, engine, "cut", "error")
    out = tmp_path / "out"
    run = synth_on(engine_harness, manifest, out, concurrency=2)
    rows = results_by_utt(out)
    assert rows["whole"]["status"] == "ok" and (out / "whole.wav").exists()
    cut = rows["cut"]
    assert cut["status"] == "failed" and not (out / "cut.wav").exists()
    assert "talker ended the request early (finish_reason=error, " in cut["error"]
    assert " of " in cut["error"] and "tokens)" in cut["error"]
    assert run.engine_error is None and engine.fault() is None  # one request's end is not the engine's

def test_a_real_vllm_abort_is_vllm_shutting_down_the_row_stays_pending(
    engine_harness, fresh_engine_state, tmp_path, monkeypatch
):
    """A real abort inside vLLM (what its shutdown does to requests in flight): the row is not
    recorded as failed, the run reports an engine error, and a re-run would redo the row."""
    engine = engine_harness.engine
    real = engine.talker.generate

    async def generate(rid, prompt, max_tokens, seed):
        seen = 0
        async for delta in real(rid, prompt, max_tokens, seed):
            seen += 1
            if seen == 1 and rid.startswith("aborted#"):
                await engine.talker._llm.abort(rid)
            yield delta

    monkeypatch.setattr(engine.talker, "generate", generate)
    manifest = write_manifest(tmp_path / "set", extra=["aborted|||vLLM aborts this request while it streams."])
    out = tmp_path / "out"
    run = synth_on(engine_harness, manifest, out, concurrency=1)
    assert "aborted" not in results_by_utt(out)  # pending: neither ok nor failed
    assert not (out / "aborted.wav").exists()
    assert run.engine_error is not None and "aborted its requests" in str(run.engine_error)

def test_stereo_reference_at_another_rate_is_its_mono_downmix_at_the_codec_rate(engine_harness):
    engine = engine_harness.engine
    speech, sr = sf.read(PROMPT, dtype="float32")
    rng = np.random.default_rng(7)
    left, right = speech * 0.9, (speech[::-1] * 0.3 + rng.normal(0, 0.01, speech.shape)).astype(np.float32)
    stereo = soxr.resample(np.stack([left, right], axis=1), sr, 8000).astype(np.float32)  # a stereo file at 8 kHz
    mono_at_codec_rate = soxr.resample(stereo.mean(axis=1), 8000, engine.sample_rate, quality="HQ").astype(np.float32)

    async def info_of(request):
        chunks = [c async for c in engine.generate(request)]
        return chunks[-1].info, sum(c.num_samples for c in chunks)

    first, n_first = engine_harness.run(info_of(TTSRequest("stereo-a", "Left and right.", stereo, 8000, seed=5)))
    same, n_same = engine_harness.run(
        info_of(TTSRequest("stereo-b", "Left and right.", mono_at_codec_rate, engine.sample_rate, seed=5))
    )
    assert first.ref_cache == "cold"
    assert same.ref_cache == "hot"  # byte-identical PCM: the engine used exactly this downmix
    assert n_first == n_same > 0
    one_channel, _ = engine_harness.run(
        info_of(TTSRequest("stereo-c", "Left and right.", stereo[:, 0].copy(), 8000, seed=5))
    )
    assert one_channel.ref_cache == "cold"  # a single channel is a different voice prompt

def test_a_reference_without_samples_fails_only_its_request(engine_harness):
    engine = engine_harness.engine

    async def attempt():
        with pytest.raises(RequestFailed, match="reference audio has no samples"):
            async for _ in engine.generate(TTSRequest("noref", "Hello.", np.zeros((0, 2), np.float32), 8000)):
                pass

    engine_harness.run(attempt())
    assert engine.fault() is None
