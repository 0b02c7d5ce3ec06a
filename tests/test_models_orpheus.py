"""The Orpheus family on random weights in the published layout: checkpoints, prompt, codec, verify, CLI
(synth, bench and eval end to end: test_family_end_to_end.py, with every native family)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from typer.testing import CliRunner

from omnicli.checkpoints import CheckpointMissing, locate
from omnicli.cli import app
from omnicli.datasets import demo_manifest_path
from omnicli.engine.models import orpheus
from omnicli.engine.models.snac_codec import frames_to_snac, snac_to_frames
from omnicli.engine.windowed import WindowChunker, WindowedRunner
from omnicli.errors import EXIT_USAGE
from omnicli.families import check_checkpoints
from omnicli.parity.checks import full_decode, stream_decode
from tests import needs
from tests.fakes import native_family_sets

runner = CliRunner()
DEMO = demo_manifest_path()
HAVE_REFERENCE = importlib.util.find_spec("orpheus_tts") is not None


@pytest.fixture(scope="session")
def tiny(tiny_checkpoint) -> Path:
    """One random-weight Orpheus checkpoint per test session (built through the CLI)."""
    return tiny_checkpoint("orpheus")


@pytest.fixture(scope="session")
def adapter(tiny):
    return orpheus.OrpheusAdapter(tiny / "talker", tiny / "codec", options={"codec_noise": False})


def test_build_tiny_writes_the_published_layout(tiny):
    cfg = json.loads((tiny / "talker" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["vocab_size"] == 156940
    assert (cfg["rope_theta"], cfg["tie_word_embeddings"]) == (500000.0, True)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in (tiny / "talker").iterdir()
    }
    from omnicli.atomic import current_umask

    # Every file the mode the umask gives a new file (was: model.safetensors 0600, the rest 0644).
    modes = {p.relative_to(tiny).as_posix(): p.stat().st_mode & 0o777 for p in tiny.rglob("*") if p.is_file()}
    assert set(modes.values()) == {0o666 & ~current_umask()}, modes
    snac_cfg = json.loads((tiny / "codec" / "config.json").read_text())
    assert (snac_cfg["codebook_size"], snac_cfg["vq_strides"], snac_cfg["sampling_rate"]) == (4096, [4, 2, 1], 24000)
    state = torch.load(tiny / "codec" / "pytorch_model.bin", weights_only=True)
    assert any(k.startswith("quantizer.quantizers.2.") for k in state) and any(k.startswith("decoder.") for k in state)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny / "talker" / "tokenizer.json"))
    assert [
        tok.token_to_id(t)
        for t in ("<|begin_of_text|>", "<|eot_id|>", "<custom_token_2>", "<custom_token_3>", "<custom_token_10>")
    ] == [128000, 128009, 128258, 128259, 128266]


def test_build_tiny_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "x").write_text("keep me")
    result = runner.invoke(app, ["models", "build-tiny", "orpheus", str(tmp_path)])
    assert result.exit_code == EXIT_USAGE and "not empty" in result.output
    assert (tmp_path / "x").read_text() == "keep me"


def test_locate_finds_a_hugging_face_cache_entry(tmp_path, monkeypatch, tiny):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    root = tmp_path / "hub" / "models--hubertsiuzdak--snac_24khz"
    snap = root / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("abc123")
    with pytest.raises(CheckpointMissing) as err:
        locate(orpheus.CODEC, None, "orpheus")
    assert str(snap) in str(err.value) and "config.json" in str(err.value) and "pytorch_model.bin" in str(err.value)
    for f in ("config.json", "pytorch_model.bin"):
        (snap / f).write_bytes((tiny / "codec" / f).read_bytes())
    assert locate(orpheus.CODEC, None, "orpheus") == snap
    assert locate(orpheus.CODEC, "hubertsiuzdak/snac_24khz", "orpheus") == snap


def test_missing_checkpoint_names_every_place_and_how_to_provide_it(tmp_path):
    (tmp_path / "talker").mkdir()
    (tmp_path / "talker" / "config.json").write_text("{}")
    with pytest.raises(CheckpointMissing) as err:
        check_checkpoints("orpheus", str(tmp_path / "talker"), str(tmp_path / "nowhere"))
    msg = str(err.value)
    assert f"{tmp_path / 'talker'}: missing tokenizer.json, model.safetensors or model.safetensors.index.json" in msg
    assert str(tmp_path / "nowhere") in msg and "--set model_path=" in msg and "--set codec_path=" in msg


def test_synth_with_a_missing_checkpoint_exits_2_before_any_engine_starts(tmp_path):
    result = runner.invoke(
        app,
        [
            "synth",
            str(DEMO),
            "-o",
            str(tmp_path / "out"),
            "--set",
            "model=orpheus",
            "--set",
            f"model_path={tmp_path / 'none'}",
            "--set",
            f"codec_path={tmp_path / 'none2'}",
        ],
    )
    assert result.exit_code == EXIT_USAGE, result.output
    assert "checkpoint missing" in result.output and str(tmp_path / "none") in result.output
    assert not (tmp_path / "out").exists()


def test_models_list_shows_what_each_family_needs_and_whether_present(tiny):
    result = runner.invoke(
        app, ["models", "list", "--model-path", str(tiny / "talker"), "--codec-path", str(tiny / "codec")]
    )
    assert result.exit_code == 0, result.output
    assert "omni-tiny" in result.output and "orpheus" in result.output
    assert f"yes: {tiny / 'talker'}" in result.output and f"yes: {tiny / 'codec'}" in result.output
    result = runner.invoke(app, ["models", "list", "--model-path", str(tiny / "nothing")])
    assert "no: " in result.output


# -- prompt and tokens -------------------------------------------------------------
def test_prompt_layout_and_stop_token(adapter):
    ids = adapter.build_prompt("Hi", "ignored reference text", np.zeros((3, 7), np.int64))
    body = adapter.tokenizer.encode("tara: Hi").ids
    assert body[0] == 128000  # the tokenizer's own <|begin_of_text|>
    assert ids == [128259, *body, 128009, 128260, 128261, 128257]
    assert adapter.stop_token_ids() == [128258] and 49158 not in adapter.stop_token_ids()
    allowed = adapter.allowed_token_ids()
    assert (min(allowed), max(allowed), len(allowed)) == (128258, 128266 + 7 * 4096 - 1, 7 * 4096 + 1)
    assert adapter.keep_tokens([128266, 128266 + 4096 + 5, 128258]) == [128266, 128266 + 4096 + 5]
    assert adapter.target_tokens("anything") is None


def test_code_mapping_follows_the_seven_token_frame(adapter):
    codes = np.arange(14).reshape(2, 7) + 100
    tokens = adapter.codes_to_tokens(codes)
    assert tokens.tolist()[:7] == [128266 + i * 4096 + 100 + i for i in range(7)]
    assert np.array_equal(adapter.tokens_to_codes(tokens), codes)
    c0, c1, c2 = frames_to_snac(torch.from_numpy(codes)[None])
    assert c0.tolist() == [[100, 107]]
    assert c1.tolist() == [[101, 104, 108, 111]]  # c1a, c1b of each frame
    assert c2.tolist() == [[102, 103, 105, 106, 109, 110, 112, 113]]
    assert torch.equal(snac_to_frames(c0, c1, c2)[0], torch.from_numpy(codes))


def test_a_request_voice_wins_over_the_profile_voice(adapter, tiny):
    suffix = [128009, 128260, 128261, 128257]
    assert adapter.uses_voice and not adapter.uses_reference
    assert adapter.build_prompt("Hi", "", None, voice="leah") == [
        128259,
        *adapter.tokenizer.encode("leah: Hi").ids,
        *suffix,
    ]
    assert adapter.build_prompt("Hi", "", None, voice=None) == [
        128259,
        *adapter.tokenizer.encode("tara: Hi").ids,
        *suffix,
    ]
    profile_zac = orpheus.OrpheusAdapter(
        tiny / "talker", tiny / "codec", options={"voice": "zac", "codec_noise": False}
    )
    assert profile_zac.build_prompt("Hi", "", None) == [128259, *adapter.tokenizer.encode("zac: Hi").ids, *suffix]
    assert profile_zac.build_prompt("Hi", "", None, voice="mia") == adapter.build_prompt("Hi", "", None, voice="mia")


def test_row_voice_prompt_ids_equal_the_reference_packages(adapter, tiny):
    needs.present(HAVE_REFERENCE, "orpheus-speech (the reference) is not installed")
    from transformers import AutoTokenizer

    from omnicli.parity.orpheus import _reference_modules

    engine_class, _ = _reference_modules(adapter.codec.snac)
    model = engine_class.OrpheusModel.__new__(engine_class.OrpheusModel)  # its prompt builder only, no vLLM engine
    model.tokeniser = AutoTokenizer.from_pretrained(str(tiny / "talker"))
    for voice in (*orpheus.VOICES, "julia"):
        theirs = model.tokeniser(
            model._format_prompt("Is this the right voice?", voice=voice), add_special_tokens=False
        ).input_ids
        assert adapter.build_prompt("Is this the right voice?", "", None, voice=voice) == theirs, voice


@pytest.fixture(scope="session")
def pretrained(tiny):
    return orpheus.OrpheusAdapter(tiny / "talker", tiny / "codec", options={"codec_noise": False, "mode": "pretrained"})


def test_dedup_frames_drops_frames_repeating_the_last_kept_codebook_0_code():
    codes = np.array(
        [
            [5, 1, 1, 1, 1, 1, 1],
            [5, 2, 2, 2, 2, 2, 2],
            [6, 3, 3, 3, 3, 3, 3],
            [5, 4, 4, 4, 4, 4, 4],
            [5, 9, 9, 9, 9, 9, 9],
        ]
    )
    assert orpheus.dedup_frames(codes)[:, 1].tolist() == [1, 3, 4]
    assert orpheus.dedup_frames(np.zeros((0, 7), np.int64)).shape == (0, 7)


def test_pretrained_continuation_layout(pretrained):
    assert pretrained.uses_reference and not pretrained.uses_voice
    ref = np.array(
        [[7, 1, 2, 3, 4, 5, 6], [7, 0, 0, 0, 0, 0, 0], [8, 6, 5, 4, 3, 2, 1]]
    )  # the 2nd frame repeats code 7: dropped
    ids = pretrained.build_prompt("Target words.", "Reference words.", ref)
    ref_turn = [128259, *pretrained.tokenizer.encode("Reference words.").ids, 128009, 128260, 128261, 128257]
    target_turn = [128259, *pretrained.tokenizer.encode("Target words.").ids, 128009, 128260, 128261, 128257]
    speech = pretrained.codes_to_tokens(ref[[0, 2]]).tolist()
    assert ids == [*ref_turn, *speech, 128258, 128262, *target_turn]
    assert speech[:2] == [128266 + 7, 128266 + 4096 + 1]
    # Without a reference: text-conditioned generation, no voice name.
    assert pretrained.build_prompt("Target words.", "", None, voice="leah") == target_turn
    with pytest.raises(ValueError, match="needs its transcript"):
        pretrained.build_prompt("Target words.", "  ", ref)


def test_pretrained_prompt_equals_the_training_record_layout(pretrained, tiny):
    """Parity: our prompt (the engine's reference encoder) against the layout of Canopy's training
    records, built independently from transformers' tokenizer and snac.encode."""
    from transformers import AutoTokenizer

    from omnicli.parity.orpheus import training_layout_prompt

    rng = np.random.default_rng(5)
    pcm = np.concatenate([np.zeros(12000), 0.8 * rng.standard_normal(36000)]).astype(np.float32)
    frames = pretrained.codec.encode_frames(pcm)
    assert len(orpheus.dedup_frames(frames)) < len(frames)  # the de-duplication is exercised
    theirs = training_layout_prompt(
        AutoTokenizer.from_pretrained(str(tiny / "talker")), pretrained.codec.snac, pcm, "The reference.", "The target."
    )
    assert pretrained.build_prompt("The target.", "The reference.", frames) == theirs


def test_mode_and_voice_options_are_checked(tiny):
    with pytest.raises(ValueError, match="mode for orpheus must be one of finetuned, pretrained; got 'base'"):
        orpheus.OrpheusAdapter(tiny / "talker", tiny / "codec", options={"mode": "base"})
    with pytest.raises(ValueError, match="voice applies to the finetuned orpheus model only"):
        orpheus.OrpheusAdapter(tiny / "talker", tiny / "codec", options={"mode": "pretrained", "voice": "tara"})


def test_unknown_model_option_is_rejected(tiny):
    with pytest.raises(ValueError, match="unknown model_options for orpheus: speed"):
        orpheus.OrpheusAdapter(tiny / "talker", tiny / "codec", options={"speed": 2})


# -- windowed streaming -----------------------------------------------------------
def test_window_chunker_carries_lookahead_and_flushes_the_tail():
    ch = WindowChunker(7, 1, 4, lookahead=2)
    frames = np.arange(10 * 7).reshape(10, 7)
    chunks = ch.feed(frames)
    assert [len(c) for c in chunks] == [3, 6]  # 1 new + 2 ahead, 4 new + 2 ahead
    assert np.array_equal(chunks[1][0], frames[1])
    rest = ch.flush()
    assert np.array_equal(rest, frames[5:])  # never a bare terminal while frames are held back


def test_streaming_is_continuous_bounded_and_sample_exact_in_length(adapter):
    codes = np.random.default_rng(1).integers(0, 4096, (30, 7))
    full = full_decode(adapter.codec, codes)
    assert len(full) == 30 * 2048
    for sizes in ([1], [3], [1, 4, 10]):
        s = stream_decode(adapter.codec, codes, sizes)
        assert len(s) == len(full)
        assert np.max(np.abs(s - full)) <= 0.10 * np.max(np.abs(full))
    # With look-back and look-ahead covering the whole utterance, streaming is the full decode.
    wide = type(adapter.codec)(adapter.codec.snac, lookback=64, lookahead=0)
    assert np.allclose(stream_decode(wide, codes, [30]), full, atol=1e-6)


def test_runner_rejects_chunks_without_their_lookahead(adapter):
    r = WindowedRunner(adapter.codec, 2, max_chunk_frames=4)
    with pytest.raises(ValueError, match="look-ahead included"):
        r.execute([0], [np.zeros((2, 7), np.int64)], last=[False])  # 2 frames: only the look-ahead
    assert len(r.execute([0], [np.zeros((2, 7), np.int64)], last=[True])[0]) == 2 * 2048


class _FaultyCodec:
    """The tiny SNAC codec, except that a window of all-zero codes raises (a fault in one row)."""

    def __init__(self, codec):
        self._codec = codec

    def __getattr__(self, name):
        return getattr(self._codec, name)

    def decode_frames(self, codes):
        if bool((codes == 0).flatten(1).all(dim=1).any()):
            raise RuntimeError("injected row fault")
        return self._codec.decode_frames(codes)


def test_a_fault_in_one_windowed_row_fails_that_request_alone_and_the_others_stream_on(adapter):
    """The codec stage re-runs a failed step row by row; the windowed runner changes no slot in
    a failed step, so the other requests' audio equals a run that never saw the fault."""
    from omnicli.engine.codec_scheduler import CodecScheduler
    from omnicli.engine.codec_stage import CodecStage

    la = adapter.codec.lookahead
    rng = np.random.default_rng(3)
    data = {"a": rng.integers(1, 4096, (8, 7)), "b": np.zeros((8, 7), np.int64), "c": rng.integers(1, 4096, (8, 7))}
    stages, outs = [], []
    for codec in (_FaultyCodec(adapter.codec), adapter.codec):
        out: list[tuple[str, np.ndarray, bool, str | None]] = []
        runner = WindowedRunner(codec, 4, max_chunk_frames=4)
        stage = CodecStage(runner, CodecScheduler(4, 100), lambda *a, out=out: out.append(a))
        for rid in "abc":
            stage.open(rid)
            stage.submit(rid, data[rid][: 4 + la], False)
        stage.cycle()  # one step of three rows: the faulty stage re-runs them one at a time
        for rid in "ac":
            stage.submit(rid, data[rid][4:], True)
        stage.cycle()
        stages.append(stage)
        outs.append(out)
    faulty, clean = outs
    b = [m for m in faulty if m[0] == "b"]
    assert len(b) == 1 and b[0][2] is True and "injected row fault" in b[0][3]
    assert stages[0].scheduler.slot_of("b") is None and stages[0].runner.positions[1] == 0  # freed and reset
    for rid in "ac":
        got, want = [m for m in faulty if m[0] == rid], [m for m in clean if m[0] == rid]
        assert [(last, err) for _, _, last, err in got] == [(False, None), (True, None)]
        for (_, p, _, _), (_, q, _, _) in zip(got, want):
            assert len(p) == 4 * 2048
            np.testing.assert_allclose(p, q, rtol=0, atol=1e-5 * float(np.max(np.abs(q))))


# -- verify ------------------------------------------------------------------------
def test_verify_passes_on_the_tiny_checkpoint(tiny):
    result = runner.invoke(app, ["models", "verify", "orpheus", "--checkpoint", str(tiny)])
    assert result.exit_code == 0, result.output
    assert "0 mismatched" in result.output
    assert "pretrained continuation prompt vs training-record layout: 3/3 prompts identical" in result.output
    if HAVE_REFERENCE:
        assert "0 skipped" in result.output
        assert "21/21 frames bit-identical" in result.output and "3/3 prompts identical" in result.output
        assert "row voice prompt ids vs orpheus_tts: 8/8 voices identical" in result.output


def test_verify_reports_a_prompt_mismatch(tiny, monkeypatch):
    needs.present(HAVE_REFERENCE, "orpheus-speech (the reference) is not installed")
    from omnicli.families import run_parity_checks

    original = orpheus.OrpheusAdapter.build_prompt
    monkeypatch.setattr(
        orpheus.OrpheusAdapter, "build_prompt", lambda self, *a, **kw: original(self, *a, **kw)[1:]
    )  # drops start_of_human
    checks = {c.name: c for c in run_parity_checks("orpheus", tiny)}
    assert checks["prompt ids vs orpheus_tts"].status == "mismatch"
    assert checks["prompt ids vs orpheus_tts"].figure == "0/3 prompts identical"
    assert checks["row voice prompt ids vs orpheus_tts"].status == "mismatch"
    assert checks["pretrained continuation prompt vs training-record layout"].status == "mismatch"


# -- the real engine: what only Orpheus has (row voices, pretrained continuation) --------
def _bench_input_tokens(manifest: Path, out: Path, n: int, sets: list[str]) -> dict:
    """One bench run over the first `n` rows; its run record (total_input_tokens: the talker prompts' length)."""
    result = runner.invoke(
        app,
        [
            "bench",
            str(manifest),
            "-c",
            str(n),
            "-n",
            str(n),
            "--disable-shuffle",
            "--max-new-tokens",
            "14",
            "--result-dir",
            str(out),
            "--result-filename",
            "r.json",
            "-p",
            "cpu",
            *sets,
        ],
    )
    assert result.exit_code == 0, result.output
    (run,) = json.loads((out / "r.json").read_text())["runs"]
    assert run["completed"] == n
    assert run["codec_ring_headroom"] is None  # a windowed codec has no ring caches
    return run


@pytest.mark.engine
def test_row_voices_reach_the_talker_prompt(tiny, adapter, tmp_path):
    rows = [
        {"utt": "a", "text": "Hello there.", "voice": "zoe"},
        {"utt": "b", "text": "A second line.", "voice": "leo"},
        {"utt": "c", "text": "The third one."},
    ]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = _bench_input_tokens(manifest, tmp_path / "bench", 3, native_family_sets("orpheus", tiny))
    with_voices = sum(len(adapter.build_prompt(r["text"], "", None, voice=r.get("voice"))) for r in rows)
    profile_voice = sum(len(adapter.build_prompt(r["text"], "", None)) for r in rows)
    assert with_voices != profile_voice  # "zoe" and "leo" are shorter than "tara"
    assert run["total_input_tokens"] == with_voices


@pytest.mark.engine
def test_pretrained_continues_reference_rows_end_to_end(tiny, pretrained, tmp_path, caplog):
    """Synth and bench with model_options.mode=pretrained on demo rows (reference audio + transcript):
    each prompt is the continuation of its reference, encoded by the engine and cached."""
    import shutil

    from omnicli.audio import load_audio
    from omnicli.engine.ref_cache import ReferenceCache
    from omnicli.manifest import read_manifest

    demo = read_manifest(DEMO).rows[:3]
    (tmp_path / "prompts").mkdir()
    lines = []
    for i, row in enumerate(demo):
        shutil.copy(row.prompt_wav, tmp_path / "prompts" / row.prompt_wav.name)
        line = {
            "utt": row.utt,
            "text": row.text,
            "ref_text": row.prompt_text,
            "ref_audio": f"prompts/{row.prompt_wav.name}",
        }
        lines.append(
            dict(line, voice="leah") if i == 1 else line
        )  # the pretrained model has no voices: ignored, with one warning
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(x) + "\n" for x in lines))
    sets = [*native_family_sets("orpheus", tiny), "--set", "model_options.mode=pretrained"]

    out = tmp_path / "synth"
    with caplog.at_level("WARNING", logger="omnicli"):
        result = runner.invoke(
            app, ["synth", str(manifest), "-o", str(out), "-c", "3", "--max-new-tokens", "70", "-p", "cpu", *sets]
        )
    assert result.exit_code == 0, result.output
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in results] == ["ok"] * 3
    assert sorted(r["ref_cache"] for r in results) == ["cold"] * 3  # three different references, each encoded once
    for r in results:
        assert len(sf.read(out / r["wav"])[0]) == 10 * 2048
    warned = [rec.getMessage() for rec in caplog.records if "has no named voices" in rec.getMessage()]
    assert len(warned) == 1 and "'leah'" in warned[0]

    run = _bench_input_tokens(manifest, tmp_path / "bench", 3, sets)
    refs = ReferenceCache(pretrained.codec.encoder, pretrained.sample_rate, pretrained.max_ref_samples)
    expected = speech = 0
    for row in demo:
        frames = pretrained.codec.encode_frames(refs.prepare(*load_audio(row.prompt_wav)))
        expected += len(pretrained.build_prompt(row.text, row.prompt_text, frames))
        speech += orpheus.FRAME_TOKENS * len(orpheus.dedup_frames(frames))
    assert run["total_input_tokens"] == expected
    assert speech >= 3 * orpheus.FRAME_TOKENS  # every reference put speech tokens into its prompt


def test_an_owner_name_value_is_tried_as_a_folder_and_in_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointMissing) as err:
        locate(orpheus.CODEC, "models/snac", "orpheus")
    msg = str(err.value)
    assert "  models/snac: missing" in msg and str(tmp_path / "hub" / "models--models--snac") in msg
    (tmp_path / "models" / "snac").mkdir(parents=True)
    for f in ("config.json", "pytorch_model.bin"):
        (tmp_path / "models" / "snac" / f).write_text("x")
    assert locate(orpheus.CODEC, "models/snac", "orpheus") == Path("models/snac")
