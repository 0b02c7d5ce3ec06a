"""The report page: the collected data, figures and cards rendered into one self-contained HTML file.

Styles, scripts (plotly.js from the installed plotly package, the page's own
table script) and data are inline, so the file opens from file:// with no
network. Audio is referenced by relative path from the page's folder, or,
for `--embed-audio`, inlined as data: URIs; only files the audio gate admits
(audio_gate.py), the others listed on the page with the reason.

The data is anyone's text: the JSON element escapes `<`, `>`, `&`, U+2028
and U+2029 (no `<!--` or `<script` can change how the HTML tokenizer reads
the element), holds no NaN or Infinity (JSON.parse refuses them), and a name
that is not UTF-8 (a folder or wav name with a stray byte) is shown with
U+FFFD and linked by its real bytes.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import jinja2

from omnicli import __version__
from omnicli.atomic import write_text_atomic
from omnicli.errors import UsageError
from omnicli.report import ab, figures
from omnicli.report.audio_gate import Admitted, AudioGate
from omnicli.report.models import drop_nonfinite
from omnicli.report.rows import GROUPS, Utterances, UttRow, collect_rows
from omnicli.report.sources import EvalFolder, Sources, bench_runs

if TYPE_CHECKING:
    from omnicli.synth.results import SynthSummary

# Per-row values the table shows, in column order (the page's script knows them by these names).
COLUMNS = ("utt", "source", "text", "status", "reasons", "groups", "duration_s", "rtf", "ttfp_s", "finish_reason",
           "wer", "hyp", "diff", "sim", "mos", "audio", "ref_audio", "error", "line")


MAX_LISTED = 200  # rows whose audio was left out, listed by name (the rest counted)


class EmbedSpec(UsageError):
    """A bad --embed-audio value."""


@dataclass(frozen=True)
class Embed:
    worst: int = 0  # inline the audio of the N worst rows
    all: bool = False

    @classmethod
    def parse(cls, text: str | None) -> Embed:
        if not text or text == "none":
            return cls()
        if text == "all":
            return cls(all=True)
        match = re.fullmatch(r"worst:(\d+)", text)
        if not match:
            raise EmbedSpec(f"--embed-audio {text!r}: expected worst:N, all or none")
        return cls(worst=int(match.group(1)))


@dataclass
class PageFacts:
    path: Path
    bytes: int
    rows: int
    runs: int
    embedded: int


def badness(row: UttRow) -> tuple:
    """Sort key of the worst rows first: in a problem group, then by WER, then by reasons."""
    return (bool(row.groups), row.wer if row.wer is not None else -1.0, len(row.reasons), row.rtf or 0.0)


def build_page(sources: Sources, out: Path, *, embed: Embed = Embed(), manifest: Path | None = None,
               title: str | None = None, audio_roots: list[Path] | None = None) -> PageFacts:
    """`audio_roots`: the folders named on the command line; audio is linked or inlined only from inside
    them or a manifest's folder (audio_gate.py)."""
    utterances = collect_rows(sources, manifest=manifest)
    runs = bench_runs(sources)
    folders = [*(audio_roots or []), *([manifest.parent] if manifest is not None else []), *utterances.manifest_dirs]
    gate = AudioGate.for_folders(folders)
    context = _context(sources, utterances, runs, out, embed, title, gate)
    html = _utf8(_environment().get_template("report.html.j2").render(**context))
    write_text_atomic(out, html)
    return PageFacts(out, len(html.encode("utf-8")), len(utterances.rows), len(runs), context["embedded"])


def _utf8(text: str) -> str:
    """`text` with the lone surrogates of undecodable file-name bytes (os.walk's surrogateescape) as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("omnicli.report", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
    env.filters["num"] = _fmt
    return env


def _asset(name: str) -> str:
    return (resources.files("omnicli.report") / "templates" / name).read_text(encoding="utf-8")


def plotly_js() -> str:
    return (resources.files("plotly") / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value else f"{value:,.{digits}f}".rstrip("0").rstrip(".")
    return str(value)


# In JSON these appear only inside strings, where their \\u escapes mean the same characters.
_SCRIPT_UNSAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                                "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _script_json(obj: Any) -> str:
    """JSON safe inside <script type="application/json">: no `</script`, `<!--` or `<script` can end the element
    or change how the HTML tokenizer reads it, and no bare NaN / Infinity (any left are null)."""
    try:
        text = json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError:  # a number too large for a float (1e400 reads as inf): null, as the rest
        text = json.dumps(drop_nonfinite(obj)[0], ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.translate(_SCRIPT_UNSAFE)


def _href(path: Path | None, page_dir: Path, inline: bool, gate: AudioGate) -> tuple[str | None, str | None]:
    """(the audio's URL, relative to the page or a data: URI; or None) and why it was left out (or None)."""
    if path is None:
        return None, None
    admitted = gate.admit(path)
    if not isinstance(admitted, Admitted):
        return None, admitted
    if inline:
        data = gate.read(admitted)
        if isinstance(data, str):
            return None, data
        return f"data:{admitted.mime};base64," + base64.b64encode(data).decode("ascii"), None
    rel = os.path.relpath(admitted.path, page_dir)
    return quote(os.fsencode(rel.replace(os.sep, "/"))), None


def _compact_diff(diff: list[list[str]] | None) -> list | None:
    """Equal words as plain strings, errors as [op, ref, hyp]: most words are equal."""
    if diff is None:
        return None
    return [ref if op == "=" else [op, ref, hyp] for op, ref, hyp in diff]


def _row_values(row: UttRow, page_dir: Path, inline: bool, gate: AudioGate, left_out: list[str]) -> list[Any]:
    links = {}
    for key, kind in (("audio", "generated audio"), ("ref_audio", "reference prompt")):
        path = getattr(row, key)
        links[key], why = _href(path, page_dir, inline, gate)
        if why is not None:
            left_out.append(f"{row.source}: {row.utt}: {kind} {path}: {why}")
    values = {
        **{k: getattr(row, k) for k in ("utt", "source", "text", "status", "reasons", "duration_s", "rtf", "ttfp_s",
                                        "finish_reason", "wer", "hyp", "sim", "mos", "error", "line")},
        "groups": row.groups, "diff": _compact_diff(row.diff), **links,
    }
    return [_round(values[c]) for c in COLUMNS]


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) and math.isfinite(value) else value


def _context(sources: Sources, utterances: Utterances, runs: list[dict[str, Any]], out: Path, embed: Embed,
             title: str | None, gate: AudioGate) -> dict[str, Any]:
    page_dir = out.resolve().parent
    rows = utterances.rows
    inline = set()
    if embed.all:
        inline = {id(r) for r in rows}
    elif embed.worst:
        inline = {id(r) for r in sorted((r for r in rows if r.audio), key=badness, reverse=True)[:embed.worst]}
    left_out: list[str] = []
    table = [_row_values(r, page_dir, id(r) in inline, gate, left_out) for r in rows]
    embedded = sum(1 for r, values in zip(rows, table) if id(r) in inline and values[COLUMNS.index("audio")])
    figs = {name: fig for name, fig in (
        ("wer_hist", figures.wer_histogram(rows)), ("duration_hist", figures.duration_histogram(rows)),
        ("duration_vs_text", figures.duration_vs_text(rows)), ("sweep", figures.sweep(runs)),
    ) if fig is not None}
    timelines = [
        {"label": str(r.get("label")), "figure": fig} for r in runs if (fig := figures.timeline(r)) is not None
    ]
    comparisons = []
    for a, b in ab.pairs(runs):
        diffs = ab.compare(a, b)
        name = f"{b['arm']} against {a['arm']} at {_shape(a)}"
        comparisons.append({"a": a["arm"], "b": b["arm"], "shape": _shape(a), "diffs": diffs,
                            "figure": figures.ab_forest(name, diffs)})
    for i, comparison in enumerate(comparisons):
        if comparison["figure"]:
            figs[f"ab_{i}"] = comparison["figure"]
    data = {"columns": COLUMNS, "rows": table, "figures": figs, "timelines": timelines, "groups": GROUPS,
            "wer_threshold": utterances.wer_threshold}
    return {
        "title": title or "omni report",
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "version": __version__,
        "sources": _source_list(sources),
        "notes": [*sources.notes, *utterances.notes],
        "synth_cards": [_synth_card(s.dir, s.summary) for s in sources.synth if s.summary],
        "eval_cards": [_eval_card(e) for e in sources.evals],
        "bench_runs": [_run_row(r) for r in runs],
        "bench_columns": _RUN_KEYS,
        "bench_extra_keys": _extra_keys(runs),
        "bench_problems": [
            (b.path.name, b.engine_error, b.interrupted) for b in sources.bench if b.engine_error or b.interrupted
        ],
        "comparisons": [{**c, "index": i} for i, c in enumerate(comparisons)],
        "confidence": f"{ab.CONFIDENCE:.0%}",
        "num_rows": len(rows),
        "embedded": embedded,
        "audio_left_out": left_out[:MAX_LISTED],
        "audio_left_out_more": max(0, len(left_out) - MAX_LISTED),
        "has_scores": any(r.wer is not None for r in rows),
        "has_sim": any(r.sim is not None for r in rows),
        "has_mos": any(r.mos is not None for r in rows),
        "data_json": _script_json(data),
        "plotly_js": plotly_js(),
        "page_js": _asset("report.js"),
        "page_css": _asset("report.css"),
    }


def _shape(run: dict[str, Any]) -> str:
    rate = run.get("request_rate")
    conc = run.get("max_concurrency")
    return (
        ", ".join(
            p for p in (f"c={conc}" if conc is not None else "", f"rate {rate}/s" if str(rate) != "inf" else "") if p
        )
        or "no cap"
    )


def _source_list(sources: Sources) -> list[str]:
    out = [f"synth: {s.dir} ({len(s.rows)} rows)" for s in sources.synth]
    out += [f"{e.kind}: {e.dir} ({len(e.rows)} rows)" for e in sources.evals]
    out += [f"bench: {b.path} ({len(b.runs)} runs)" for b in sources.bench]
    folders = sorted({str(s.path.parent) for s in sources.sidecars})
    out += [f"retention: {f}" for f in folders]
    return out


def _synth_card(folder: Path, s: SynthSummary) -> dict[str, Any]:
    return {
        "dir": str(folder),
        "items": [
            ("rows", s.num_rows, ""),
            (
                "ok / failed / pending",
                f"{s.num_ok} / {s.num_failed} / {s.num_pending}",
                f"{s.num_invalid_rows} invalid rows",
            ),
            ("audio", f"{s.audio_seconds:.1f} s", "all ok rows"),
            (
                "this run",
                f"{s.this_run.audio_throughput:.2f} audio-s/s",
                f"{s.this_run.attempted} attempted in {s.this_run.wall_seconds:.1f} s",
            ),
            (
                "retained",
                s.retention.kept if s.retention else "off",
                s.retention.dir if s.retention else "no --keep-failed",
            ),
            ("profile", s.profile_name or "-", f"{s.model}, {s.profile_digest}"),
        ],
    }


def _eval_card(ev: EvalFolder) -> dict[str, Any]:
    """The headline figures with the comparability labels the eval commands print."""
    s = ev.summary
    notes = s.key_notes or {}
    items = []
    if "wer" in s.metrics:
        asr = (s.asr or {}).get("requested") or (s.asr or {}).get("backend") or "-"
        items.append(("seed-tts-eval WER", _pct(s.seed_wer_mean), f"{notes.get('seed_wer_mean', '')} ASR: {asr}"))
        items.append(("corpus WER", _pct(s.corpus_wer), notes.get("corpus_wer", "")))
        items.append(("above threshold", f"{s.num_above_threshold} of {s.num_scored}", f"WER > {s.wer_threshold}"))
    if "sim" in s.metrics:
        items.append(("SIM (proxy)", _fmt(s.sim_mean), f"backend {s.sim_backend}: {s.sim_note}"))
    if "mos" in s.metrics:
        mos_notes = s.mos_notes or {}
        if s.dnsmos_ovrl_mean is not None or "dnsmos" in (s.mos_backends or []):
            items.append(("DNSMOS OVRL (proxy)", _fmt(s.dnsmos_ovrl_mean), mos_notes.get("dnsmos", "")))
        if s.utmos_mean is not None or "utmos" in (s.mos_backends or []):
            items.append(("UTMOS (proxy)", _fmt(s.utmos_mean), mos_notes.get("utmos", "")))
    items.append(("missing / failed", f"{s.num_missing} / {s.num_failed}", f"of {s.num_utts} rows"))
    return {"dir": f"{ev.kind}: {ev.dir}", "items": items}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} %"


_RUN_KEYS = (
    ("label", "pass"),
    ("completed", "ok"),
    ("failed", "failed"),
    ("audio_throughput", "audio-s/s"),
    ("request_throughput", "req/s"),
    ("p50_audio_ttfp_ms", "TTFP p50 ms"),
    ("p99_audio_ttfp_ms", "TTFP p99 ms"),
    ("p50_e2el_ms", "E2E p50 ms"),
    ("mean_audio_rtf", "RTF"),
    ("mean_audio_underrun_s", "underrun s"),
    ("rounds", "rounds"),
)
# vLLM's text-model distributions, shown when the result files carry them.
_EXTRA_KEYS = (("mean_ttft_ms", "TTFT mean ms"), ("p99_ttft_ms", "TTFT p99 ms"), ("mean_tpot_ms", "TPOT mean ms"),
               ("mean_itl_ms", "ITL mean ms"), ("p99_itl_ms", "ITL p99 ms"))


def _extra_keys(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(k, label) for k, label in _EXTRA_KEYS if any(isinstance(r.get(k), (int, float)) for r in runs)]


def _run_row(run: dict[str, Any]) -> dict[str, Any]:
    keys = _RUN_KEYS + _EXTRA_KEYS
    return {k: run.get(k) for k, _ in keys} | {"label": run.get("label") or run.get("profile_label")}

