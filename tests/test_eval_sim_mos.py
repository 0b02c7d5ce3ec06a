"""Speaker similarity and MOS on real speech (Debian flite voices, pocketsphinx LibriVox clips),
the `omni eval` command, and the offline model lookups of the WavLM / UTMOS backends."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.audio import load_mono
from omnicli.errors import EXIT_SOME_FAILED, EXIT_USAGE
from omnicli.evaluation.scorers import ScoreItem, Scorer, ScorerSetupError, audio_summary, score_audio
from omnicli.evaluation.scorers.base import SAMPLE_RATE
from omnicli.manifest import ManifestRow
from tests import needs

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
VOICES = ("slt", "rms", "awb", "kal16")
TEXTS = {
    "a": "The quick brown fox jumps over the lazy dog near the river bank.",
    "b": "Please call Stella and ask her to bring these things with her from the store.",
}
runner = CliRunner()


@pytest.fixture(scope="module")
def voices(tmp_path_factory) -> dict[str, Path]:
    """{voice-sentence: wav}: four flite voices, two sentences each."""
    needs.program("flite", "Debian flite is not installed (apt-get install flite)")
    root = tmp_path_factory.mktemp("voices")
    out = {}
    for voice in VOICES:
        for key, text in TEXTS.items():
            path = root / f"{voice}-{key}.wav"
            subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(path)], check=True, timeout=60)
            out[f"{voice}-{key}"] = path
    return out


@pytest.fixture(scope="module")
def dvector():
    needs.module("resemblyzer", "resemblyzer is not installed (scripts/setup.sh installs it with the eval extra)")
    from omnicli.evaluation.scorers.sim import load_sim

    return load_sim("dvector")


@pytest.fixture(scope="module")
def dnsmos():
    needs.module("speechmos", "speechmos (the eval extra) is not installed")
    from omnicli.evaluation.scorers.mos import load_mos

    (scorer,) = load_mos("dnsmos")
    return scorer


def _sim(scorer, gen: Path, ref: Path) -> float:
    (value,) = scorer.score([ScoreItem(gen.stem, load_mono(gen, SAMPLE_RATE), ref)])
    return value["sim"]


def test_flite_same_voice_scores_higher_sim_than_any_other_voice(voices, dvector):
    same = [_sim(dvector, voices[f"{v}-b"], voices[f"{v}-a"]) for v in VOICES]
    different = [_sim(dvector, voices[f"{g}-b"], voices[f"{r}-a"]) for g in VOICES for r in VOICES if g != r]
    assert min(same) > max(different), (same, different)
    assert all(-1.0 <= s <= 1.0 for s in same + different)


def test_librivox_reader_scores_higher_sim_with_herself_than_with_flite(voices, dvector):
    clips = sorted(LIBRIVOX.glob("*.wav"))
    needs.present(len(clips) >= 3, "pocketsphinx-testdata is not installed (apt-get install pocketsphinx-testdata)")
    same = [_sim(dvector, a, b) for a, b in combinations(clips, 2)]
    different = [_sim(dvector, clip, voices[f"{v}-a"]) for clip in clips for v in VOICES]
    assert min(same) > max(different), (same, different)


def _noisy(clip: np.ndarray, snr_db: float) -> np.ndarray:
    noise = np.random.default_rng(0).standard_normal(clip.shape[0]).astype(np.float32)
    noise *= np.sqrt(np.mean(clip**2) / np.mean(noise**2) / 10 ** (snr_db / 10))
    return clip + noise  # may exceed [-1, 1]: the scorer clips, as DNSMOS requires


def test_dnsmos_clean_speech_beats_the_same_speech_with_noise(voices, dnsmos):
    sources = [voices["slt-b"], voices["awb-a"]] + sorted(LIBRIVOX.glob("*.wav"))[:2]
    clean = [load_mono(p, SAMPLE_RATE) for p in sources]
    items = [ScoreItem(f"c{i}", c) for i, c in enumerate(clean)] + [
        ScoreItem(f"n{i}", _noisy(c, 5.0)) for i, c in enumerate(clean)
    ]
    scores = dnsmos.score(items)
    n = len(clean)
    for i in range(n):
        assert scores[i]["dnsmos_ovrl"] > scores[n + i]["dnsmos_ovrl"], (sources[i], scores[i], scores[n + i])
        assert scores[i]["dnsmos_bak"] > scores[n + i]["dnsmos_bak"]
        assert scores[i]["dnsmos_p808"] > scores[n + i]["dnsmos_p808"]
        assert all(1.0 <= v <= 5.5 for v in scores[i].values())


def test_dnsmos_batched_equals_one_by_one_and_speechmos(voices, dnsmos):
    from speechmos import dnsmos as reference

    items = [ScoreItem(k, load_mono(voices[k], SAMPLE_RATE)) for k in ("slt-a", "kal16-b", "rms-a")]
    together = dnsmos.score(items)
    alone = [dnsmos.score([item])[0] for item in items]
    assert together == alone
    # The package's own (slow, session-per-call) scorer gives the same figures.
    theirs = reference.run(items[1].clip, SAMPLE_RATE)
    assert together[1] == pytest.approx({
        "dnsmos_ovrl": theirs["ovrl_mos"], "dnsmos_sig": theirs["sig_mos"],
        "dnsmos_bak": theirs["bak_mos"], "dnsmos_p808": theirs["p808_mos"],
    }, abs=1e-3)


# --- the runner: statuses, failures one by one, retention ------------------------------------


class _FlakyScorer(Scorer):
    """Fails on one utterance only (a unit-test fake of one component)."""

    metric, backend, keys = "mos", "flaky", ("dnsmos_ovrl",)

    def score(self, items):
        if any(item.utt == "bad" for item in items):
            raise RuntimeError("boom")
        return [{"dnsmos_ovrl": float(np.abs(item.clip).max()) * 4 + 1} for item in items]

    def describe(self):
        return {"backend": "flaky", "model": "-", "comparable_to": "-"}


def test_runner_fails_one_clip_alone_and_keeps_order(tmp_path):
    from omnicli.retention import Reason, Retainer

    for utt, amp in (("good", 0.5), ("bad", 0.5), ("quiet", 0.1)):
        sf.write(tmp_path / f"{utt}.wav", amp * np.sin(np.linspace(0, 800, 16000)), 16000)
    (tmp_path / "empty.wav").write_bytes(b"")
    rows = [ManifestRow(utt=u, text="x") for u in ("good", "bad", "quiet", "empty", "absent")]
    retainer = Retainer(tmp_path / "kept")
    run = score_audio(rows, tmp_path, [_FlakyScorer()], mos_threshold=2.0, batch_size=8, retainer=retainer)
    by = {r.utt: r for r in run.results}
    assert [r.utt for r in run.results] == ["good", "bad", "quiet", "empty", "absent"]
    assert by["good"].values["dnsmos_ovrl"] == pytest.approx(3.0, abs=0.01) and not by["good"].reasons
    assert "boom" in by["bad"].errors["mos"] and not by["bad"].values
    assert by["quiet"].reasons == [Reason.LOW_MOS] and Path(by["quiet"].retained).is_file()
    assert (by["empty"].status, by["absent"].status) == ("empty_audio", "missing")
    summary = audio_summary(run, sim_threshold=0.5, mos_threshold=2.0)
    assert summary["num_mos_scored"] == 2 and summary["num_mos_failed"] == 3  # bad, empty, absent
    assert summary["dnsmos_ovrl_mean"] == pytest.approx((3.0 + 1.4) / 2, abs=0.01)
    assert summary["mos_share_below_threshold"] == 50.0 and summary["num_low_mos"] == 1
    sidecar = json.loads(Path(by["quiet"].retained).with_suffix(".json").read_text())
    assert sidecar["reasons"] == ["low_mos"] and sidecar["utt"] == "quiet"


def test_metric_and_backend_specs_are_checked():
    from omnicli.evaluation.pipeline import parse_metrics
    from omnicli.evaluation.scorers.mos import parse_mos_specs
    from omnicli.evaluation.scorers.sim import DEFAULT_WAVLM, parse_sim_spec

    assert parse_metrics("mos, wer") == ("wer", "mos")
    with pytest.raises(ValueError, match="utmos"):
        parse_metrics("wer,utmos")
    assert parse_sim_spec("wavlm") == ("wavlm", DEFAULT_WAVLM)
    assert parse_sim_spec("resemblyzer") == ("dvector", None)
    with pytest.raises(ScorerSetupError, match="unknown SIM backend"):
        parse_sim_spec("ecapa")
    assert parse_mos_specs("dnsmos,utmos:/x/u.ts") == [("dnsmos", None), ("utmos", "/x/u.ts")]
    with pytest.raises(ScorerSetupError, match="twice"):
        parse_mos_specs("dnsmos,dnsmos")


# --- WavLM and UTMOS: offline lookups, and loading a tiny local checkpoint --------------------


def test_wavlm_absent_says_where_it_looked(tmp_path):
    from omnicli.evaluation.scorers.sim import locate_wavlm

    with pytest.raises(ScorerSetupError) as info:
        locate_wavlm("microsoft/wavlm-base-plus-sv", cache_dir=tmp_path / "hub")
    message = str(info.value)
    assert str(tmp_path / "hub") in message and "nothing is downloaded" in message and "--sim wavlm:/path" in message
    with pytest.raises(ScorerSetupError, match="not found"):
        locate_wavlm(str(tmp_path / "no" / "such" / "folder"))
    (tmp_path / "notamodel").mkdir()
    with pytest.raises(ScorerSetupError, match="no config.json"):
        locate_wavlm(str(tmp_path / "notamodel"))


@pytest.fixture(scope="module")
def tiny_wavlm(tmp_path_factory) -> Path:
    """A random-weight WavLMForXVector in the layout `save_pretrained` (and the HF hub) uses."""
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMForXVector

    folder = tmp_path_factory.mktemp("wavlm") / "tiny-wavlm-sv"
    config = WavLMConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2, num_buckets=16, max_bucket_distance=64,
        tdnn_dim=(16, 16), tdnn_kernel=(3, 1), tdnn_dilation=(1, 1), xvector_output_dim=8,
    )
    WavLMForXVector(config).save_pretrained(folder)
    Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True,
                             return_attention_mask=True).save_pretrained(folder)
    return folder


def test_wavlm_loads_a_local_folder_and_a_hub_cache_snapshot(tmp_path, tiny_wavlm):
    from omnicli.evaluation.scorers.sim import load_sim, locate_wavlm

    scorer = load_sim(f"wavlm:{tiny_wavlm}")
    assert scorer.describe()["backend"] == "wavlm" and "NOT the same model" in scorer.describe()["comparable_to"]
    ref = tmp_path / "ref.wav"
    t = np.arange(16000) / 16000
    sf.write(ref, 0.3 * np.sin(2 * np.pi * 220 * t), 16000)
    same = scorer.score([ScoreItem("u", load_mono(ref, SAMPLE_RATE), ref)])[0]["sim"]
    other = scorer.score([ScoreItem("v", (0.3 * np.sign(np.sin(2 * np.pi * 97 * t))).astype(np.float32), ref)])[0][
        "sim"
    ]
    assert same == pytest.approx(1.0, abs=1e-3) and other < same
    # The hub cache layout: models--ORG--NAME/snapshots/REV/ + refs/main.
    repo = tmp_path / "hub" / "models--acme--tiny-wavlm-sv"
    snapshot = repo / "snapshots" / "0123456789abcdef"
    shutil.copytree(tiny_wavlm, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123456789abcdef")
    assert locate_wavlm("acme/tiny-wavlm-sv", cache_dir=tmp_path / "hub") == snapshot


def test_utmos_absent_says_where_it_looked(tmp_path, monkeypatch):
    from omnicli.evaluation.scorers.mos import load_mos

    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ScorerSetupError) as info:
        load_mos("dnsmos,utmos")
    message = str(info.value)
    assert str(tmp_path / "cache" / "models" / "utmos" / "utmos22_strong.ts") in message
    assert "nothing is downloaded" in message and "--mos utmos:/path" in message


def test_utmos_scores_with_a_local_torchscript_predictor(tmp_path, monkeypatch):
    import torch

    from omnicli.evaluation.scorers.mos import load_mos

    class Loudness(torch.nn.Module):  # stands in for an exported UTMOS: wave [B, T] -> score [B]
        def forward(self, wave: torch.Tensor) -> torch.Tensor:
            return 1.0 + 4.0 * wave.abs().mean(dim=1).clamp(0, 1)

    target = tmp_path / "cache" / "models" / "utmos" / "utmos22_strong.ts"
    target.parent.mkdir(parents=True)
    torch.jit.script(Loudness()).save(str(target))
    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / "cache"))
    (scorer,) = load_mos("utmos", trust_torchscript=True)
    loud, soft = np.full(8000, 0.5, np.float32), np.full(8000, 0.1, np.float32)
    assert scorer.score([ScoreItem("a", loud), ScoreItem("b", soft)]) == [{"utmos": 3.0}, {"utmos": 1.4}]


# --- `omni eval` end to end ---------------------------------------------------------------------


def invoke(args: list[str]):
    from omnicli.cli import app

    return runner.invoke(app, ["eval", *args], catch_exceptions=False)


def _said(result) -> str:
    """The output with Rich's line wrapping undone (the terminal width must not matter)."""
    return " ".join(result.output.split())


@pytest.fixture(scope="module")
def eval_dir(voices, tmp_path_factory) -> Path:
    """gen/ holds sentence b; each row's reference is sentence a of the same or another voice."""
    root = tmp_path_factory.mktemp("eval")
    gen = root / "gen"
    gen.mkdir()
    rows = {"same_slt": ("slt", "slt"), "same_awb": ("awb", "awb"), "other_rms": ("rms", "slt")}
    lines = []
    for utt, (gen_voice, ref_voice) in rows.items():
        shutil.copy(voices[f"{gen_voice}-b"], gen / f"{utt}.wav")
        lines.append(f"{utt}|prompt|{voices[f'{ref_voice}-a']}|{TEXTS['b']}")
    lines.append(f"never_made|prompt|{voices['slt-a']}|{TEXTS['b']}")
    (root / "meta.lst").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_eval_sim_mos_writes_one_table_summary_and_retains(eval_dir, dvector, dnsmos):
    out, kept = eval_dir / "out", eval_dir / "kept"
    result = invoke([str(eval_dir / "gen"), "--manifest", str(eval_dir / "meta.lst"), "--metrics", "sim,mos",
                     "--out", str(out), "--keep-failed", str(kept), "--device", "cpu",
                     "--set", "retention.sim_threshold=0.8", "--set", "retention.mos_threshold=1.5"])
    assert result.exit_code == EXIT_SOME_FAILED, result.output  # never_made has no wav
    summary = json.loads((out / "eval_summary.json").read_text())
    for key in ("sim_mean", "sim_median", "sim_share_below_threshold", "sim_backend", "sim_note",
                "dnsmos_ovrl_mean", "dnsmos_sig_mean", "dnsmos_bak_mean", "dnsmos_p808_mean",
                "sim_cpu_s_per_utt", "mos_cpu_s_per_utt", "num_utts", "num_missing", "profile_digest"):
        assert summary[key] is not None, key
    assert summary["metrics"] == ["sim", "mos"] and summary["sim_backend"] == "dvector"
    assert "NOT comparable to published Seed-TTS SIM" in summary["sim_note"]
    assert summary["num_missing"] == 1 and summary["missing"] == ["never_made"] and summary["num_sim_scored"] == 3
    assert summary["num_sim_failed"] == 1 and summary["sim_failed"][0]["status"] == "missing"
    assert summary["sim_threshold"] == 0.8 and summary["num_low_sim"] == 1 and summary["num_low_mos"] == 0
    with open(out / "eval_results.tsv", newline="", encoding="utf-8") as fh:
        rows = {r["utt"]: r for r in csv.DictReader(fh, delimiter="\t")}
    assert float(rows["same_slt"]["sim"]) > float(rows["other_rms"]["sim"])
    assert float(rows["same_awb"]["sim"]) > float(rows["other_rms"]["sim"])
    assert rows["other_rms"]["reasons"] == "low_sim" and rows["same_slt"]["reasons"] == ""
    assert {r["sim_backend"] for r in rows.values()} == {"dvector"}
    assert rows["never_made"]["status"] == "missing" and rows["never_made"]["sim"] == ""
    jsonl = [json.loads(line) for line in (out / "eval_results.jsonl").read_text().splitlines()]
    assert [r["utt"] for r in jsonl] == list(rows)
    sidecars = [json.loads(p.read_text()) for p in kept.glob("*.json")]
    assert [(s["utt"], s["reasons"]) for s in sidecars] == [("other_rms", ["low_sim"])]


def test_eval_with_wer_from_cached_transcripts_keeps_eval_wer_keys(eval_dir, dnsmos):
    transcripts = eval_dir / "hyp.tsv"
    transcripts.write_text("".join(f"{u}\t{TEXTS['b']}\n" for u in ("same_slt", "same_awb", "other_rms", "never_made")))
    out = eval_dir / "out-wer"
    result = invoke([str(eval_dir / "gen"), "-m", str(eval_dir / "meta.lst"), "--metrics", "mos,wer",
                     "--transcripts", str(transcripts), "--out", str(out)])
    summary = json.loads((out / "eval_summary.json").read_text())
    assert summary["metrics"] == ["wer", "mos"] and summary["seed_wer_mean"] == 0.0 and summary["num_scored"] == 4
    assert summary["num_mos_scored"] == 3 and "sim_mean" not in summary
    # never_made is scored by WER (cached transcript) but has no audio for MOS: a failure, exit 1.
    assert result.exit_code == EXIT_SOME_FAILED, result.output
    header = (out / "eval_results.tsv").read_text().splitlines()[0].split("\t")
    assert header[:3] == ["utt", "wer", "ref"] and "dnsmos_ovrl" in header and "sim" not in header
    # seed-tts-eval's score file, as eval-wer writes it: one line per scored utt, then the mean.
    seed = (out / "wav_res_ref_text.wer").read_text().splitlines()
    assert len(seed) == summary["num_scored"] + 2 and seed[-1] == f"WER: {summary['seed_wer_mean']}%"  # + header, WER:


def test_eval_usage_errors_exit_2(eval_dir, tmp_path, monkeypatch):
    base = [str(eval_dir / "gen"), "-m", str(eval_dir / "meta.lst")]
    result = invoke([*base, "--metrics", "sim,utmos"])
    assert result.exit_code == EXIT_USAGE and "unknown metric" in _said(result)
    result = invoke([*base, "--metrics", "sim", "--sim", f"wavlm:{tmp_path / 'no' / 'such' / 'dir'}"])
    assert result.exit_code == EXIT_USAGE and "not found (no such folder on this machine)" in _said(result)
    monkeypatch.setenv("OMNI_CACHE_DIR", str(tmp_path / "c"))
    result = invoke([*base, "--metrics", "mos", "--mos", "utmos"])
    assert result.exit_code == EXIT_USAGE and "UTMOS model not on this machine" in _said(result)
