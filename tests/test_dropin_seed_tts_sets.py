"""Issue 32 item 2: vLLM-Omni's `seed-tts-text` (CustomVoice) and `seed-tts-design` (VoiceDesign)
datasets, with the row shapes its loaders read, through `omni bench` (a fake engine records the requests:
tests/test_dropin_vllm_readers.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.benchmark.seed_tts_sets import read_seed_tts_set
from omnicli.cli import app

runner = CliRunner()


def seed_tts_folder(tmp_path, lines, locale="en", wavs=()):
    folder = tmp_path / "seed-tts-eval" / locale
    (folder / "prompt-wavs").mkdir(parents=True)
    for name in wavs:
        sf.write(folder / "prompt-wavs" / name, np.zeros(1600, np.float32), 16000)
    (folder / "meta.lst").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder.parent


def test_seed_tts_text_sends_the_rows_without_their_reference_and_with_the_named_voice(token_engine, tmp_path):
    root = seed_tts_folder(tmp_path, ["u1|ref one|prompt-wavs/u1.wav|hello there", "u2|ref two|prompt-wavs/u2.wav|bye"],
                           wavs=["u1.wav", "u2.wav"])
    result = runner.invoke(app, ["bench", "--dataset-name", "seed-tts-text", "--dataset-path", str(root),
                                 "--extra-body", json.dumps({"voice": "Vivian"}), "--disable-shuffle",
                                 "--result-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    sent = {r.text: r for r in token_engine.requests}
    assert set(sent) == {"hello there", "bye"}
    assert all(r.ref_audio is None and r.ref_text == "" and r.voice == "Vivian" for r in sent.values())


def test_seed_tts_design_sends_the_voice_description_as_instruct(token_engine, tmp_path):
    root = seed_tts_folder(tmp_path, [
        "d1|||Good morning.|A warm, low female voice, calm.",
        "d2|ref|missing.wav|Good night.|An excited young man.",
    ], locale="zh")
    result = runner.invoke(app, ["bench", "--dataset-name", "seed-tts-design", "--dataset-path", str(root),
                                 "--seed-tts-locale", "zh", "--result-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    sent = {r.text: r for r in token_engine.requests}
    assert sent["Good morning."].instruct == "A warm, low female voice, calm."
    assert sent["Good night."].instruct == "An excited young man." and sent["Good night."].ref_audio is None
    assert {r.language for r in sent.values()} == {"Chinese"}  # as vLLM-Omni's design requests name it


def test_a_design_row_without_a_description_is_named_with_its_line(tmp_path):
    root = seed_tts_folder(tmp_path, ["d1|||Good morning.|", "d2|||Hi.|a voice", "bad line"])
    manifest = read_seed_tts_set(root / "en" / "meta.lst", "seed-tts-design")
    assert [r.utt for r in manifest.rows] == ["d2"]
    assert [str(e).rsplit(":", 2)[1:] for e in manifest.errors] == [
        ["1", " empty voice_description"], ["3", " expected utt|ref_text|wav|text|voice_description (seed-tts-design), "
                                                 "found 1 field(s)"]]
    result = runner.invoke(app, ["bench", "--dataset-name", "seed-tts-design", "--dataset-path", str(root)])
    assert result.exit_code == 2 and "empty voice_description" in result.output


class _Bytes:
    """The least of a tokenizer vLLM-Omni's sample() asks for (it counts prompt tokens only)."""

    all_special_ids: list[int] = []
    all_special_tokens: list[str] = []

    def get_vocab(self):
        return {chr(i): i for i in range(256)}

    def __len__(self):
        return 256

    def encode(self, text, **_):
        return list(text.encode())


@pytest.mark.parametrize("dataset", ["seed-tts-text", "seed-tts-design"])
def test_rows_order_and_fields_as_vllm_omnis_own_loaders_build_them(dataset, tmp_path):
    loaders = pytest.importorskip("vllm_omni.benchmarks.data_modules.seed_tts_dataset",
                                  reason="vLLM-Omni is not installed")
    from omnicli.benchmark.options import vllm_compat
    from omnicli.benchmark.prompts import load_prompts

    rows = [f"u{i}|ref {i}|prompt-wavs/a.wav|text number {i}.|voice {i}, calm" for i in range(7)]
    if dataset == "seed-tts-design":
        rows.append("u7|||text seven.|voice 7|a sixth field, ignored by both")
    root = seed_tts_folder(tmp_path, rows, locale="zh", wavs=["a.wav"])
    loader = {"seed-tts-text": loaders.SeedTTSTextDataset, "seed-tts-design": loaders.SeedTTSDesignDataset}[dataset]
    theirs = loader(dataset_path=str(root), random_seed=5, locale="zh").sample(_Bytes(), len(rows), output_len=40)
    compat = vllm_compat(dataset, root, "zh", None, None, 40, None, sampling={}, ignored={})
    ours = load_prompts(compat.manifest, seed=5, dataset=dataset, max_new_tokens=compat.max_new_tokens).prompts
    assert [(p.utt, p.request.text) for p in ours] == [(r.seed_tts_utterance_id, r.prompt) for r in theirs]
    assert all(r.seed_tts_ref_wav_path == "" for r in theirs)  # neither sends a reference (SIM is skipped)
    assert all(p.request.ref_audio is None and p.request.max_new_tokens == 40 for p in ours)
    if dataset == "seed-tts-text":
        assert all(r.seed_tts_speech_extra is None for r in theirs) and compat.request_fields == {}
        return
    for prompt, request in zip(ours, theirs, strict=True):
        extra = request.seed_tts_speech_extra
        assert set(extra) == {"instructions", "task_type", "language", "max_new_tokens"}
        assert (prompt.request.instruct, compat.request_fields["language"], 40) == (
            extra["instructions"], extra["language"], extra["max_new_tokens"])
        assert extra["task_type"] == "VoiceDesign"  # omni's comes from the checkpoint (tts_model_type)


@pytest.mark.parametrize("kind", ["custom_voice", "voice_design"])
def test_on_customvoice_and_voicedesign_checkpoints_the_rows_become_their_requests(kind, tmp_path):
    """What vLLM-Omni's server would build for these rows on a CustomVoice / VoiceDesign Qwen3-TTS checkpoint
    (omni's request rules, omnicli/vllm_omni/requests.py; only the checkpoint's config is needed). The module
    engine of tests/test_vllm_omni_engine.py is a Base one: there each of these requests fails, saying why."""
    from omnicli.benchmark.options import vllm_compat
    from omnicli.benchmark.prompts import load_prompts
    from omnicli.vllm_omni.requests import Qwen3Checkpoint, Qwen3RequestBuilder

    checkpoint = tmp_path / kind
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"tts_model_type": kind, "talker_config": {
        "spk_id": {"vivian": 3000, "ryan": 3001} if kind == "custom_voice" else {},
        "codec_language_id": {"english": 2050, "chinese": 2055}}}))
    root = seed_tts_folder(tmp_path, ["u1|ref one|prompt-wavs/u1.wav|Good morning.|A warm, low voice."],
                           locale="zh", wavs=["u1.wav"])
    dataset = {"custom_voice": "seed-tts-text", "voice_design": "seed-tts-design"}[kind]
    body = json.dumps({"voice": "Vivian"}) if kind == "custom_voice" else None
    compat = vllm_compat(dataset, root, "zh", None, body, None, 12, sampling={}, ignored={})
    (prompt,) = load_prompts(compat.manifest, dataset=dataset, max_new_tokens=compat.max_new_tokens,
                             request_fields=compat.request_fields).prompts  # --extra-body's fields applied here
    request = prompt.request
    info, ref_frames = Qwen3RequestBuilder(Qwen3Checkpoint.read(checkpoint), None, []).additional_information(request)
    assert (info["text"], info["max_new_tokens"], ref_frames) == (["Good morning."], [12], 0)
    assert "ref_audio" not in info and "ref_text" not in info
    if kind == "custom_voice":
        assert (info["task_type"], info["speaker"], info["language"]) == (["CustomVoice"], ["vivian"], ["Auto"])
    else:
        assert (info["task_type"], info["instruct"], info["language"]) == (
            ["VoiceDesign"], ["A warm, low voice."], ["Chinese"])
