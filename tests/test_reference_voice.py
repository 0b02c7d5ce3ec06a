"""The reference voice (`--profile hibari`): hibari-tts's bundled voice behind the engine contract.

Its own small engine (loads in about 3 s, speaks ~100x real time per core): no vLLM, no torch.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli import families
from omnicli.atomic import read_jsonl
from omnicli.cli import app
from omnicli.engine.request import EngineDead, RequestFailed, TTSRequest
from omnicli.profile import load_profile
from omnicli.synth.plan import RESULTS
from tests import needs
from tests.conftest import DEMO_MANIFEST, REPO

runner = CliRunner()
TWO_SENTENCES = "Dr. Smith paid $9.99 on the 3rd of March. Then he left!"


def _said(result) -> str:
    """The output with Rich's line wrapping undone (the terminal width must not matter)."""
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def hibari():
    return needs.module("hibari", "hibari-tts is not installed (pip install 'omnicli[reference-voice]')")


class Running:
    """One reference engine on its own event loop for the module's tests."""

    def __init__(self, engine, loop: asyncio.AbstractEventLoop):
        self.engine, self.loop = engine, loop

    def run(self, coro, timeout: float = 120):
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))


@pytest.fixture(scope="module")
def voice(hibari):
    from omnicli.engine.backends import start_engine

    loop = asyncio.new_event_loop()
    engine = loop.run_until_complete(start_engine(load_profile("hibari")))
    yield Running(engine, loop)
    loop.run_until_complete(engine.close())
    loop.close()


async def collect(engine, request: TTSRequest) -> list:
    return [chunk async for chunk in engine.generate(request)]


async def outcome(engine, request: TTSRequest):
    try:
        return await collect(engine, request)
    except (RequestFailed, EngineDead) as exc:
        return exc


def test_family_is_registered_and_labelled_a_reference_voice():
    family = families.get_family("hibari")
    assert family.engine == "onnx-reference" and family.requires == ("hibari",)
    assert family.description.startswith("REFERENCE VOICE, not a codec LM")
    assert "omnicli[reference-voice]" in family.install_hint and "hibari-tts==0.2.1" in family.install_hint
    profile = load_profile("hibari").profile
    assert profile.model == "hibari" and profile.device == "cpu"  # `auto` would import torch to look for a GPU


def test_without_hibari_profile_hibari_exits_2_with_the_install_command(monkeypatch, tmp_path):
    real = families.module_exists
    monkeypatch.setattr(families, "module_exists", lambda name: name != "hibari" and real(name))
    result = runner.invoke(app, ["synth", str(DEMO_MANIFEST), "--out", str(tmp_path / "out"), "--profile", "hibari"])
    assert result.exit_code == 2, result.output
    said = _said(result)
    assert "needs hibari, which is not installed" in said and "pip install 'omnicli[reference-voice]'" in said
    assert not (tmp_path / "out" / RESULTS).exists()


def test_a_voice_other_than_the_bundled_one_is_refused_before_anything_is_fetched(hibari, tmp_path, monkeypatch):
    import urllib.request

    def no_network(*args, **kwargs):
        raise AssertionError("the reference voice must never download a voice")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    result = runner.invoke(app, ["synth", str(DEMO_MANIFEST), "--out", str(tmp_path / "out"), "--profile", "hibari",
                                 "--set", "model_options={voice: emma}"])
    assert result.exit_code == 2, result.output
    assert "offers only its bundled voice 'heart'" in _said(result)


def test_one_chunk_per_sentence_24khz_seeded_and_labelled(voice):
    engine = voice.engine
    assert (engine.model_name, engine.device, engine.sample_rate, engine.channels) == ("hibari", "cpu", 24000, 1)
    before = engine.stats()
    chunks = voice.run(collect(engine, TTSRequest("two", TWO_SENTENCES, seed=7)))
    assert [c.is_last for c in chunks] == [False, True]  # "Dr." and "$9.99" do not end a sentence
    assert all(c.num_samples > 0.5 * 24000 for c in chunks)
    assert [c.t for c in chunks] == sorted(c.t for c in chunks)
    info = chunks[-1].info
    assert info is not None and info.finish_reason == "stop" and info.talker_tokens == 0
    assert info.stages == {"engine": "onnx-reference", "sentences": 2, "phonemes": info.prompt_tokens}
    again = voice.run(collect(engine, TTSRequest("again", TWO_SENTENCES, seed=7)))
    other = voice.run(collect(engine, TTSRequest("other", TWO_SENTENCES, seed=8)))
    pcm = np.concatenate([c.pcm for c in chunks])
    assert np.array_equal(pcm, np.concatenate([c.pcm for c in again]))  # the seed fixes the noise component
    assert not np.array_equal(pcm, np.concatenate([c.pcm for c in other]))
    assert pcm.dtype == np.float32 and 0.01 < float(np.sqrt(np.mean(pcm**2))) < 0.5
    delta = engine.stats().minus(before)
    assert delta.codec_steps == 6 and delta.codec_compute_s > 0 and delta.talker_time_s > 0
    extra = engine.stats().extra
    assert extra["engine"] == "onnx-reference" and extra["voice"] == "heart" and "not a codec LM" in extra["kind"]


def test_requests_it_cannot_serve_fail_alone_and_a_prompt_is_ignored_with_a_note(voice, caplog):
    engine = voice.engine
    ref = np.zeros(16000, np.float32)

    async def mixed():
        return await asyncio.gather(
            outcome(engine, TTSRequest("emma", "Hello there.", voice="emma")),
            outcome(engine, TTSRequest("zh", "Hello there.", language="zh")),
            outcome(engine, TTSRequest("dots", "...")),
            outcome(engine, TTSRequest("ok", "Hello there.", ref_audio=ref, ref_sample_rate=16000)),
            outcome(engine, TTSRequest("ok2", "Good morning.", voice="heart", language="en")),
        )

    with caplog.at_level("WARNING"):
        emma, zh, dots, ok, ok2 = voice.run(mixed())
    assert isinstance(emma, RequestFailed) and "only its bundled voice 'heart'" in emma.reason
    assert isinstance(zh, RequestFailed) and "English only" in zh.reason
    assert isinstance(dots, RequestFailed) and "no speakable text" in dots.reason
    assert isinstance(ok, list) and ok[-1].is_last and isinstance(ok2, list) and ok2[-1].is_last
    assert any("cannot clone: prompt wavs are ignored" in r.getMessage() for r in caplog.records)


def test_concurrent_requests_all_complete(voice):
    engine = voice.engine

    async def eight():
        return await asyncio.gather(*(collect(engine, TTSRequest(f"c{i}", f"Line number {i}.", seed=i))
                                      for i in range(8)))

    results = voice.run(eight())
    assert [r[-1].is_last for r in results] == [True] * 8


def test_a_closed_engine_says_engine_dead(hibari):
    from omnicli.reference_voice.engine import ReferenceEngine

    async def closed():
        engine = await ReferenceEngine.start(load_profile("hibari"))
        await engine.close()
        await engine.close()  # twice is fine
        return await outcome(engine, TTSRequest("late", "Too late."))

    result = asyncio.run(closed())
    assert isinstance(result, EngineDead) and "closed" in result.reason


def test_synth_and_resume_on_the_demo_set_without_torch_or_vllm(hibari, tmp_path):
    """A real `omni synth --profile hibari` in its own process: 24 kHz speech per row, a resume that skips them
    all, and neither torch nor vLLM imported on the way (the reference voice's path is numpy + onnxruntime)."""
    out = tmp_path / "out"
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['omni', 'synth', sys.argv[1], '--out', sys.argv[2], '--profile', 'hibari']\n"
        "try:\n"
        "    runpy.run_module('omnicli', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print('HEAVY', sorted(m for m in ('torch', 'vllm') if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", probe, str(DEMO_MANIFEST), str(out)], capture_output=True,
                              text=True, timeout=300, cwd=REPO)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "HEAVY []" in done.stdout, done.stdout
    rows = read_jsonl(out / RESULTS)
    assert len(rows) == 8 and all(r["status"] == "ok" and r["ref_cache"] == "none" for r in rows)  # none redone
    for row in rows:
        audio, sr = sf.read(out / row["wav"])
        assert sr == 24000 and audio.ndim == 1 and len(audio) / sr == pytest.approx(row["audio_seconds"], abs=0.01)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "hibari"


def test_a_g2p_or_model_error_fails_that_request_alone(voice, monkeypatch):
    """Unit test of the engine's error sorting: hibari raising (here on one text) is that request's failure,
    not the engine's (was: a RuntimeError from the G2P was reported as EngineDead)."""
    engine = voice.engine
    phonemize, from_ids = engine._tts.phonemize, engine._tts.from_ids

    def bad_g2p(text):
        if "broken" in text:
            raise RuntimeError("tagger exploded")
        return phonemize(text)

    def bad_model(ids, *args):
        if len(ids) > 60:
            raise ValueError("onnx said no")
        return from_ids(ids, *args)

    monkeypatch.setattr(engine._tts, "phonemize", bad_g2p)
    monkeypatch.setattr(engine._tts, "from_ids", bad_model)

    async def three():
        return await asyncio.gather(
            outcome(engine, TTSRequest("g2p", "A broken sentence.")),
            outcome(engine, TTSRequest("model", "This sentence is long enough to have over sixty phonemes in it.")),
            outcome(engine, TTSRequest("fine", "Short one.")),
        )

    g2p, model, fine = voice.run(three())
    assert isinstance(g2p, RequestFailed) and "G2P failed: RuntimeError: tagger exploded" in g2p.reason
    assert isinstance(model, RequestFailed) and "ValueError: onnx said no" in model.reason
    assert isinstance(fine, list) and fine[-1].is_last
