"""`omni report` without a browser: reading result files, the word diff, the A/B interval, the command."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from omnicli.benchmark.compare import ratio_estimate
from omnicli.cli import app
from omnicli.evaluation.wer import score_utterance
from omnicli.report import ab
from omnicli.report.diff import error_counts, word_diff
from omnicli.report.page import Embed, EmbedSpec, plotly_js
from omnicli.report.sources import read_sources

runner = CliRunner()


@pytest.mark.parametrize(("ref", "hyp"), [
    ("A large size in stockings is hard to sell.", "a big size stockings is hard to sell now"),
    ("The birch canoe slid on the rough planks.", "The birch can use laid on the smooth planks."),
    ("It's cold-hearted, Mr. Smith!", "its cold hearted mister smith"),
    ("one two three", ""),
    ("one two three", "one two three"),
])
def test_the_diff_counts_what_the_wer_counted(ref, hyp):
    score = score_utterance(ref, hyp, "en")
    ops = word_diff(score.ref_norm, score.hyp_norm)
    assert error_counts(ops) == {
        "substitutions": score.substitutions,
        "deletions": score.deletions,
        "insertions": score.insertions,
    }
    assert [r for op, r, _ in ops if op != "i"] == score.ref_norm.split()
    assert [h for op, _, h in ops if op != "d"] == score.hyp_norm.split()


def test_the_diff_marks_a_substitution_in_place():
    assert word_diff("the rough planks", "the smooth planks") == [
        ["=", "the", "the"],
        ["s", "rough", "smooth"],
        ["=", "planks", "planks"],
    ]
    assert word_diff("", "anything") is None


def _run(profile: str, rounds: list[list[tuple[float, float]]], conc: int = 1) -> dict:
    """A bench run with --save-detailed lists: per round, (first audio s, audio s) per request, one second apart."""
    lists = {
        k: []
        for k in (
            "utts",
            "request_rounds",
            "start_times",
            "audio_ttfps",
            "e2els",
            "audio_durations",
            "audio_rtfs",
            "errors",
        )
    }
    for r, requests in enumerate(rounds):
        for i, (ttfp, dur) in enumerate(requests):
            for key, value in (
                ("utts", f"u{i}"),
                ("request_rounds", r),
                ("start_times", float(i)),
                ("audio_ttfps", ttfp),
                ("e2els", ttfp + 0.5),
                ("audio_durations", dur),
                ("audio_rtfs", (ttfp + 0.5) / dur),
                ("errors", ""),
            ):
                lists[key].append(value)
    return {
        "label": f"{profile}/c{conc}",
        "profile_label": profile,
        "arm": profile,
        "max_concurrency": conc,
        "request_rate": "inf",
        "round_durations": [float(len(req)) for req in rounds],
        "rounds": len(rounds),
        **lists,
    }


def test_compare_per_round_figures_and_verdicts():
    a = _run("a", [[(0.20, 2.0), (0.22, 2.0)], [(0.21, 2.0), (0.20, 2.0)], [(0.19, 2.0), (0.21, 2.0)]])
    b = _run("b", [[(0.10, 2.0), (0.11, 2.0)], [(0.10, 2.0), (0.12, 2.0)], [(0.11, 2.0), (0.10, 2.0)]])
    diffs = {d.metric: d for d in ab.compare(a, b)}
    ttfp = diffs["mean_audio_ttfp_ms"]
    # round means 210 / 205 / 200 ms against 105 / 110 / 105 ms: the medians, their ratio, the project's interval
    assert (ttfp.a_value, ttfp.b_value, ttfp.ratio) == pytest.approx((205.0, 105.0, 105.0 / 205.0))
    est = ratio_estimate([105.0, 110.0, 105.0], [210.0, 205.0, 200.0], confidence=ab.CONFIDENCE)
    assert (ttfp.low, ttfp.high) == pytest.approx((est.low, est.high))
    assert ttfp.verdict == "better" and ttfp.high < 1  # lower latency is better
    assert diffs["audio_throughput"].verdict == "within noise"  # 4 audio-s in 2 s every round, both
    assert diffs["audio_throughput"].a_value == pytest.approx(2.0)
    worse = {d.metric: d for d in ab.compare(b, a)}["mean_audio_ttfp_ms"]
    assert worse.verdict == "worse" and worse.low > 1
    one_round = ab.compare(_run("a", [[(0.2, 2.0)]]), _run("b", [[(0.1, 2.0)]]))
    assert one_round and all(d.low is None and "no interval" in d.verdict for d in one_round)
    assert ab.pairs([a, b, _run("a", [[(0.2, 2.0)]], conc=4)]) == [(a, b)]


def _bench_files(folder: Path) -> dict:
    run = _run("a", [[(0.2, 2.0)], [(0.2, 2.0)]]) | {
        "started_at": "2026-12-01T10:00:00+00:00",
        "completed": 2,
        "duration": 2.0,
        "audio_throughput": 2.0,
        "p50_audio_ttfp_ms": 200.0,
    }
    folder.mkdir(parents=True)
    (folder / "omni-bench-1.json").write_text(
        json.dumps({"runs": [run], "comparisons": [], "interrupted": False, "engine_error": None})
    )
    # the vLLM-shaped per-pass file of the same pass, with keys another version adds (vLLM's ttft lists)
    (folder / "omni-a-infqps.json").write_text(
        json.dumps(run | {"backend": "omni", "mean_ttft_ms": 50.0, "ttfts": [0.05, 0.05]})
    )
    (folder / "broken.json").write_text("{not json")
    (folder / "unrelated.json").write_text(json.dumps({"hello": 1}))
    return run


def test_bench_files_are_read_tolerantly_and_each_pass_once(tmp_path):
    run = _bench_files(tmp_path / "results")
    sources = read_sources([tmp_path / "results"])
    runs = [r for b in sources.bench for r in b.runs]
    assert [r["label"] for r in runs] == [run["label"]]
    assert any("broken.json" in note for note in sources.notes)
    assert ab.requests_of(runs[0])[0]["audio_ttfp"] == 0.2


def test_two_result_files_of_one_profile_are_an_ab(tmp_path):
    """The same profile benchmarked twice (before and after a change), one result file each."""
    folder = tmp_path / "ab"
    folder.mkdir()
    for n, ttfp in ((1, 0.2), (2, 0.1)):
        run = _run("default", [[(ttfp, 2.0)], [(ttfp * 1.1, 2.0)], [(ttfp * 0.9, 2.0)]]) | {
            "started_at": f"t{n}",
            "completed": 3,
            "duration": 3.0,
        }
        (folder / f"omni-bench-{n}.json").write_text(
            json.dumps({"runs": [run], "comparisons": [], "interrupted": False, "engine_error": None})
        )
    result = runner.invoke(app, ["report", str(folder), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    html = (tmp_path / "r.html").read_text()
    assert 'data-a="default (omni-bench-1)" data-b="default (omni-bench-2)"' in html
    assert "default (omni-bench-2) better" in html  # half the first-audio latency, three rounds each


def test_report_command_writes_a_self_contained_page(tmp_path):
    _bench_files(tmp_path / "results")
    (tmp_path / "results" / "omni-a-infqps.json").unlink()
    out = tmp_path / "page" / "r.html"
    result = runner.invoke(app, ["report", str(tmp_path / "results"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 bench runs" in result.output
    html = out.read_text()
    assert plotly_js() in html  # plotly.js inline, as the plotly package ships it
    own = html.replace(plotly_js(), "")
    assert "<script src" not in own and "<link rel=\"stylesheet\"" not in own and "http" not in own
    assert "a/c1" in own


def test_report_usage_errors(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["report", str(empty), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "nothing to report" in result.output
    result = runner.invoke(app, ["report", str(tmp_path / "nope"), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "no such file" in result.output
    _bench_files(tmp_path / "results")
    result = runner.invoke(app, ["report", str(tmp_path / "results"), "--embed-audio", "best:3"])
    assert result.exit_code == 2 and "worst:N" in result.output
    assert not (tmp_path / "r.html").exists()

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a))
    result = runner.invoke(app, ["report", str(tmp_path / "results")])
    assert result.exit_code == 2 and "pip install 'omnicli[report]'" in result.output


def test_embed_spec():
    assert Embed.parse("worst:5") == Embed(worst=5)
    assert Embed.parse(None) == Embed() and Embed.parse("all").all
    with pytest.raises(EmbedSpec):
        Embed.parse("worst")


def test_rows_join_synth_eval_and_retention_and_fall_into_groups(tmp_path):
    import soundfile as sf

    from omnicli.report.rows import collect_rows
    from omnicli.synth.results import SynthResult

    gen, kept = tmp_path / "gen", tmp_path / "kept"
    gen.mkdir()
    kept.mkdir()
    pcm = np.zeros(2400, dtype=np.float32)
    for name in ("a.wav", "b.wav"):
        sf.write(gen / name, pcm, 24000)
    for name in ("failed_speech_1.wav", "failed_speech_2.wav"):
        sf.write(kept / name, pcm, 16000)
    rows = [
        SynthResult(
            utt="a",
            status="ok",
            wav="a.wav",
            audio_seconds=0.1,
            flags=["near_silent"],
            retained=str(kept / "failed_speech_1.wav"),
        ),
        SynthResult(utt="b", status="ok", wav="b.wav", audio_seconds=0.1, finish_reason="length", flags=["hit_cap"]),
        SynthResult(utt="c", status="failed", error="boom"),
    ]
    (gen / "results.jsonl").write_text("".join(r.to_line() + "\n" for r in rows))
    (kept / "failed_speech_1.json").write_text(json.dumps({"utt": "a", "reasons": ["near_silent", "clipped"]}))
    (kept / "failed_speech_2.json").write_text(
        json.dumps(
            {
                "utt": "z",
                "reasons": ["asr_mismatch"],
                "text": "one two",
                "ref_norm": "one two",
                "hyp_norm": "one too",
                "transcript": "one too",
            }
        )
    )
    utterances = collect_rows(read_sources([gen, kept]))
    by_utt = {r.utt: r for r in utterances.rows}
    assert sorted(by_utt) == ["a", "b", "c", "z"]
    assert by_utt["a"].reasons == ["near_silent", "clipped"] and by_utt["a"].groups == ["silent"]
    assert by_utt["b"].groups == ["runaway"] and by_utt["c"].groups == ["failed"] and by_utt["c"].audio is None
    z = by_utt["z"]  # a retained output whose run was not given: its own row, with the retained audio
    assert z.groups == ["misrecognized"] and z.audio == kept / "failed_speech_2.wav"
    assert z.diff == [["=", "one", "one"], ["s", "two", "too"]]
