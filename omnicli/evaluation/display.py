"""What the eval commands print: the figures tables and the lists of utterances not scored.

What is shown, in which order and with which note is data here (`Figures`,
`Line`s), beside the summary keys it reads; `report_tables` renders it all
as the Rich tables `omni eval` and `omni eval-wer` print.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.table import Table

Line = tuple[str, str, str]  # metric, value, note (a listing: utt, status, detail)


@dataclass
class Section:
    lines: list[Line] = field(default_factory=list)
    dim: bool = False  # extras, not published figures: shown dimmed


@dataclass
class Figures:
    title: str
    sections: list[Section]


def _cell(value: Any, grouped: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:,.3f}" if grouped else f"{value:.3f}"
    return str(value)


def wer_figures(summary: Mapping[str, Any]) -> Figures:
    """The WER table: the published figures, the extras, then the counts."""
    asr = summary.get("asr") or {}
    source = asr.get("requested") or f"{asr.get('backend')}:{asr.get('model')}"
    notes = summary.get("key_notes", {})

    def lines(keys: tuple[str, ...]) -> list[Line]:
        return [(key, _cell(summary[key], grouped=True), notes.get(key, "")) for key in keys]

    counts = [
        ("num_scored", str(summary["num_scored"]), f"of {summary['num_utts']} utterances"),
        ("num_missing", str(summary["num_missing"]), "no wav (or no cached transcript)"),
        ("num_failed", str(summary["num_failed"]), "empty/unreadable audio, ASR error, empty reference"),
        ("num_empty_transcripts", str(summary["num_empty_transcripts"]), "scored as WER 100%, as seed-tts-eval does"),
        ("num_above_threshold", str(summary["num_above_threshold"]), f"WER > {summary['wer_threshold']}"),
    ]
    if summary["num_over_30s"]:
        cut = f"{summary['num_truncated']} cut to 30 s before ASR"
        counts.append(("num_over_30s", str(summary["num_over_30s"]), cut))
    if summary["keep_failed"]:
        counts.append(("num_retained", str(summary["num_retained"]), summary["keep_failed"]))
    return Figures(f"WER ({summary['language']}, {source})", [
        Section(lines(("seed_wer_mean", "wer_mean_below_50", "sub", "del", "ins"))),
        Section(lines(("corpus_wer", "median_wer", "share_wer_above_50", "wer_mean_failed_as_100")), dim=True),
        Section(counts),
    ])


def wer_not_scored(summary: Mapping[str, Any]) -> list[Line]:
    return [(utt, "missing", "no wav / no cached transcript") for utt in summary["missing"]] + [
        (f["utt"], f["status"], f["error"] or "") for f in summary["failed"]
    ]


def audio_figures(summary: Mapping[str, Any]) -> Figures | None:
    """The SIM / MOS table, None when neither ran."""
    metrics = summary.get("metrics", [])
    if "sim" not in metrics and "mos" not in metrics:
        return None
    s = summary
    sections = []
    if "sim" in metrics:
        sections.append(Section([
            ("sim_mean", _cell(s.get("sim_mean")), f"backend {s.get('sim_backend')}: {s.get('sim_note', '')}"),
            ("sim_median", _cell(s.get("sim_median")), ""),
            ("sim_share_below_threshold", _cell(s.get("sim_share_below_threshold")),
             f"percent with SIM < {s.get('sim_threshold')}"),
            ("num_sim_scored", str(s.get("num_sim_scored")),
             f"{s.get('num_sim_failed')} failed; {_cell(s.get('sim_cpu_s_per_utt'))} CPU s/utt"),
        ]))
    if "mos" in metrics:
        notes = s.get("mos_notes", {})
        lines = []
        for key in ("dnsmos_ovrl_mean", "dnsmos_sig_mean", "dnsmos_bak_mean", "dnsmos_p808_mean", "utmos_mean"):
            if key in s:
                backend = "utmos" if key.startswith("utmos") else "dnsmos"
                note = notes.get(backend, "") if key in ("dnsmos_ovrl_mean", "utmos_mean") else ""
                lines.append((key, _cell(s[key]), note))
        lines += [
            ("mos_share_below_threshold", _cell(s.get("mos_share_below_threshold")),
             f"percent with OVRL/UTMOS < {s.get('mos_threshold')}"),
            ("num_mos_scored", str(s.get("num_mos_scored")),
             f"{s.get('num_mos_failed')} failed; {_cell(s.get('mos_cpu_s_per_utt'))} CPU s/utt"),
        ]
        sections.append(Section(lines))
    tail = [("num_low_sim / num_low_mos", f"{s.get('num_low_sim')} / {s.get('num_low_mos')}",
             "retention reasons low_sim / low_mos")]
    if "wer" not in metrics:
        tail += [("num_missing", str(s.get("num_missing")), f"of {s.get('num_utts')} utterances: no wav"),
                 ("num_failed", str(s.get("num_failed")), "empty or unreadable audio")]
    if s.get("keep_failed"):
        tail.append(("num_retained", str(s.get("num_retained")), s["keep_failed"]))
    return Figures("speaker similarity and MOS", [*sections, Section(tail)])


def audio_not_scored(summary: Mapping[str, Any]) -> list[Line]:
    """One line per utterance and cause: a missing wav fails SIM and MOS alike."""
    problems: dict[tuple[str, str], list[str]] = {}
    for metric in ("sim", "mos"):
        for f in summary.get(f"{metric}_failed", []):
            scorer_failed = f["status"] == "ok"
            key = (f["utt"], "scorer_error" if scorer_failed else f["status"])
            detail = f"{metric}: {f['error']}" if scorer_failed else (f["error"] or "")
            if detail not in problems.setdefault(key, []):
                problems[key].append(detail)
    return [(utt, status, "; ".join(details)) for (utt, status), details in problems.items()]


def note_lines(summary: Mapping[str, Any]) -> list[Line]:
    """Utterances scored (or not) with something their figures cannot show (omnicli.evaluation.clips)."""
    notes = summary.get("notes") or {}
    return [(utt, "note", "; ".join(n)) for utt, n in notes.items()]


def report_tables(summary: Mapping[str, Any]) -> list[Table]:
    """The WER table, the SIM / MOS table and what was not scored, in the order printed."""
    metrics = summary.get("metrics", ["wer"])
    tables: list[Table | None] = []
    if "wer" in metrics:
        tables += [figures_table(wer_figures(summary)), listing_table("not scored", wer_not_scored(summary)),
                   listing_table("notes", note_lines(summary))]
    audio = audio_figures(summary)
    if audio is not None:
        tables += [figures_table(audio), listing_table("not scored (SIM/MOS)", audio_not_scored(summary))]
        if "wer" not in metrics:
            tables.append(listing_table("notes", note_lines(summary)))
    return [table for table in tables if table is not None]


def figures_table(figures: Figures) -> Table:
    table = Table(title=figures.title, title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("note", style="dim")
    for i, section in enumerate(figures.sections):
        if i:
            table.add_section()
        for key, value, note in section.lines:
            table.add_row(f"[dim]{key}[/dim]" if section.dim else key, value, escape(note))
    return table


def listing_table(title: str, lines: list[Line], shown: int = 20) -> Table | None:
    """The first `shown` (utt, status, detail) lines as a table; None when there are none."""
    if not lines:
        return None
    listing = Table(title=title, title_justify="left")
    for column in ("utt", "status", "detail"):
        listing.add_column(column)
    for utt, state, detail in lines[:shown]:
        listing.add_row(utt, state, detail)
    if len(lines) > shown:
        listing.add_row("...", f"{len(lines) - shown} more", "see the results files")
    return listing
