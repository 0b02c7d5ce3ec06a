"""MOSS-TTS-Local v1.5 requests: ours against vLLM-Omni's own serving adapter, both driven by one stand-in
for the checkpoint's processor (its real one is remote code shipped with the weights, not available here),
and the consent a MOSS profile must give before that code runs. No engine starts."""

from __future__ import annotations

import asyncio
import base64
import copy
import importlib.util
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from omnicli.engine.request import TTSRequest

needs_vllm_omni = pytest.mark.skipif(importlib.util.find_spec("vllm_omni") is None, reason="vllm-omni not installed")
N_VQ = 4


class FakeProcessor:
    """Deterministic stand-in: every input it is given shows in what it returns, so two callers get equal
    outputs only if they called it with equal inputs (text, language, reference codes, mode, rates)."""

    def __init__(self, sampling_rate: int = 24000) -> None:
        self.model_config = SimpleNamespace(n_vq=N_VQ, sampling_rate=sampling_rate)
        self.encoded: list[tuple[tuple[int, ...], int, int]] = []

    def encode_audios_from_wav(self, wavs: list[Any], *, sampling_rate: int, n_vq: int) -> list[Any]:
        import torch

        out = []
        for wav in wavs:
            self.encoded.append((tuple(wav.shape), sampling_rate, n_vq))
            frames = max(1, wav.shape[-1] * 25 // (2 * sampling_rate))  # 12.5 frames per second
            energy = int(round(float(wav.abs().mean()) * 100))
            grid = torch.arange(frames)[:, None] * 7 + torch.arange(n_vq)[None, :] * 3
            out.append(grid + energy + 10 * wav.shape[0] + sampling_rate // 1000)
        return out

    def build_user_message(self, **fields: Any) -> dict:
        return {"role": "user", **fields}

    def build_assistant_message(self, *, audio_codes_list: list[Any]) -> dict:
        return {"role": "assistant", "audio_codes_list": audio_codes_list}

    def __call__(self, *, conversations: list[list[dict]], mode: str) -> dict:
        import torch

        rows: list[list[int]] = []
        pad = [-1] * N_VQ
        rows.append([{"generation": 1, "continuation": 2}[mode], *pad])
        for message in conversations[0]:
            for key in sorted(message):
                value = message[key]
                if isinstance(value, str):
                    rows += [[ord(ch), *pad] for ch in f"{key}={value}"]
                else:  # a list of code tensors (reference / assistant audio)
                    for codes in value:
                        rows += [[9000, *codes[t].tolist()] for t in range(codes.shape[0])]
        return {"input_ids": [torch.tensor(rows, dtype=torch.int64)]}


def wav_bytes(pcm: np.ndarray, sr: int) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, pcm, sr, format="WAV", subtype="FLOAT")
    return buf.getvalue()


def the_adapter(proc: FakeProcessor, waveforms: dict[str, tuple[np.ndarray, int]]) -> Any:
    """vLLM-Omni's MOSS adapter behind a stand-in for the server object it reads (the local variant)."""
    from vllm_omni.entrypoints.openai.tts_adapters.moss_tts import MossTTSAdapter

    class Cache:
        def __init__(self) -> None:
            self.items: dict = {}

        @staticmethod
        def make_cache_key(name: str, model_type: str, created_at: int = 0) -> tuple:
            return (name, model_type, created_at)

        def get(self, key: Any) -> Any:
            return self.items.get(key)

        def put(self, key: Any, value: Any) -> None:
            self.items[key] = value

    async def resolve(ref: str) -> tuple[np.ndarray, int, str]:
        pcm, sr = waveforms[ref]
        return pcm, sr, f"key-{len(ref)}"

    server = SimpleNamespace(
        uploaded_speakers={}, _speaker_cache=Cache(), api_server_shared_dir=None,
        _resolve_ref_audio_array=resolve, _get_resolved_ref_audio_artifact_key=lambda key: None,
        _validate_ref_audio_format=lambda ref: None)
    engine_client = SimpleNamespace(model_config=SimpleNamespace(model="/models/MOSS-TTS-Local-Transformer-v1.5"),
                                    stage_configs=[])
    adapter = MossTTSAdapter(SimpleNamespace(server=server, engine_client=engine_client))
    adapter._moss_processor_cache = proc  # what _get_moss_processor() would have loaded from the checkpoint
    return adapter


def reference(sr: int, seconds: float = 1.2) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32)


CASES = {
    "continuation (reference text)": dict(ref_text="The reference says this.", language="English", sr=24000),
    "generation (no reference text)": dict(ref_text=None, language=None, sr=24000),
    "continuation, 16 kHz reference": dict(ref_text="Resampled first.", language=None, sr=16000),
}


@needs_vllm_omni
@pytest.mark.parametrize("case", list(CASES))
def test_our_moss_request_equals_what_vllm_omnis_adapter_builds(case):
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()  # before vLLM-Omni's import chain meets torchvision/torchaudio
    from vllm import SamplingParams
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest

    from omnicli.vllm_omni.moss import MossRequestBuilder
    c = CASES[case]
    pcm = reference(c["sr"])
    uri = "data:audio/wav;base64," + base64.b64encode(wav_bytes(pcm, c["sr"])).decode()
    defaults = [SamplingParams(max_tokens=4096, seed=None), SamplingParams()]
    text = "Hello from the target sentence."

    theirs_proc, ours_proc = FakeProcessor(), FakeProcessor()
    adapter = the_adapter(theirs_proc, {uri: (pcm, c["sr"])})
    oai = OpenAICreateSpeechRequest(input=text, ref_audio=uri, ref_text=c["ref_text"], language=c["language"],
                                    max_new_tokens=120, seed=7)
    assert adapter.validate(oai) is None
    theirs = asyncio.run(adapter.build(oai, copy.deepcopy(defaults), has_inline_ref_audio=True))
    their_sp = adapter.apply_sampling_overrides(copy.deepcopy(defaults), oai)

    ours = MossRequestBuilder(ours_proc, copy.deepcopy(defaults)).build(TTSRequest(
        "r1", text, ref_audio=pcm, ref_sample_rate=c["sr"], ref_text=c["ref_text"], language=c["language"],
        max_new_tokens=120, seed=7))

    assert ours_proc.encoded == theirs_proc.encoded  # the same clip shape and rate reached the tokenizer
    assert ours.prompt["prompt_token_ids"] == list(theirs.prompt["prompt_token_ids"])
    t_info, o_info = theirs.prompt["additional_information"], ours.prompt["additional_information"]
    assert o_info["codes"]["ref"].equal(t_info["codes"]["ref"])
    assert (o_info["max_new_frames"], o_info["seed"]) == (t_info["max_new_frames"], t_info["seed"]) == ([120], [7])
    assert ours.sampling_params_list[0].max_tokens == their_sp[0].max_tokens == 120
    assert ours.task_type == ("continuation" if c["ref_text"] else "generation")


@needs_vllm_omni
def test_a_moss_request_without_a_reference_is_refused_as_the_adapter_refuses_it():
    from omnicli.vllm_omni.shims import install_import_shims

    install_import_shims()
    from vllm_omni.entrypoints.openai.protocol.audio import OpenAICreateSpeechRequest

    from omnicli.vllm_omni.moss import MossRequestBuilder
    from omnicli.vllm_omni.requests import RequestInvalid

    adapter = the_adapter(FakeProcessor(), {})
    assert "requires 'ref_audio'" in adapter.validate(OpenAICreateSpeechRequest(input="No reference."))
    with pytest.raises(RequestInvalid, match="needs a reference"):
        MossRequestBuilder(FakeProcessor(), [SimpleNamespace(max_tokens=10, seed=None)]).build(
            TTSRequest("r", "No reference."))


def test_the_tokenizer_gets_the_reference_at_its_own_rate_in_at_most_two_channels():
    from omnicli.vllm_omni.moss import MossRequestBuilder

    proc = FakeProcessor(sampling_rate=48000)
    builder = MossRequestBuilder(proc, [SimpleNamespace(max_tokens=10, seed=3)])
    stereo3 = np.stack([reference(16000)] * 3, axis=1)  # (T, 3 channels) at 16 kHz
    built = builder.build(TTSRequest("r", "Text.", ref_audio=stereo3, ref_sample_rate=16000))
    (shape, rate, n_vq), = proc.encoded
    assert shape == (2, int(1.2 * 48000)) and rate == 48000 and n_vq == N_VQ  # 16 kHz -> 24 kHz -> 48 kHz
    assert built.prompt["additional_information"]["seed"] == [3]  # the deploy config's seed without a request seed
    assert "max_new_frames" not in built.prompt["additional_information"] and not built.explicit_cap


def test_the_processor_code_runs_only_where_the_profile_consents(tmp_path):
    from omnicli.errors import UsageError
    from omnicli.vllm_omni.moss import moss_builder, remote_code_trusted

    (tmp_path / "processing_moss_tts.py").write_text("raise SystemExit('must not run')\n")
    loaded: list[Path] = []

    def loader(ckpt: Path, codec: Path | None) -> FakeProcessor:
        loaded.append(ckpt)
        return FakeProcessor()

    defaults = [SimpleNamespace(max_tokens=10, seed=None)]
    for options in (None, {}, {"trust_remote_code": "true"}, {"trust_remote_code": 1}):
        with pytest.raises(UsageError, match="trust_remote_code: true") as err:
            moss_builder(tmp_path, None, defaults, options, loader=loader)
        assert err.value.exit_code == 2
    assert loaded == [] and not remote_code_trusted({"trust_remote_code": "yes"})
    builder = moss_builder(tmp_path, None, defaults, {"trust_remote_code": True}, loader=loader)
    assert loaded == [tmp_path] and builder.n_vq == N_VQ


def test_a_moss_folder_with_auto_map_passes_the_checkpoint_check_only_with_consent(tmp_path):
    import json

    from omnicli.families import check_checkpoints
    from omnicli.model_files import ModelFileError

    ckpt, codec = tmp_path / "moss", tmp_path / "codec"
    for folder in (ckpt, codec):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"auto_map": {"AutoModel": "modeling_x.X"}}))
        (folder / "model.safetensors").write_bytes(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (ckpt / name).write_text("{}")
    (ckpt / "processor_config.json").write_text(json.dumps({"auto_map": {"AutoProcessor": "processing_moss_tts.P"}}))
    (ckpt / "processing_moss_tts.py").write_text("")
    with pytest.raises(ModelFileError, match="auto_map"):
        check_checkpoints("moss-tts-local", str(ckpt), str(codec))
    check_checkpoints("moss-tts-local", str(ckpt), str(codec), {"trust_remote_code": True})
    qwen = tmp_path / "qwen"  # a complete Qwen3-TTS layout that asks for code of its own
    (qwen / "speech_tokenizer").mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"):
        (qwen / name).write_bytes((ckpt / name).read_bytes())
    for name in ("config.json", "preprocessor_config.json"):
        (qwen / "speech_tokenizer" / name).write_text("{}")
    (qwen / "speech_tokenizer" / "model.safetensors").write_bytes((ckpt / "model.safetensors").read_bytes())
    with pytest.raises(ModelFileError, match="auto_map"):  # the consent is MOSS's, not every family's
        check_checkpoints("qwen3-tts", str(qwen), None, {"trust_remote_code": True})


def test_a_moss_request_that_ends_by_length_keeps_its_audio_and_one_without_audio_fails():
    from omnicli.vllm_omni.requests import BuiltRequest, length_finish_error
    from omnicli.vllm_omni.spec import MOSS_TTS_LOCAL, QWEN3_TTS

    moss = BuiltRequest(prompt={}, sampling_params_list=[], task_type="generation", max_tokens=None,
                        explicit_cap=False)
    assert length_finish_error(MOSS_TTS_LOCAL, moss, 4096) is None  # the adapter has no length rule for MOSS
    assert MOSS_TTS_LOCAL.no_audio_error == "MOSS-TTS Local produced no audio output"
    qwen = BuiltRequest(prompt={}, sampling_params_list=[], task_type="Base", max_tokens=16, explicit_cap=False)
    assert "did not emit codec EOS" in (length_finish_error(QWEN3_TTS, qwen, 16) or "")
    assert QWEN3_TTS.no_audio_error is None
