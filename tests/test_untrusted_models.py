"""No code runs from a model file: TorchScript UTMOS only when trusted, transformers folders whose
config names their own code (`auto_map`) refused with the reason, even with "y" on stdin."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Tuple  # noqa: UP035 (TorchScript reads the annotation)

import numpy as np
import pytest
import soundfile as sf
import torch
from typer.testing import CliRunner

from omnicli.errors import EXIT_USAGE
from omnicli.evaluation.scorers import ScorerSetupError

runner = CliRunner()


class HostileUtmos(torch.nn.Module):
    """A 'UTMOS predictor' that creates files: `marker.loaded` when loaded, `marker.scored` when run
    (TorchScript's torch.from_file(shared=True) creates and writes the file it names)."""

    def __init__(self, marker: str):
        super().__init__()
        self.marker = marker

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        t = torch.from_file(self.marker + ".scored", shared=True, size=8)
        return wave.mean(dim=1) + t.sum() * 0

    @torch.jit.export
    def __getstate__(self) -> Tuple[str, bool]:  # noqa: UP006
        return (self.marker, self.training)

    @torch.jit.export
    def __setstate__(self, state: Tuple[str, bool]) -> None:  # noqa: UP006
        self.marker = state[0]
        t = torch.from_file(self.marker + ".loaded", shared=True, size=8)
        self.training = bool(t.sum() == 0) and state[1]


@pytest.fixture
def hostile_ts(tmp_path) -> tuple[Path, Path]:
    """(the TorchScript file, the marker path its code writes next to)."""
    marker = tmp_path / "pwned"
    path = tmp_path / "cache" / "models" / "utmos" / "utmos22_strong.ts"
    path.parent.mkdir(parents=True)
    torch.jit.script(HostileUtmos(str(marker))).save(str(path))
    return path, marker


def _created(marker: Path) -> list[str]:
    return sorted(p.name for p in marker.parent.glob(marker.name + "*"))


def _gen_and_manifest(tmp_path: Path) -> tuple[Path, Path]:
    gen = tmp_path / "gen"
    gen.mkdir()
    sf.write(gen / "a.wav", (0.3 * np.sin(np.arange(16000) / 5)).astype(np.float32), 16000)
    sf.write(tmp_path / "ref.wav", (0.3 * np.sin(np.arange(16000) / 7)).astype(np.float32), 16000)
    (tmp_path / "meta.lst").write_text(f"a|p|{tmp_path / 'ref.wav'}|hello\n")
    return gen, tmp_path / "meta.lst"


def test_a_hostile_torchscript_file_does_run_its_code_when_trusted(hostile_ts):
    """What the refusal protects from: trusted, the file writes where it likes when loaded and when scoring."""
    from omnicli.evaluation.scorers import ScoreItem
    from omnicli.evaluation.scorers.mos import load_mos

    path, marker = hostile_ts
    (scorer,) = load_mos(f"utmos:{path}", trust_torchscript=True)
    assert _created(marker) == ["pwned.loaded"]
    scorer.score([ScoreItem("a", np.zeros(16000, np.float32))])
    assert _created(marker) == ["pwned.loaded", "pwned.scored"]
    assert f"sha256 {scorer.sha256}" in scorer.describe()["model"]


@pytest.mark.parametrize("spec", ["utmos:PATH", "utmos"], ids=["named", "default-path"])
def test_omni_eval_refuses_torchscript_without_trust_and_says_why(tmp_path, hostile_ts, monkeypatch, spec):
    from omnicli.cli import app

    path, marker = hostile_ts
    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / "cache"))
    gen, meta = _gen_and_manifest(tmp_path)
    result = runner.invoke(app, ["eval", str(gen), "-m", str(meta), "--metrics", "mos", "--mos",
                                 spec.replace("PATH", str(path)), "--out", str(tmp_path / "out")], input="y\n")
    said = " ".join(result.output.split())
    assert result.exit_code == EXIT_USAGE, said
    assert (
        f"refusing to load {path}" in said and "TorchScript file is a program" in said and "--trust-torchscript" in said
    )
    assert _created(marker) == [] and not (tmp_path / "out").exists()


def test_load_scorers_refuses_torchscript_before_loading_anything(hostile_ts):
    from omnicli.evaluation.scorers import load_scorers

    path, marker = hostile_ts
    with pytest.raises(ScorerSetupError, match="no digest is published"):
        load_scorers(("mos",), mos=f"dnsmos,utmos:{path}")
    assert _created(marker) == []


# --- transformers folders that name their own code ------------------------------------------------

EVIL_PY = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n\nclass Evil:\n    pass\n"


def _plant_remote_code(folder: Path, marker: Path, config: str, auto: dict, drop: str | None = None) -> None:
    (folder / "evil.py").write_text(EVIL_PY.format(marker=str(marker)))
    path = folder / config
    data = json.loads(path.read_text()) if path.is_file() else {}
    data["auto_map"] = auto
    data.pop(drop, None)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def tiny_wavlm(tmp_path_factory) -> Path:
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMForXVector

    folder = tmp_path_factory.mktemp("wavlm") / "tiny"
    config = WavLMConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8),
        conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
        num_buckets=16, max_bucket_distance=64, tdnn_dim=(8, 8), tdnn_kernel=(3, 1), tdnn_dilation=(1, 1),
        xvector_output_dim=4,
    )
    WavLMForXVector(config).save_pretrained(folder)
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, return_attention_mask=True).save_pretrained(folder)
    return folder


@pytest.fixture
def hostile_wavlm(tiny_wavlm, tmp_path) -> tuple[Path, Path]:
    folder, marker = tmp_path / "wavlm", tmp_path / "pwned"
    shutil.copytree(tiny_wavlm, folder)
    # No feature_extractor_type: transformers takes the class from auto_map, asks [y/N] on stdin and,
    # on "y", imports evil.py (what today's loaders did).
    _plant_remote_code(folder, marker, "preprocessor_config.json", {"AutoFeatureExtractor": "evil.Evil"},
                       drop="feature_extractor_type")
    _plant_remote_code(folder, marker, "config.json", {"AutoConfig": "evil.Evil"})
    return folder, marker


def test_omni_eval_refuses_a_wavlm_folder_with_auto_map_even_with_y_on_stdin(tmp_path, hostile_wavlm):
    from omnicli.cli import app

    folder, marker = hostile_wavlm
    gen, meta = _gen_and_manifest(tmp_path)
    result = runner.invoke(app, ["eval", str(gen), "-m", str(meta), "--metrics", "sim", "--sim", f"wavlm:{folder}",
                                 "--out", str(tmp_path / "out"), "--device", "cpu"], input="y\ny\n")
    said = " ".join(result.output.split())
    assert result.exit_code == EXIT_USAGE, said
    assert "config.json: refusing this model folder: its auto_map names Python code (evil.Evil)" in said
    assert "never runs code from a model folder" in said
    assert not marker.exists()


@pytest.mark.parametrize("stdin", ["y\n", "open pipe"])
def test_the_wavlm_encoder_itself_refuses_and_never_reads_stdin(hostile_wavlm, monkeypatch, stdin):
    """Below `locate_wavlm` too: an open stdin must not hang the load, "y" must not run the code."""
    import os

    from omnicli.evaluation.scorers.sim import WavLMEncoder

    folder, marker = hostile_wavlm
    if stdin == "open pipe":
        read_end, write_end = os.pipe()  # nothing is ever written: input() would wait
        monkeypatch.setattr(sys, "stdin", os.fdopen(read_end))
    else:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(ScorerSetupError, match="auto_map"):
        WavLMEncoder(folder)
    assert not marker.exists()
    if stdin == "open pipe":
        os.close(write_end)


def test_a_whisper_folder_with_auto_map_is_refused(tmp_path, monkeypatch):
    from omnicli.evaluation.asr import AsrSetupError
    from omnicli.evaluation.asr.whisper_transformers import TransformersWhisperBackend

    folder, marker = tmp_path / "whisper", tmp_path / "pwned"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "whisper"}))
    _plant_remote_code(folder, marker, "tokenizer_config.json", {"AutoTokenizer": ["evil.Evil", None]})
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    with pytest.raises(AsrSetupError, match=r"tokenizer_config.json: refusing this model folder: .*\(evil.Evil\)"):
        TransformersWhisperBackend(model=str(folder), language="en", device="cpu")
    assert not marker.exists()
