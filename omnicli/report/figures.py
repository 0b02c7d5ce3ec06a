"""The page's charts as Plotly figures (JSON for plotly.js, which the page inlines).

Built with plotly's graph objects, so a wrong property fails here rather than
in the browser; the figures carry no template (the page's small base layout
applies), which keeps each one a few kilobytes.
"""

from __future__ import annotations

import html
import json
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from omnicli.report.ab import CONFIDENCE, Difference, requests_of
from omnicli.report.rows import UttRow

_BASE = {"margin": {"l": 60, "r": 20, "t": 40, "b": 50}, "height": 320, "template": None,
         "font": {"family": "system-ui, sans-serif", "size": 12}, "legend": {"orientation": "h", "y": -0.2}}
_RUNAWAY = {"hit_cap", "too_long", "over_30s"}


def _plain(text: Any) -> str:
    """`text` as plotly shows it literally: names, titles, tick and hover labels are plotly's pseudo-HTML
    (`<a href>` would be a live link, `<br>` a break), and plotly decodes these entities back for display."""
    return html.escape(str(text), quote=False)


def _json(fig: go.Figure) -> dict[str, Any]:
    fig.update_layout(**_BASE)
    data = json.loads(fig.to_json())
    data["layout"].pop("template", None)
    return data


def wer_histogram(rows: list[UttRow]) -> dict[str, Any] | None:
    wers = [r.wer * 100 for r in rows if r.wer is not None]
    if not wers:
        return None
    top = max(100.0, max(wers)) + 5
    fig = go.Figure(go.Histogram(x=wers, xbins={"start": 0, "end": top, "size": 5}, name="WER"))
    fig.update_layout(
        title="WER per utterance (%)",
        xaxis={"title": "WER (%)", "range": [0, top]},
        yaxis_title="utterances",
        bargap=0.05,
    )
    return _json(fig)


def duration_histogram(rows: list[UttRow]) -> dict[str, Any] | None:
    durations = [r.duration_s for r in rows if r.duration_s is not None]
    if not durations:
        return None
    fig = go.Figure(go.Histogram(x=durations, nbinsx=40, name="duration"))
    fig.update_layout(title="Audio duration (s)", xaxis_title="seconds", yaxis_title="utterances", bargap=0.05)
    return _json(fig)


def duration_vs_text(rows: list[UttRow]) -> dict[str, Any] | None:
    """Runaways (hit the cap, too long for the text) in their own colour, so they stand out."""
    points = [r for r in rows if r.duration_s is not None and r.text]
    if not points:
        return None
    fig = go.Figure()
    for name, members, colour in (("normal", [r for r in points if not set(r.reasons) & _RUNAWAY], "#1f77b4"),
                                  ("runaway", [r for r in points if set(r.reasons) & _RUNAWAY], "#d62728")):
        if members:
            # customdata: the page finds the clicked row by it, so it stays as it is; the hover shows the
            # escaped ids, carried separately only when some id needs it (a few bytes a point otherwise)
            shown = [_plain(r.utt) for r in members]
            plain = shown == [r.utt for r in members]
            fig.add_trace(go.Scatter(
                x=[len(r.text or "") for r in members], y=[r.duration_s for r in members], mode="markers", name=name,
                marker={"color": colour, "size": 7, "opacity": 0.7}, customdata=[r.utt for r in members],
                text=None if plain else shown,
                hovertemplate=f"%{{{'customdata' if plain else 'text'}}}<br>%{{x}} chars, %{{y:.2f}} s<extra></extra>"))
    fig.update_layout(title="Audio duration against text length (click a point: its row)",
                      xaxis_title="text length (characters)", yaxis_title="audio (s)")
    return _json(fig)


def _x_of(runs: list[dict[str, Any]]) -> tuple[str, list[Any]]:
    """What the sweep varies: concurrency (closed loop) or request rate (open loop); else the pass label."""
    rates = {str(r.get("request_rate")) for r in runs}
    concs = {r.get("max_concurrency") for r in runs}
    if rates == {"inf"} and None not in concs:
        return "concurrency", [r.get("max_concurrency") for r in runs]
    if len(concs) == 1 and all(isinstance(r.get("request_rate"), (int, float)) for r in runs):
        return "request rate (req/s)", [float(r["request_rate"]) for r in runs]
    return "pass", [f"c={r.get('max_concurrency')} r={r.get('request_rate')}" for r in runs]


SWEEP_PANELS = (("audio_throughput", "audio-s/s"), ("request_throughput", "requests/s"),
                ("p50_audio_ttfp_ms", "first audio p50 (ms)"), ("p99_audio_ttfp_ms", "first audio p99 (ms)"))


def sweep(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One point per run in each panel, one line per profile."""
    if not runs:
        return None
    x_title, xs = _x_of(runs)
    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=[title for _, title in SWEEP_PANELS],
        horizontal_spacing=0.12,
        vertical_spacing=0.22,
    )
    profiles = list(dict.fromkeys(str(r.get("arm")) for r in runs))
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    for p_index, profile in enumerate(profiles):
        idx = [i for i, r in enumerate(runs) if str(r.get("arm")) == profile]
        for panel, (key, _title) in enumerate(SWEEP_PANELS):
            fig.add_trace(
                go.Scatter(
                    x=[xs[i] for i in idx],
                    y=[runs[i].get(key) for i in idx],
                    mode="lines+markers",
                    name=_plain(profile),
                    legendgroup=_plain(profile),
                    showlegend=panel == 0,
                    marker={"color": colours[p_index % len(colours)], "size": 8},
                    customdata=[_plain(runs[i].get("label")) for i in idx],
                    hovertemplate="%{customdata}: %{y:.3g}<extra></extra>",
                ),
                row=panel // 2 + 1,
                col=panel % 2 + 1,
            )
    if x_title == "concurrency":  # the values run, not a continuous scale
        values = sorted(set(xs))
        fig.update_xaxes(tickvals=values, type="log" if len(values) > 2 and values[-1] / values[0] > 8 else "-")
    fig.update_xaxes(title_text=x_title, row=2)
    fig.update_layout(title="Sweep", height=560)
    return _json(fig)


def timeline(run: dict[str, Any]) -> dict[str, Any] | None:
    """Each request as a bar from submission: waiting until first audio, then streaming until the end;
    underruns and failures marked. Rounds follow one another on the time axis."""
    reqs = requests_of(run)
    if not reqs:
        return None
    durations = run.get("round_durations") or []
    offsets = [sum(durations[:r]) for r in range(len(durations) + 1)]
    ys, starts, waits, streams, text, bad_x, bad_y, under_x, under_y, under_text, tok_x, tok_y = ([] for _ in range(12))
    for i, q in enumerate(reqs):
        rnd = q.get("round") or 0
        start = (q.get("start") or 0.0) + (offsets[rnd] if rnd < len(offsets) else 0.0)
        ttfp, e2el = q.get("audio_ttfp"), q.get("e2el")
        label = _plain(f"#{i} {q.get('utt') or ''}")
        if q.get("error") or e2el is None:
            bad_x.append(start)
            bad_y.append(label)
            continue
        ttfp = ttfp if ttfp is not None else e2el
        ys.append(label)
        starts.append(start)
        waits.append(ttfp)
        streams.append(max(e2el - ttfp, 0.0))
        text.append(f"{_plain(q.get('utt'))}: first audio {ttfp * 1000:.0f} ms, end {e2el * 1000:.0f} ms, round {rnd}")
        if (q.get("audio_underrun") or 0) > 0:
            under_x.append(start + e2el)
            under_y.append(label)
            under_text.append(f"underrun {q['audio_underrun'] * 1000:.0f} ms")
        if isinstance(q.get("ttft"), (int, float)):
            tok_x.append(start + q["ttft"])
            tok_y.append(label)
    fig = go.Figure()
    fig.add_trace(go.Bar(y=ys, x=waits, base=starts, orientation="h", name="submitted to first audio",
                         marker={"color": "#bbbbbb"}, hovertext=text, hoverinfo="text"))
    fig.add_trace(go.Bar(y=ys, x=streams, base=[s + w for s, w in zip(starts, waits)], orientation="h",
                         name="first audio to end", marker={"color": "#1f77b4"}, hovertext=text, hoverinfo="text"))
    if tok_x:
        fig.add_trace(
            go.Scatter(
                x=tok_x,
                y=tok_y,
                mode="markers",
                name="first token",
                marker={"symbol": "line-ns-open", "size": 10, "color": "#2ca02c"},
            )
        )
    if under_x:
        fig.add_trace(
            go.Scatter(
                x=under_x,
                y=under_y,
                mode="markers",
                name="underrun",
                text=under_text,
                hoverinfo="text",
                marker={"symbol": "triangle-left", "size": 9, "color": "#ff7f0e"},
            )
        )
    if bad_x:
        fig.add_trace(
            go.Scatter(
                x=bad_x, y=bad_y, mode="markers", name="failed", marker={"symbol": "x", "size": 10, "color": "#d62728"}
            )
        )
    fig.update_layout(
        title=f"Requests of {_plain(run.get('label'))}",
        barmode="overlay",
        xaxis_title="seconds from the pass's first submission",
        yaxis={"autorange": "reversed", "showticklabels": len(reqs) <= 40, "automargin": True},
        height=max(260, min(900, 40 + 14 * len(reqs))),
    )
    return _json(fig)


def ab_forest(label: str, diffs: list[Difference]) -> dict[str, Any] | None:
    """B against A in percent per metric with its interval; the zero line is 'no difference'."""
    shown = [d for d in diffs if d.rel is not None]
    if not shown:
        return None
    # (every shown ratio is a number: `rel` is None exactly when the ratio is)
    err_plus = [(d.high - d.ratio) * 100 if d.high is not None and d.ratio is not None else 0.0 for d in shown]
    err_minus = [(d.ratio - d.low) * 100 if d.low is not None and d.ratio is not None else 0.0 for d in shown]
    colour = {"within noise": "#888888", "better": "#2ca02c", "worse": "#d62728"}
    fig = go.Figure(go.Scatter(
        x=[d.rel for d in shown], y=[d.label for d in shown], mode="markers",
        error_x={"type": "data", "symmetric": False, "array": err_plus, "arrayminus": err_minus, "color": "#444"},
        marker={"size": 10, "color": [colour.get(d.verdict, "#1f77b4") for d in shown]},
        text=[d.verdict for d in shown], hovertemplate="%{y}: %{x:+.1f} % (%{text})<extra></extra>", showlegend=False))
    fig.add_vline(x=0, line_dash="dot", line_color="#444")
    fig.update_layout(title=_plain(label), xaxis_title=f"B against A, % ({CONFIDENCE:.0%} interval over rounds)",
                      yaxis={"autorange": "reversed", "automargin": True}, height=max(240, 90 + 34 * len(shown)))
    return _json(fig)
