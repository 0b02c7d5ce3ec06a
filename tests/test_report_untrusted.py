"""`omni report` and `omni bench-export` on folders and files other people wrote (issue 31, items 2-8):
the page links or inlines only real audio inside the folders named, survives any text in its data, holds no
NaN, reads every JSONL on "\\n" only, notes a malformed file or row and shows the rest, never hangs on a
FIFO or /dev/zero, and prints labels literally. No engine: real folders, real wavs, the real command."""

from __future__ import annotations

import base64
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.evaluation.transcripts import read_transcripts
from tests.fakes import bench_sweep, report_plan

runner = CliRunner()
GOLDEN = Path(__file__).parent / "fixtures" / "golden"
ROOT = Path(__file__).resolve().parents[1]


# -- building folders -----------------------------------------------------------------------------


def wav(path: Path, seconds: float = 0.05, fill: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, np.full(int(24000 * seconds), fill, np.float32), 24000, subtype="PCM_16")
    return path


def jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # ensure_ascii=False: U+2028 and U+0085 raw, as the project's writers leave them
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def synth_folder(out: Path, rows: list[dict[str, Any]], manifest: Path | None = None) -> None:
    jsonl(out / "results.jsonl", [{"status": "ok", "audio_seconds": 0.05} | r for r in rows])
    summary = json.loads((GOLDEN / "synth" / "summary.json").read_text())
    summary["manifest"] = str(manifest) if manifest else "absent.lst"  # (a note says it is not found)
    (out / "summary.json").write_text(json.dumps(summary))


def eval_folder(folder: Path, rows: list[dict[str, Any]], gen_dir: Path) -> None:
    summary = json.loads((GOLDEN / "eval" / "wer_summary.json").read_text())
    summary.update(manifest=None, gen_dir=str(gen_dir))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wer_summary.json").write_text(json.dumps(summary))
    jsonl(folder / "wer_results.jsonl", [{"status": "ok", "ref": "one two", "hyp": "one two"} | r for r in rows])


def bench_pass(label: str = "a", **keys: Any) -> dict[str, Any]:
    return {"backend": "omni", "label": f"{label}/c1", "profile_label": label, "completed": 2, "failed": 0,
            "duration": 2.0, "max_concurrency": 1, "request_rate": "inf", "audio_throughput": 1.5,
            "started_at": f"t-{label}"} | keys


def page_data(html: str) -> tuple[str, dict[str, Any]]:
    """The raw text of the page's JSON element and its parse (NaN / Infinity refused, as JSON.parse does)."""
    start = html.index('<script type="application/json" id="report-data">') + len(
        '<script type="application/json" id="report-data">')
    raw = html[start:html.index("</script>", start)]

    def refuse(name: str) -> None:
        raise AssertionError(f"bare {name} in the page's JSON")

    return raw, json.loads(raw, parse_constant=refuse)


def rows_by_utt(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r[0]: dict(zip(data["columns"], r)) for r in data["rows"]}


def report(*args: str) -> Any:
    return runner.invoke(app, ["report", *args])


# -- item 2: audio only from the folders named ------------------------------------------------------


@pytest.fixture
def hostile_run(tmp_path: Path) -> dict[str, Path]:
    """A run folder whose rows name files outside it, a link to /proc/self/environ, a text file as a wav."""
    run, outside, data = tmp_path / "run", tmp_path / "outside", tmp_path / "data"
    secret = wav(outside / "secret.wav", fill=0.25)
    secret2 = wav(outside / "secret2.wav", fill=0.5)
    wav(run / "ok.wav")
    wav(data / "p.wav", fill=0.1)
    (run / "env.wav").symlink_to("/proc/self/environ")
    (run / "linked_out.wav").symlink_to(secret)
    (run / "text.wav").write_text("not audio at all")
    data.mkdir(exist_ok=True)
    manifest = data / "meta.lst"
    manifest.write_text(
        "ok|prompt|p.wav|the text of ok\n"
        "dotdot|prompt|../outside/secret2.wav|the text of dotdot\n"
    )
    synth_folder(run, [
        {"utt": "ok", "wav": "ok.wav"},
        {"utt": "absolute", "wav": str(secret)},
        {"utt": "dotdot", "wav": "../outside/secret.wav"},
        {"utt": "environ", "wav": "env.wav"},
        {"utt": "linked", "wav": "linked_out.wav"},
        {"utt": "textfile", "wav": "text.wav"},
        {"utt": "kept", "status": "failed", "error": "boom", "retained": str(secret2)},
    ], manifest=manifest)
    eval_folder(run / "eval_wer", [{"utt": "scored", "reference": str(secret)}], gen_dir=run)
    wav(run / "scored.wav")
    kept = run / "kept"
    wav(kept / "failed_speech_1.wav")
    (kept / "failed_speech_1.json").write_text(json.dumps({"utt": "side", "reference_wav": str(secret)}))
    return {"run": run, "secret": secret, "secret2": secret2, "page": tmp_path / "page" / "r.html"}


LEFT_OUT = {
    ("absolute", "generated audio"): "outside the folders named",
    ("dotdot", "generated audio"): "outside the folders named",
    ("dotdot", "reference prompt"): "outside the folders named",  # the manifest's prompt path leaves its folder
    ("environ", "generated audio"): "a system file (/proc, /sys, /dev): never read",
    ("linked", "generated audio"): "outside the folders named",
    ("textfile", "generated audio"): "not audio",
    ("kept", "generated audio"): "outside the folders named",  # `retained` names a file outside
    ("scored", "reference prompt"): "outside the folders named",  # an eval row's `reference`
    ("side", "reference prompt"): "outside the folders named",  # a sidecar's `reference_wav`
}


def _check_hostile_page(html: str, paths: dict[str, Path], embedded: bool) -> None:
    _, data = page_data(html)
    rows = rows_by_utt(data)
    for secret in (paths["secret"], paths["secret2"]):
        assert base64.b64encode(secret.read_bytes()).decode() not in html
        # no link to it either (the list of what was left out names the path as text only)
        assert os.path.relpath(secret, paths["page"].parent) not in json.dumps(data["rows"])
    for (utt, kind), why in LEFT_OUT.items():
        assert rows[utt]["audio" if kind == "generated audio" else "ref_audio"] is None, (utt, kind)
        assert any(f": {utt}: {kind} " in line and why in line for line in _left_out_lines(html)), (utt, kind)
    for utt, key in (("ok", "audio"), ("ok", "ref_audio"), ("scored", "audio"), ("side", "audio")):
        value = rows[utt][key]
        assert value is not None and value.startswith("data:audio/wav;base64,") == embedded, (utt, key, value)


def _left_out_lines(html: str) -> list[str]:
    import html as html_lib

    block = html[html.index('id="audio-left-out"'):]
    block = block[:block.index("</div>")]
    return [html_lib.unescape(item.split("</li>")[0]) for item in block.split("<li>")[1:]]


def test_embed_audio_inlines_only_real_audio_inside_the_folders_named(hostile_run):
    """Run as a separate process: /proc/self/environ holds the environment the process started with."""
    marker = "OMNI_SECRET_MARKER_c0ffee"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMNI_TEST_TOKEN": marker}
    page = hostile_run["page"]
    done = subprocess.run(
        [sys.executable, "-m", "omnicli", "report", str(hostile_run["run"]), "--out", str(page),
         "--embed-audio", "all"],
        env=env, capture_output=True, text=True, timeout=300, cwd=hostile_run["run"].parent,
    )
    assert done.returncode == 0, done.stderr
    html = page.read_text(encoding="utf-8")
    assert marker not in html and base64.b64encode(marker.encode()).decode()[:20] not in html
    _check_hostile_page(html, hostile_run, embedded=True)
    assert "3 clips embedded" in done.stdout  # the rows ok, scored and side: the only ones with audio allowed


def test_without_embed_audio_the_same_files_are_not_linked(hostile_run):
    result = report(str(hostile_run["run"]), "--out", str(hostile_run["page"]))
    assert result.exit_code == 0, result.output
    html = hostile_run["page"].read_text(encoding="utf-8")
    _check_hostile_page(html, hostile_run, embedded=False)
    rows = rows_by_utt(page_data(html)[1])
    assert rows["ok"]["audio"] == "../run/ok.wav" and rows["ok"]["ref_audio"] == "../data/p.wav"


def test_the_gate_refuses_a_clip_over_the_cap_and_a_fifo(tmp_path):
    from omnicli.report.audio_gate import Admitted, AudioGate

    clip = wav(tmp_path / "a.wav", seconds=0.5)
    os.mkfifo(tmp_path / "f.wav")
    (tmp_path / "dev.wav").symlink_to("/dev/zero")
    gate = AudioGate.for_folders([tmp_path], max_bytes=clip.stat().st_size - 1)
    assert "over the" in str(gate.admit(clip))
    assert gate.admit(tmp_path / "f.wav") == "not a regular file"
    assert "system file" in str(gate.admit(tmp_path / "dev.wav"))
    roomy = AudioGate.for_folders([tmp_path])
    admitted = roomy.admit(clip)
    assert isinstance(admitted, Admitted) and admitted.mime == "audio/wav"
    assert roomy.read(admitted) == clip.read_bytes()
    assert AudioGate.for_folders([tmp_path / "elsewhere"]).admit(clip) == (
        "outside the folders named on the command line and the manifest's folder")
    flac, aiff = tmp_path / "a.flac", tmp_path / "a.aiff"
    sf.write(flac, np.zeros(2400, np.float32), 24000)
    sf.write(aiff, np.zeros(2400, np.float32), 24000)
    assert roomy.admit(flac) == Admitted(flac, "audio/flac")
    assert roomy.admit(aiff) == "AIFF audio, not a format the page plays"
    (tmp_path / "fake.wav").write_bytes(b"RIFX" + bytes(40))
    assert roomy.admit(tmp_path / "fake.wav") == "not audio (no header soundfile can read)"


# -- item 3: the page survives its data -----------------------------------------------------------


def test_comment_and_script_openers_in_two_texts_do_not_break_the_json_element(tmp_path):
    kept = tmp_path / "kept"
    texts = {"one": "a <!-- b & c", "two": "d <script> e </script> \u2028 f \u2029 > g"}
    for i, (utt, text) in enumerate(texts.items()):
        wav(kept / f"failed_speech_{i}.wav")
        (kept / f"failed_speech_{i}.json").write_text(json.dumps({"utt": utt, "text": text, "reasons": ["x"]}))
    out = tmp_path / "r.html"
    assert report(str(kept), "--out", str(out)).exit_code == 0
    raw, data = page_data(out.read_text(encoding="utf-8"))
    for char in "<>&\u2028\u2029":
        assert char not in raw
    assert {utt: row["text"] for utt, row in rows_by_utt(data).items()} == texts


# -- item 4: no NaN in the page -------------------------------------------------------------------


def test_nan_and_infinity_in_eval_rows_and_sidecars_are_empty_with_a_note(tmp_path):
    gen = tmp_path / "gen"
    wav(gen / "a.wav")
    wav(gen / "b.wav")
    eval_folder(gen / "eval_wer", [{"utt": "a", "wer": float("nan"), "audio_s": float("inf")},
                                   {"utt": "b", "wer": 0.5}], gen_dir=gen)
    wav(gen / "kept" / "failed_speech_1.wav")
    (gen / "kept" / "failed_speech_1.json").write_text(
        json.dumps({"utt": "z", "duration_s": float("-inf"), "wer": float("nan"), "timings": {"rtf": float("nan")}}))
    out = tmp_path / "r.html"
    result = report(str(gen), "--out", str(out))
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    _, data = page_data(html)  # refuses a bare NaN / Infinity
    rows = rows_by_utt(data)
    assert rows["a"]["wer"] is None and rows["b"]["wer"] == 0.5 and rows["z"]["duration_s"] is None
    assert "wer_results.jsonl:1: 2 number(s) NaN or Infinity, shown empty" in html
    assert "failed_speech_1.json: 3 number(s) NaN or Infinity, shown empty" in html


def test_nan_in_a_bench_run_is_empty_in_the_page(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps(bench_pass(audio_throughput=float("nan"))))
    out = tmp_path / "r.html"
    assert report(str(folder), "--out", str(out)).exit_code == 0
    html = out.read_text(encoding="utf-8")
    page_data(html)
    assert "run.json: 1 number(s) NaN or Infinity, shown empty" in html


# -- item 5: JSONL split on "\n" only -------------------------------------------------------------


LINE_BREAKS = "\u2028 \u2029 \u0085 \x1c \x1d \x1e \x0b \x0c"


def test_texts_with_unicode_line_breaks_keep_their_rows(tmp_path):
    gen = tmp_path / "gen"
    for utt in ("a", "b"):
        wav(gen / f"{utt}.wav")
    eval_folder(gen / "eval_wer", [{"utt": "a", "ref": f"one{LINE_BREAKS}two", "hyp": "one\u2028two", "wer": 0.0},
                                   {"utt": "b"}], gen_dir=gen)
    synth_folder(gen, [{"utt": "a", "wav": "a.wav", "error": "x\u2029y"}, {"utt": "b", "wav": "b.wav"}])
    out = tmp_path / "r.html"
    result = report(str(gen), "--out", str(out))
    assert result.exit_code == 0, result.output
    rows = rows_by_utt(page_data(out.read_text(encoding="utf-8"))[1])
    assert sorted(rows) == ["a", "b"] and rows["a"]["hyp"] == "one\u2028two" and rows["a"]["error"] == "x\u2029y"
    assert "results.jsonl:" not in out.read_text(encoding="utf-8")  # no row of either file noted


def test_transcripts_with_unicode_line_breaks_are_read_whole(tmp_path):
    path = tmp_path / "t.jsonl"
    jsonl(path, [{"utt": "a", "hyp": f"one{LINE_BREAKS}two"}, {"utt": "b", "hyp": "three"}])
    assert read_transcripts(path) == {"a": f"one{LINE_BREAKS}two", "b": "three"}
    tsv = tmp_path / "t.tsv"
    tsv.write_text("a\tone\u0085two\u2028three\nb\tfour\n", encoding="utf-8")
    assert read_transcripts(tsv) == {"a": "one\u0085two\u2028three", "b": "four"}


# -- item 6: one malformed file or row is a note, the rest is shown --------------------------------


def _deep(folder: Path) -> str:
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return "deep.json: JSON nested too deeply"


def _deep_row(folder: Path) -> str:
    (folder / "deep.jsonl").write_text(json.dumps(bench_pass("x")) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    return "deep.jsonl:2: JSON nested too deeply"


def _sidecar(meta: dict[str, Any]):
    def make(folder: Path) -> str:
        wav(folder / "failed_speech_bad.wav")
        (folder / "failed_speech_bad.json").write_text(json.dumps({"utt": "bad"} | meta))
        return "failed_speech_bad.json: not a retention sidecar ("
    return make


def _bench(**keys: Any):
    def make(folder: Path) -> str:
        (folder / "bad.json").write_text(json.dumps(bench_pass("bad", **keys)))
        return f"bad.json: not a bench run ({next(iter(keys))}"
    return make


def _eval_row(folder: Path) -> str:
    wav(folder / "e.wav")
    eval_folder(folder / "eval_wer", [{"utt": "e", "ref_norm": 5, "hyp_norm": "x"}, {"utt": "good_eval"}],
                gen_dir=folder)
    return "wer_results.jsonl:1: not an eval-wer row (ref_norm"


def _bytes_name(kind: str):
    def make(folder: Path) -> str:
        where = os.fsencode(folder) + (b"/bad\xff" if kind == "folder" else b"")
        os.makedirs(where, exist_ok=True)
        name = b"failed_speech_\xfe" if kind == "wav" else b"failed_speech_1"
        os.rename(wav(folder / "made.wav"), where + b"/" + name + b".wav")  # (soundfile cannot write such a name)
        Path(os.fsdecode(where + b"/" + name + b".json")).write_text(json.dumps({"utt": f"odd-{kind}"}))
        return ""
    return make


MALFORMED = {
    "100,000-deep JSON": _deep,
    "100,000-deep JSONL row": _deep_row,
    "sidecar reasons: 5": _sidecar({"reasons": 5}),
    "sidecar wer: {}": _sidecar({"wer": {}}),
    "bench max_concurrency: [1, 2]": _bench(max_concurrency=[1, 2]),
    "bench request_rate: zz": _bench(request_rate="zz"),
    "bench audio_throughput: {}": _bench(audio_throughput={}),
    "bench start_times: [x]": _bench(start_times=["x"], round_durations=[1.0]),
    "eval ref_norm: 5": _eval_row,
    "folder name not UTF-8": _bytes_name("folder"),
    "wav name not UTF-8": _bytes_name("wav"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_file_or_row_is_a_note_and_the_rest_is_shown(tmp_path, case):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(bench_pass("good")))
    wav(folder / "kept" / "failed_speech_good.wav")
    (folder / "kept" / "failed_speech_good.json").write_text(json.dumps({"utt": "good", "reasons": ["clipped"]}))
    note = MALFORMED[case](folder)
    out = tmp_path / "r.html"
    result = report(str(folder), "--out", str(out))
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")  # valid UTF-8 throughout
    _, data = page_data(html)
    rows = rows_by_utt(data)
    assert "good" in rows and rows["good"]["audio"]
    assert "good/c1" in html  # the good bench run is in the runs table
    if note:
        assert "Not read:" in html and note in html.replace("&#39;", "'").replace("&#34;", '"'), note
    if case.startswith(("folder", "wav")):
        odd = next(r for utt, r in rows.items() if utt.startswith("odd-"))
        assert odd["audio"] and ("%FF" in odd["audio"] or "%FE" in odd["audio"])  # linked by its real bytes
        assert "\ufffd" in odd["source"] + odd["audio"] + html  # shown with U+FFFD


# -- item 7: FIFOs and devices never hang -----------------------------------------------------------


def _limited() -> None:  # the old code read /dev/zero until memory ran out: keep that bounded here
    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))


def _omni(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "omnicli", *args], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120, preexec_fn=_limited)


def test_report_skips_a_fifo_and_a_link_to_dev_zero(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(bench_pass("good")))
    os.mkfifo(folder / "x.json")
    (folder / "z.json").symlink_to("/dev/zero")
    os.mkfifo(folder / "results.jsonl")  # a synth results file too
    done = _omni("report", str(folder), "--out", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert html.count("is not a regular file (a FIFO, socket or device); refused") == 3 and "good/c1" in html


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_bench_export_refuses_a_fifo_and_a_link_to_dev_zero(tmp_path, kind):
    path = tmp_path / "x.json"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    done = _omni("bench-export", str(path))
    assert done.returncode == 2 and "not a regular file" in done.stderr


# -- item 8: labels shown literally, --out checked --------------------------------------------------


def test_a_bench_label_with_markup_is_text_in_the_legend(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    evil = '<a href="https://example.com/x">click</a>'
    (folder / "a.json").write_text(json.dumps(bench_pass(evil, started_at="t1")))
    (folder / "b.json").write_text(json.dumps(bench_pass("plain", started_at="t2")))
    out = tmp_path / "r.html"
    assert report(str(folder), "--out", str(out)).exit_code == 0
    _, data = page_data(out.read_text(encoding="utf-8"))
    names = [t.get("name") for t in data["figures"]["sweep"]["data"] if t.get("showlegend") is not False]
    assert "&lt;a href=\"https://example.com/x\"&gt;click&lt;/a&gt;" in names
    assert not any("<a" in json.dumps(fig) for fig in data["figures"].values())


def test_out_must_be_an_html_file_and_not_an_input(tmp_path):
    gen = tmp_path / "gen"
    wav(gen / "a.wav")
    synth_folder(gen, [{"utt": "a", "wav": "a.wav"}])
    before = (gen / "results.jsonl").read_bytes()
    result = report(str(gen), "--out", str(gen / "results.jsonl"))
    assert result.exit_code == 2 and "ending in .html" in result.output
    assert (gen / "results.jsonl").read_bytes() == before
    bench = tmp_path / "bench.html"  # a bench result file with an .html name, given as an input
    bench.write_text(json.dumps(bench_pass()))
    result = report(str(bench), "--out", str(bench))
    assert result.exit_code == 2 and "one of the inputs" in result.output
    result = report(str(gen), "--out", str(gen))
    assert result.exit_code == 2
    assert runner.invoke(app, ["synth", "x.lst", "--out", str(gen), "--report", str(tmp_path / "r.txt")]).exit_code == 2


EVIL = "\x1b[2J\x1b]8;;https://example.com\x07[bold red]evil[/bold red]\x9b31m\x07"


def test_bench_export_prints_labels_without_escapes_or_markup(tmp_path):
    from omnicli.benchmark.outputs import report_passes
    from omnicli.profile import load_profile

    plan = report_plan(tmp_path)
    report_passes(bench_sweep(load_profile()), plan)
    doc = json.loads(plan.path.read_text())
    for run in doc["runs"]:
        run["profile_label"] = EVIL + run["profile_label"]
        run["model"] = EVIL
        for failure in run["failures"]:
            failure["error"] = EVIL
    plan.path.write_text(json.dumps(doc))
    for fmt in ("table", "text"):
        result = runner.invoke(app, ["bench-export", str(plan.path), "--format", fmt])
        assert result.exit_code == 0, result.output
        assert not any(c in result.output for c in "\x1b\x07\x9b"), fmt
        assert "[bold red]evil[/bold red]" in result.output, fmt  # shown as typed, not as style


def test_an_utt_with_markup_is_text_in_the_hover_and_still_finds_its_row():
    from omnicli.report.figures import duration_vs_text
    from omnicli.report.rows import UttRow

    fig = duration_vs_text([UttRow(utt="<b>u</b>&", source="s", text="abc", duration_s=1.0),
                            UttRow(utt="plain", source="s", text="abcd", duration_s=2.0)])
    trace = fig["data"][0]
    assert trace["customdata"] == ["<b>u</b>&", "plain"]  # what the page's click looks the row up by
    assert trace["text"] == ["&lt;b&gt;u&lt;/b&gt;&amp;", "plain"] and trace["hovertemplate"].startswith("%{text}")


def test_a_transcripts_fifo_or_device_is_refused_for_what_it_is(tmp_path):
    from omnicli.evaluation.transcripts import TranscriptsError

    os.mkfifo(tmp_path / "t.jsonl")
    (tmp_path / "z.jsonl").symlink_to("/dev/zero")
    for name in ("t.jsonl", "z.jsonl"):  # (was: "transcripts file not found")
        with pytest.raises(TranscriptsError, match="not a regular file"):
            read_transcripts(tmp_path / name)
