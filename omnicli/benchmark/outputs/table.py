"""The Rich tables of `omni bench` results (the console's default output): one column per pass, A/B
tables with the ratios b/a, the --interleave and --ray tables. Presentation only, over `BenchRun`s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.table import Table

from omnicli.benchmark.metrics import DEFAULT_PERCENTILES, DISTRIBUTIONS, percentile_key
from omnicli.benchmark.report import group_by_shape, ratio, round_ratios
from omnicli.benchmark.result_models import BenchDocument, BenchRun
from omnicli.benchmark.stage_metrics import STAGES
from omnicli.runtime.console import console, fmt_number
from omnicli.runtime.safe_text import rich_literal as lit

if TYPE_CHECKING:
    from omnicli.benchmark.session import PassResult

_DIST_NAMES = {
    "audio_ttfp": "TTFP (ms)",
    "e2el": "E2EL (ms)",
    "audio_rtf": "RTF",
    "audio_duration": "audio duration (s)",
    "audio_underrun": "underrun (s)",
    "ttft": "talker TTFT (ms)",
    "tpot": "talker TPOT (ms)",
    "itl": "talker ITL (ms)",
}


def table_rows(run: BenchRun, percentiles: Sequence[float],
               stages: bool | None = None) -> list[tuple[str, str | None, str]]:
    """(label, result key or None, formatted value), in the order vLLM's summary prints them.

    The key is set for rows whose A/B ratio means something. `stages`: whether the per-stage rows are
    shown (default: when the run has stage figures; a table of several runs shows them for all or none).
    """
    rows: list[tuple[str, str | None, str]] = [
        ("Completed / failed", None, f"{run.completed} / {run.failed}"),
        ("Non-empty audio", None, fmt_number(run.num_nonempty_audio)),
        ("Duration (s)", "duration", fmt_number(run.duration)),
        ("Request throughput (req/s)", "request_throughput", fmt_number(run.request_throughput, 3)),
        ("Audio throughput (audio s/s)", "audio_throughput", fmt_number(run.audio_throughput, 3)),
        ("Total audio (s)", "total_audio_duration_s", fmt_number(run.total_audio_duration_s)),
    ]
    for stem, suffix, _ in DISTRIBUTIONS:
        digits = 1 if suffix == "_ms" else 3
        # p50 is the median row already
        pcts = [percentile_key(p) for p in percentiles if p != 50]
        stats = ["mean"] if stem == "audio_duration" else ["mean", "median"] + pcts
        for stat in stats:
            label = {"mean": "Mean", "median": "Median"}.get(stat, stat.upper())
            key = f"{stat}_{stem}{suffix}"
            rows.append((f"{label} {_DIST_NAMES[stem]}", key, fmt_number(run.figure(key), digits)))
    if run.audio_continuity_ok_rate is not None:  # (a file written before these figures has none)
        threshold_ms = (run.audio_continuity_threshold_s or 0.0) * 1000
        rows += [
            (f"Continuity OK (underrun <= {threshold_ms:g} ms)", "audio_continuity_ok_rate",
             fmt_number(run.audio_continuity_ok_rate, 3)),
            ("Continuity C50 / C100 / C200", None, " / ".join(
                fmt_number(r, 3) for r in (run.audio_continuity_c50_rate, run.audio_continuity_c100_rate,
                                           run.audio_continuity_c200_rate))),
            ("P95 inter-chunk gap (ms)", "p95_inter_chunk_gap_ms", fmt_number(run.p95_inter_chunk_gap_ms, 1)),
        ]
    rows += [
        ("Reference hot / cold", None, f"{run.num_ref_hot} / {run.num_ref_cold}"),
        ("Talker tokens/s", "talker_tokens_per_s", fmt_number(run.talker_tokens_per_s, 1)),
        ("Codec steps", None, fmt_number(run.codec_steps)),
        ("Mean codec batch size", "mean_codec_batch_size", fmt_number(run.mean_codec_batch_size)),
        ("Coalescing waits (n / ms)", None, f"{run.coalescing_waits} / {fmt_number(run.coalescing_wait_ms, 1)}"),
        ("Ring headroom", None, fmt_number(run.codec_ring_headroom)),
    ]
    return rows + (stage_rows(run) if (has_stage_figures(run) if stages is None else stages) else [])


def has_stage_figures(run: BenchRun) -> bool:
    return any(run.figure(f"stage_{stage}_{f}") is not None for stage in STAGES for f in ("busy_s", "cpu_s"))


def stage_rows(run: BenchRun) -> list[tuple[str, str | None, str]]:
    """The pass's per-stage figures (engines that report stages: vLLM-Omni): in flight (wall, waiting
    included) and CPU seconds (compute) side by side, per stage; '-' where the run has none."""
    rows: list[tuple[str, str | None, str]] = []
    for stage in STAGES:
        busy, cpu = run.figure(f"stage_{stage}_busy_s"), run.figure(f"stage_{stage}_cpu_s")
        name = stage.capitalize()
        rows += [
            (f"{name} stage in flight (s)", f"stage_{stage}_busy_s", fmt_number(busy, 2)),
            (f"{name} stage CPU (s)", f"stage_{stage}_cpu_s", fmt_number(cpu, 2)),
            (f"{name} stage CPU per audio s", f"stage_{stage}_cpu_s_per_audio_s",
             fmt_number(run.figure(f"stage_{stage}_cpu_s_per_audio_s"), 3)),
        ]
    return rows


def column_title(run: BenchRun) -> str:
    shape = []
    if run.max_concurrency is not None:
        shape.append(f"c={run.max_concurrency}")
    if run.request_rate != "inf":
        shape.append(f"rate={run.request_rate:g}/s")
    return " ".join(shape) or "all at once"


def results_table(runs: Sequence[BenchRun], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> Table:
    """One column per pass (a sweep reads left to right)."""
    profiles = sorted({r.profile_label for r in runs})
    first = runs[0]
    # labels, model and device names are read back from files anyone may have written (bench-export): literal
    title = f"omni bench - {lit(first.model)} on {lit(first.device)}"
    if len(profiles) == 1:
        title += f" - profile {lit(first.profile_label)}"
    if first.num_engines:
        title += f" - total of {first.num_engines} engines on Ray"
    table = Table(title=title)
    table.add_column("Metric")
    for run in runs:
        heading = column_title(run) if len(profiles) == 1 else f"{lit(run.profile_label)} {column_title(run)}"
        table.add_column(heading, justify="right")
    stages = any(has_stage_figures(r) for r in runs)
    all_rows = [table_rows(r, percentiles, stages) for r in runs]
    for i, (label, _, _) in enumerate(all_rows[0]):
        table.add_row(label, *(rows[i][2] for rows in all_rows))
    return table


def comparison_tables(runs: Sequence[BenchRun], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[Table]:
    """A/B: per load shape, profiles side by side and each ratio to the first (b/a)."""
    tables = []
    for group in group_by_shape(runs):
        base = group[0]
        table = Table(title=f"A/B - {column_title(base)}")
        table.add_column("Metric")
        for run in group:
            table.add_column(lit(run.profile_label), justify="right")
        for run in group[1:]:
            table.add_column(f"{lit(run.profile_label)}/{lit(base.profile_label)}", justify="right")
        stages = any(has_stage_figures(r) for r in group)
        rows = [table_rows(r, percentiles, stages) for r in group]
        for i, (label, key, _) in enumerate(rows[0]):
            ratios = []
            for run in group[1:]:
                r = ratio(run.figure(key), base.figure(key)) if key else None
                ratios.append(f"x{r:.2f}" if r is not None else "")
            table.add_row(label, *(rr[i][2] for rr in rows), *ratios)
        tables.append(table)
    return tables


_ROUND_NAMES = {
    "audio_throughput": "Audio throughput (audio s/s)",
    "request_throughput": "Request throughput (req/s)",
    "mean_audio_ttfp_ms": "Mean TTFP (ms)",
    "p99_audio_ttfp_ms": "P99 TTFP (ms)",
    "mean_e2el_ms": "Mean E2EL (ms)",
    "mean_audio_rtf": "Mean RTF",
}


def _median_cell(entry: dict, side: str) -> str:
    median = entry[f"{side}_median"]
    if median is None:
        return "-"
    digits = 1 if entry["metric"].endswith("_ms") else 3
    return (f"{fmt_number(median, digits)} ({fmt_number(entry[f'{side}_min'], digits)}-"
            f"{fmt_number(entry[f'{side}_max'], digits)})")


def interleaved_rows(base: BenchRun, other: BenchRun) -> list[tuple[str, str, str, str]]:
    """With --interleave: (metric, a's median (min-max), b's, b/a with its interval or why none), per metric."""
    return [(_ROUND_NAMES[e["metric"]], _median_cell(e, "a"), _median_cell(e, "b"), e["summary"])
            for e in round_ratios(base.per_round or [], other.per_round or [])]


def _load_note(runs: Sequence[BenchRun]) -> str:
    loads = [f.load_avg for run in runs for f in run.per_round or [] if f.load_avg is not None]
    return f"load average {min(loads):.1f}-{max(loads):.1f}" if loads else "load average unknown"


def interleaved_tables(runs: Sequence[BenchRun]) -> list[Table]:
    """With --interleave: per load shape and profile pair, medians over rounds, spread, and b/a with its interval."""
    tables = []
    for group in group_by_shape(runs):
        base = group[0]
        for other in group[1:]:
            if not (base.interleaved and other.interleaved):
                continue
            a, b = lit(base.profile_label), lit(other.profile_label)
            table = Table(title=f"A/B interleaved - {column_title(base)} - median (min-max) of {base.rounds} / "
                                f"{other.rounds} rounds, {_load_note([base, other])}")
            table.add_column("Metric")
            table.add_column(a, justify="right")
            table.add_column(b, justify="right")
            table.add_column(f"{b}/{a}", justify="right")
            for row in interleaved_rows(base, other):
                table.add_row(*row)
            tables.append(table)
    return tables


def engine_views(run: BenchRun) -> list[BenchRun | None]:
    """With --ray: each engine's entry seen as a run (None for an engine that failed the pass)."""
    views: list[BenchRun | None] = []
    for entry in run.per_engine or []:
        if entry.engine_error:
            views.append(None)
            continue
        # the engine's own figures over the run's (its identity and a missing machine aside)
        own: dict[str, Any] = {k: v for k, v in entry.model_dump(exclude_unset=True).items()
                               if k not in ("engine", "node", "engine_error") and not (k == "machine" and v is None)}
        own.update(profile_label=f"{run.profile_label} engine {entry.engine}", per_engine=None)
        views.append(BenchRun.model_validate({**run.to_dict(), **own}))
    return views


def engine_tables(runs: Sequence[BenchRun], percentiles: Sequence[float] = DEFAULT_PERCENTILES) -> list[Table]:
    """With --ray: per pass, each engine's figures beside the total (throughputs summed, samples pooled)."""
    tables = []
    for run in runs:
        entries = run.per_engine or []
        if not entries:
            continue
        table = Table(title=f"per engine - {lit(run.profile_label)} {column_title(run)}")
        table.add_column("Metric")
        columns = []
        views = engine_views(run)
        stages = any(has_stage_figures(v) for v in (run, *views) if v is not None)
        for entry, view in zip(entries, views):
            table.add_column(f"engine {entry.engine}", justify="right")
            columns.append(table_rows(view, percentiles, stages) if view is not None else None)
        table.add_column("total", justify="right")
        for i, (label, _, value) in enumerate(table_rows(run, percentiles, stages)):
            table.add_row(label, *(rows[i][2] if rows is not None else "failed" for rows in columns), value)
        tables.append(table)
    return tables


def print_failures(runs: Sequence[BenchRun]) -> None:
    """The failed requests (the first 20) and the count of empty audio, after the tables or text lines."""
    failed = [f for run in runs for f in run.failures]
    if failed:
        console.print(f"[red]{len(failed)} failed request(s):[/red]")
        for f in failed[:20]:
            console.print(f"  {lit(f.utt)} ({lit(f.request_id)}): {lit(f.error)}")
        if len(failed) > 20:
            console.print(f"  ... and {len(failed) - 20} more (see the result file)")
    empty = sum(r.num_empty_audio for r in runs)
    if empty:
        console.print(f"[red]{empty} request(s) produced no audio[/red]: failed (exit 1; the vLLM-shaped file counts "
                      "them failed, as vLLM-Omni's endpoint does), excluded from latency statistics")


class TableOutput:
    """The console's tables: the passes, each engine's (--ray), and with several profiles the A/B ones."""

    def finalize(self, report: BenchDocument, passes: Sequence[PassResult] = ()) -> None:
        runs, percentiles = report.runs, report.percentiles
        if runs:
            console.print(results_table(runs, percentiles))
            for table in engine_tables(runs, percentiles):
                console.print(table)
            if len({r.profile_label for r in runs}) > 1:
                for table in comparison_tables(runs, percentiles):
                    console.print(table)
                for table in interleaved_tables(runs):
                    console.print(table)
        print_failures(runs)
