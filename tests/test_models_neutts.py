"""The NeuTTS Air family on random weights in the published layout: checkpoint, frontend, prompt, codec, verify,
CLI (synth, bench and eval end to end: test_family_end_to_end.py, with every native family)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.engine.models import neutts
from omnicli.engine.windowed import WindowedRunner
from omnicli.errors import EXIT_USAGE
from omnicli.parity.checks import full_decode, stream_decode
from tests import needs

runner = CliRunner()
REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "datasets" / "demo" / "meta.lst"
HAVE_PHONEMIZER = importlib.util.find_spec("phonemizer") is not None and shutil.which("espeak-ng") is not None
HAVE_REFERENCE = importlib.util.find_spec("neutts") is not None


@pytest.fixture(scope="session", autouse=True)
def _phonemizer():
    """The frontend every test here runs: a skip on a bare machine, a failure in CI (setup.sh installs it)."""
    needs.present(HAVE_PHONEMIZER, "phonemizer + espeak-ng (the neutts extra) are not installed")


@pytest.fixture(scope="session")
def tiny(tiny_checkpoint) -> Path:
    """One random-weight NeuTTS Air checkpoint per test session (built through the CLI)."""
    return tiny_checkpoint("neutts-air")


@pytest.fixture(scope="session")
def adapter(tiny):
    return neutts.NeuTTSAdapter(tiny / "talker", tiny / "codec")


def test_build_tiny_writes_the_published_layout(tiny):
    cfg = json.loads((tiny / "talker" / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen2ForCausalLM"] and cfg["tie_word_embeddings"] is True
    assert (cfg["rope_theta"], cfg["torch_dtype"], cfg["head_dim"]) == (1000000.0, "bfloat16", 32)
    assert cfg["vocab_size"] >= neutts.TINY_TEXT_VOCAB + len(neutts.added_tokens())
    codec_cfg = json.loads((tiny / "codec" / "config.json").read_text())
    assert codec_cfg["model_type"] == "neucodec" and codec_cfg["semantic_model_config"]["model_type"] == "wav2vec2-bert"
    assert (codec_cfg["input_sampling_rate"], codec_cfg["output_sampling_rate"], codec_cfg["quantization_levels"]) == (
        16000,
        24000,
        [4] * 8,
    )
    from safetensors import safe_open

    with safe_open(str(tiny / "codec" / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert {"quantizer.project_out.weight", "acoustic_decoder.head.linear.weight", "fc_encoder.weight"} <= keys
    assert any(k.startswith("semantic_encoder.") for k in keys)


def test_missing_checkpoint_exits_2_naming_the_places(tmp_path):
    result = runner.invoke(
        app,
        [
            "synth",
            str(DEMO),
            "-o",
            str(tmp_path / "out"),
            "--set",
            "model=neutts-air",
            "--set",
            f"model_path={tmp_path / 'none'}",
            "--set",
            f"codec_path={tmp_path / 'none2'}",
        ],
    )
    assert result.exit_code == EXIT_USAGE, result.output
    assert str(tmp_path / "none") in result.output and str(tmp_path / "none2") in result.output
    assert not (tmp_path / "out").exists()


def test_models_list_shows_neutts(tiny):
    result = runner.invoke(
        app, ["models", "list", "--model-path", str(tiny / "talker"), "--codec-path", str(tiny / "codec")]
    )
    assert result.exit_code == 0 and "neutts-air" in result.output
    assert "espeak-ng + phonemizer" in result.output and "yes: phonemizer + espeak-ng" in result.output


# -- frontend, prompt, tokens ----------------------------------------------------------
def test_phonemes_keep_stress_and_punctuation(adapter):
    phones = adapter.phonemize("Hello there, how are you?")
    assert "ˈ" in phones and "," in phones and "?" in phones and "  " not in phones
    assert adapter.phonemize("   ") == ""


def test_prompt_layout(adapter):
    ref_codes = np.array([[0], [7], [65535]])
    ids = adapter.build_prompt("Hi.", "Yes.", ref_codes)
    tok = adapter.tokenizer
    tid = tok.token_to_id
    phones = tok.encode(adapter.phonemize("Yes.") + " " + adapter.phonemize("Hi."), add_special_tokens=False).ids
    head = tok.encode("user: Convert the text to speech:").ids
    middle = tok.encode("\nassistant:", add_special_tokens=False).ids
    assert ids == [
        *head,
        tid("<|TEXT_PROMPT_START|>"),
        *phones,
        tid("<|TEXT_PROMPT_END|>"),
        *middle,
        tid("<|SPEECH_GENERATION_START|>"),
        tid("<|speech_0|>"),
        tid("<|speech_7|>"),
        tid("<|speech_65535|>"),
    ]
    assert tok.decode(ids, skip_special_tokens=False).startswith(
        "user: Convert the text to speech:<|TEXT_PROMPT_START|>"
    )
    with pytest.raises(ValueError, match="reference audio"):
        adapter.build_prompt("Hi.", "", None)


def test_stop_token_and_code_mapping(adapter):
    tid = adapter.tokenizer.token_to_id
    end = tid("<|SPEECH_GENERATION_END|>")
    assert adapter.stop_token_ids() == [end] and adapter.target_tokens("anything") is None
    allowed = adapter.allowed_token_ids()
    assert len(allowed) == 65537 and end in allowed and tid("<|speech_123|>") in allowed
    kept = adapter.keep_tokens([tid("<|speech_5|>"), tid("<|TEXT_PROMPT_END|>"), tid("<|speech_65535|>"), end])
    assert adapter.tokens_to_codes(np.array(kept)).tolist() == [[5], [65535]]
    assert adapter.sampling_overrides() == {"temperature": 1.0, "top_k": 50, "top_p": 1.0, "repetition_penalty": 1.0}


def test_a_tokenizer_without_the_speech_tokens_is_rejected(tiny, tmp_path):
    from omnicli.engine.models import tiny_tokenizer

    shutil.copytree(tiny / "talker", tmp_path / "talker")
    tiny_tokenizer.build(
        tmp_path / "talker",
        regular_size=512,
        added=neutts.QWEN_SPECIALS + neutts.NEUTTS_SPECIALS,
        bos=None,
        eos="<|im_end|>",
    )
    with pytest.raises(ValueError, match="not a NeuTTS tokenizer.*<\\|speech_0\\|>"):
        neutts.NeuTTSAdapter(tmp_path / "talker", tiny / "codec")


def test_unknown_model_option_is_rejected(tiny):
    with pytest.raises(ValueError, match="unknown model_options for neutts-air: voice"):
        neutts.NeuTTSAdapter(tiny / "talker", tiny / "codec", options={"voice": "tara"})


# -- codec ---------------------------------------------------------------------------
def test_reference_encodes_at_16khz_to_50_frames_per_second(adapter):
    assert (adapter.ref_sample_rate, adapter.sample_rate, adapter.codec.hop, adapter.frame_rate) == (
        16000,
        24000,
        480,
        50.0,
    )
    pcm = (0.1 * np.random.default_rng(0).standard_normal(32000)).astype(np.float32)
    codes = adapter.codec.encode_frames(pcm)
    assert codes.shape == (100, 1) and codes.min() >= 0 and codes.max() < 65536
    assert len(np.unique(codes)) > 1  # random weights that still depend on the input


def test_streaming_uses_the_reference_window_and_cross_fade(adapter):
    c = adapter.codec
    assert (c.lookback, c.lookahead, c.overlap, neutts.CHUNK_FRAMES) == (51, 5, 2, 25)


def _triangular_overlap_add_stream(codec, codes, chunk=25, lookback=50, lookahead=5, overlap=1):
    """The reference package's streaming scheme, restated from its description (non-final chunks only):
    each chunk at frame n decodes [n - lookback - overlap, n + chunk + lookahead), keeps frames
    [n, n + chunk + 2 * overlap), and the kept segments are overlap-added with triangular weights."""
    hop, segs, n = codec.hop, [], 0
    while len(codes) - n >= chunk + lookahead:
        start = max(n - lookback - overlap, 0)
        pcm = full_decode(codec, codes[start : n + chunk + lookahead])
        segs.append(pcm[(n - start) * hop : (n - start + chunk + 2 * overlap) * hop])
        n += chunk
    size = (len(segs) - 1) * chunk * hop + len(segs[-1])
    out, weight = np.zeros(size), np.zeros(size)
    for i, seg in enumerate(segs):
        t = np.linspace(0, 1, len(seg) + 2)[1:-1]
        w = 0.5 - np.abs(t - 0.5)
        out[i * chunk * hop : i * chunk * hop + len(seg)] += w * seg
        weight[i * chunk * hop : i * chunk * hop + len(seg)] += w
    return (out / weight)[: len(segs) * chunk * hop]


def test_streaming_equals_the_triangular_overlap_add_scheme(adapter):
    codes = np.random.default_rng(2).integers(0, 65536, (110, 1))
    theirs = _triangular_overlap_add_stream(adapter.codec, codes)
    ours = stream_decode(adapter.codec, codes, [25])
    assert len(theirs) == 100 * 480  # four non-final chunks
    assert np.max(np.abs(ours[: len(theirs)] - theirs)) < 1e-5
    # A 1-frame cross-fade (the reference's "overlap 1" read literally) is measurably different.
    one = type(adapter.codec)(adapter.codec.model, adapter.codec.encoder.features, lookback=51, lookahead=5, overlap=1)
    assert np.max(np.abs(stream_decode(one, codes, [25])[: len(theirs)] - theirs)) > 1e-3


def test_streaming_matches_the_reference_scheme_shape_and_batches_exactly(adapter):
    codes = np.random.default_rng(1).integers(0, 65536, (70, 1))
    full = full_decode(adapter.codec, codes)
    assert len(full) == 70 * 480 and np.max(np.abs(full)) > 0
    s = stream_decode(adapter.codec, codes, [25])
    assert len(s) == len(full)
    # The first chunk sees its whole window plus look-ahead only: equal to decoding those 30 frames alone.
    head = full_decode(adapter.codec, codes[:30])
    assert np.allclose(s[: 25 * 480 - 480], head[: 25 * 480 - 480], atol=1e-5)
    # With look-back and look-ahead covering the utterance, streaming is the full decode.
    wide = type(adapter.codec)(
        adapter.codec.model, adapter.codec.encoder.features, lookback=200, lookahead=0, overlap=0
    )
    assert np.allclose(stream_decode(wide, codes, [70]), full, atol=1e-5)
    r = WindowedRunner(adapter.codec, 2, max_chunk_frames=25)
    with pytest.raises(ValueError, match="look-ahead included"):
        r.execute([0], [np.zeros((5, 1), np.int64)], last=[False])


@pytest.mark.parametrize("frames", [90, 200])
def test_the_family_geometry_keeps_the_verify_bound_after_its_first_chunk(adapter, frames):
    """The engine's NeuTTS chunk sizes (5/20/75, then 100) against a full decode, past the 5-frame first
    chunk (that one is the reported latency trade-off): within verify's bound, STREAM_SLACK x what the
    reference's 25-frame scheme gives on the same codes; in bfloat16 too."""
    from omnicli.parity.neutts import STREAM_SLACK

    codes = np.random.default_rng(frames).integers(0, neutts.CODEBOOK_SIZE, (frames, 1))
    full = full_decode(adapter.codec, codes)
    start = neutts.STREAM_GEOMETRY[0][0] * adapter.codec.hop
    bound = STREAM_SLACK * np.max(np.abs(stream_decode(adapter.codec, codes, [neutts.CHUNK_FRAMES]) - full)[start:])
    sizes = [*neutts.STREAM_GEOMETRY[0], neutts.STREAM_GEOMETRY[1]]
    ours = stream_decode(adapter.codec, codes, sizes)
    assert len(ours) == len(full) and np.max(np.abs(ours - full)[start:]) <= bound
    bf16 = neutts.NeuTTSAdapter(adapter.talker_path, adapter.codec_path, codec_dtype="bfloat16")
    assert np.max(np.abs(stream_decode(bf16.codec, codes, sizes) - full)[start:]) <= bound


# -- verify ----------------------------------------------------------------------------
def test_verify_passes_on_the_tiny_checkpoint(tiny):
    result = runner.invoke(app, ["models", "verify", "neutts-air", "--checkpoint", str(tiny)])
    assert result.exit_code == 0, result.output
    assert "0 mismatched" in result.output and "full decode vs" in result.output
    if HAVE_REFERENCE:
        assert "0 skipped" in result.output and "3/3 prompts identical" in result.output
        assert "over the 75 frames of the non-final chunks (float tolerance 1e-5)" in result.output


def test_verify_reports_a_prompt_mismatch(tiny, monkeypatch):
    needs.present(HAVE_REFERENCE, "neutts (the reference) is not installed")
    from omnicli.families import run_parity_checks

    original = neutts.NeuTTSAdapter.build_prompt
    monkeypatch.setattr(
        neutts.NeuTTSAdapter, "build_prompt", lambda self, *a: original(self, *a)[:-1]
    )  # drops a reference code
    checks = {c.name: c for c in run_parity_checks("neutts-air", tiny)}
    assert checks["prompt ids vs neutts"].status == "mismatch"
    assert checks["prompt ids vs neutts"].figure == "0/3 prompts identical"


def test_verify_without_the_reference_skips_its_checks_and_runs_the_rest(tiny, monkeypatch):
    from omnicli.families import run_parity_checks
    from omnicli.parity import neutts as verify_neutts

    monkeypatch.setattr(verify_neutts, "reference_module", lambda: None)
    checks = {c.name: c.status for c in run_parity_checks("neutts-air", tiny)}
    assert checks["prompt ids vs neutts"] == checks["streaming vs neutts streaming decoder"] == "skipped"
    assert checks["streaming (chunks [25]) vs full decode"] == "skipped"  # the reference scheme sets its bound
    assert checks["full decode vs NeuCodecModel.decode"] == checks["reference encode vs NeuCodecModel.encode"] == "ok"
    assert checks["token->code mapping vs neutts' parser"] == checks["3 requests batched vs one at a time"] == "ok"
