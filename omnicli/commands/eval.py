"""`omni eval`: WER, speaker similarity (SIM) and predicted MOS of generated speech (parse, run, print).

The work lives in `omnicli.evaluation` (WER) and `omnicli.evaluation.scorers`
(SIM, MOS); `omnicli.evaluation.combined` joins them. This module checks
options, loads the models once, shows progress, prints the tables and writes
eval_results.tsv / .jsonl and eval_summary.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from omnicli.commands.common import (
    EXIT_ENGINE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOME_FAILED,
    ProfileOption,
    QuietOption,
    SetOption,
    VerboseOption,
    console,
    err_console,
    progress_bar,
    resolve_profile,
    set_verbosity,
    status,
    usage_error,
)
from omnicli.commands.eval_wer import Device, Lang, _load_rows, print_not_scored, print_summary
from omnicli.commands.report import ReportOption, check_report_option, report_after_run


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def print_audio_summary(summary: dict) -> None:
    """The SIM / MOS table; WER has its own (print_summary)."""
    metrics = summary.get("metrics", [])
    if "sim" not in metrics and "mos" not in metrics:
        return
    table = Table(title="speaker similarity and MOS", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("note", style="dim")
    if "sim" in metrics:
        table.add_row("sim_mean", _fmt(summary.get("sim_mean")), f"backend {summary.get('sim_backend')}: {summary.get('sim_note', '')}")
        table.add_row("sim_median", _fmt(summary.get("sim_median")), "")
        table.add_row("sim_share_below_threshold", _fmt(summary.get("sim_share_below_threshold")), f"percent with SIM < {summary.get('sim_threshold')}")
        table.add_row("num_sim_scored", str(summary.get("num_sim_scored")), f"{summary.get('num_sim_failed')} failed; {_fmt(summary.get('sim_cpu_s_per_utt'))} CPU s/utt")
        table.add_section()
    if "mos" in metrics:
        notes = summary.get("mos_notes", {})
        for key in ("dnsmos_ovrl_mean", "dnsmos_sig_mean", "dnsmos_bak_mean", "dnsmos_p808_mean", "utmos_mean"):
            if key in summary:
                backend = "utmos" if key.startswith("utmos") else "dnsmos"
                note = notes.get(backend, "") if key in ("dnsmos_ovrl_mean", "utmos_mean") else ""
                table.add_row(key, _fmt(summary[key]), note)
        table.add_row("mos_share_below_threshold", _fmt(summary.get("mos_share_below_threshold")), f"percent with OVRL/UTMOS < {summary.get('mos_threshold')}")
        table.add_row("num_mos_scored", str(summary.get("num_mos_scored")), f"{summary.get('num_mos_failed')} failed; {_fmt(summary.get('mos_cpu_s_per_utt'))} CPU s/utt")
        table.add_section()
    table.add_row("num_low_sim / num_low_mos", f"{summary.get('num_low_sim')} / {summary.get('num_low_mos')}", "retention reasons low_sim / low_mos")
    if "wer" not in metrics:
        table.add_row("num_missing", str(summary.get("num_missing")), f"of {summary.get('num_utts')} utterances: no wav")
        table.add_row("num_failed", str(summary.get("num_failed")), "empty or unreadable audio")
    if summary.get("keep_failed"):
        table.add_row("num_retained", str(summary.get("num_retained")), summary["keep_failed"])
    console.print(table)
    # One line per utterance and cause: a missing wav fails SIM and MOS alike.
    problems: dict[tuple[str, str], list[str]] = {}
    for metric in ("sim", "mos"):
        for f in summary.get(f"{metric}_failed", []):
            scorer_failed = f["status"] == "ok"
            key = (f["utt"], "scorer_error" if scorer_failed else f["status"])
            detail = f"{metric}: {f['error']}" if scorer_failed else (f["error"] or "")
            if detail not in problems.setdefault(key, []):
                problems[key].append(detail)
    problems = [(utt, status, "; ".join(details)) for (utt, status), details in problems.items()]
    print_not_scored("not scored (SIM/MOS)", problems)


def eval_command(
    gen_dir: Annotated[Path, typer.Argument(help="Folder holding the generated <utt>.wav files.", show_default=False)],
    manifest: Annotated[
        Path, typer.Option("--manifest", "-m", help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav]) or JSONL.")
    ],
    metrics: Annotated[str, typer.Option("--metrics", help="Any subset of wer,sim,mos, comma-separated.")] = "wer,sim,mos",
    lang: Annotated[Lang, typer.Option("--lang", "-l", help="Language of the texts: en (WER) or zh (CER).")] = Lang.en,
    asr: Annotated[
        Optional[str],
        typer.Option("--asr", help="WER: BACKEND[:MODEL], as omni eval-wer. Local models only.",
                     show_default="openai-whisper:large-v3 (zh: funasr:paraformer-zh when installed)"),
    ] = None,
    sim: Annotated[
        str, typer.Option("--sim", help="SIM backend: dvector (bundled GE2E d-vector) or wavlm[:REPO_ID|/dir] (local WavLMForXVector).")
    ] = "dvector",
    mos: Annotated[
        str, typer.Option("--mos", help="MOS backend(s), comma-separated: dnsmos (bundled) and/or utmos[:/path/utmos.ts].")
    ] = "dnsmos",
    threshold: Annotated[
        Optional[float], typer.Option("--threshold", min=0.0, help="Retain audio whose WER exceeds this (fraction).", show_default="profile retention.asr_wer_threshold")
    ] = None,
    sim_threshold: Annotated[
        Optional[float], typer.Option("--sim-threshold", help="low_sim below this SIM.", show_default="profile retention.sim_threshold")
    ] = None,
    mos_threshold: Annotated[
        Optional[float], typer.Option("--mos-threshold", help="low_mos below this DNSMOS OVRL / UTMOS.", show_default="profile retention.mos_threshold")
    ] = None,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Folder for eval_results.tsv/.jsonl and eval_summary.json.", show_default="GEN_DIR/eval")
    ] = None,
    transcripts: Annotated[
        Optional[Path], typer.Option("--transcripts", help="WER: re-score cached transcripts (JSONL {utt,hyp} or TSV) without ASR.")
    ] = None,
    keep_failed: Annotated[
        Optional[Path],
        typer.Option("--keep-failed", envvar="OMNI_FAILED_SPEECH_AUDIO_DIR", help="Retain audio with asr_mismatch/asr_empty/low_sim/low_mos here.", show_default="off"),
    ] = None,
    device: Annotated[Optional[Device], typer.Option("--device", help="Where ASR and the torch scorers run.", show_default="profile device (auto)")] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Clips per batch (where the backend batches).")] = 8,
    max_new_tokens: Annotated[Optional[int], typer.Option("--max-new-tokens", min=1, help="WER: cap on decoded tokens per clip.")] = None,
    profile: ProfileOption = None,
    sets: SetOption = None,
    report_file: ReportOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Score GEN_DIR/<utt>.wav for every manifest row: WER, speaker similarity to the row's reference audio, MOS.

    Exit codes: 0 every utterance scored by every metric, 1 some missing or
    failed, 2 bad usage or input (including a model that is not on this
    machine), 3 a model failed to load, 130 interrupted.
    """
    from omnicli.evaluation import AsrError, AsrSetupError, AsrSpec, TranscriptsError, build_wer_summary, default_spec, load_backend, read_transcripts
    from omnicli.evaluation.asr.base import resolve_torch_device
    from omnicli.evaluation.combined import (
        EvalPlan,
        all_scored,
        build_eval_summary,
        columns,
        merge_rows,
        parse_metrics,
        run_eval,
        write_eval_results,
    )
    from omnicli.evaluation.scorers import ScorerError, ScorerSetupError, audio_summary, check_specs, load_scorers
    from omnicli.retention import Retainer

    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    try:
        chosen = parse_metrics(metrics)
    except ValueError as exc:
        raise usage_error(f"--metrics {metrics!r}: {exc}") from None
    resolved = resolve_profile(profile, sets)
    settings = resolved.profile
    plan = EvalPlan(
        metrics=chosen, lang=lang.value, batch_size=batch_size,
        wer_threshold=settings.retention.asr_wer_threshold if threshold is None else threshold,
        sim_threshold=settings.retention.sim_threshold if sim_threshold is None else sim_threshold,
        mos_threshold=settings.retention.mos_threshold if mos_threshold is None else mos_threshold,
        retainer=Retainer.from_option(keep_failed),
    )
    device_name = (device.value if device else None) or settings.device
    rows = _load_rows(manifest)
    needs_audio = "sim" in chosen or "mos" in chosen or transcripts is None
    if needs_audio and not gen_dir.is_dir():
        raise usage_error(f"{gen_dir}: generated-audio folder not found")
    if transcripts is not None and "wer" not in chosen:
        raise usage_error("--transcripts only applies to the wer metric")
    out_dir = out or gen_dir / "eval"

    # --- models: locate everything first (cheap), then load each once ---
    asr_info = None
    try:
        check_specs(chosen, sim=sim, mos=mos)
        if "wer" in chosen and transcripts is not None:
            try:
                plan.transcripts = read_transcripts(transcripts)
            except TranscriptsError as exc:
                raise usage_error(str(exc)) from None
            asr_info = {"backend": "transcripts", "model": str(transcripts), "language": plan.lang}
        elif "wer" in chosen:
            spec = AsrSpec.parse(asr) if asr else default_spec(plan.lang)
            with status(f"loading ASR {spec} ..."):
                plan.asr = load_backend(spec, lang=plan.lang, device=device_name, max_new_tokens=max_new_tokens)
            asr_info = {"requested": str(spec), **plan.asr.describe()}
        if "sim" in chosen or "mos" in chosen:
            torch_device = resolve_torch_device(device_name)
            with status("loading SIM/MOS models ..."):
                plan.scorers = load_scorers(chosen, sim=sim, mos=mos, device=torch_device)
    except (AsrSetupError, ScorerSetupError) as exc:
        raise usage_error(str(exc)) from None
    except (AsrError, ScorerError) as exc:
        err_console.print(f"[red]model failed to load:[/red] {exc}")
        raise typer.Exit(EXIT_ENGINE) from None

    plan.retention_meta = {"profile_digest": resolved.digest, "command": "eval"}
    if asr_info:
        plan.retention_meta.update(asr_backend=asr_info["backend"], asr_model=asr_info["model"])
    try:
        with progress_bar(err_console, failed_label="failed/missing") as progress:
            tasks = {}

            def advance(name: str, description: str):
                tasks[name] = progress.add_task(description, total=len(rows), failed=0, visible=False)
                bad = 0

                def on_result(result) -> None:
                    nonlocal bad
                    ok = result.scored if hasattr(result, "scored") else (result.status == "ok" and not result.errors)
                    bad += 0 if ok else 1
                    progress.update(tasks[name], advance=1, failed=bad, visible=True)

                return on_result

            on_wer = advance("wer", "scoring" if plan.transcripts is not None else "transcribing") if "wer" in chosen else None
            on_audio = advance("audio", "+".join(m for m in chosen if m != "wer")) if chosen != ("wer",) else None
            outcome = run_eval(rows, gen_dir, plan, on_wer=on_wer, on_audio=on_audio)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/yellow]: no results written")
        raise typer.Exit(EXIT_INTERRUPTED) from None

    wer_summary = None
    if outcome.wer_run is not None:
        wer_summary = build_wer_summary(
            outcome.wer_run, lang=plan.lang, threshold=plan.wer_threshold, asr=asr_info, manifest=manifest,
            gen_dir=gen_dir, transcripts_file=transcripts, profile_name=resolved.name, profile_digest=resolved.digest,
            retainer=plan.retainer,
        )
    audio = None
    if outcome.audio_run is not None:
        audio = audio_summary(outcome.audio_run, sim_threshold=plan.sim_threshold, mos_threshold=plan.mos_threshold)
    summary = build_eval_summary(
        outcome, metrics=chosen, wer_summary=wer_summary, audio_summary=audio, manifest=manifest, gen_dir=gen_dir,
        profile_name=resolved.name, profile_digest=resolved.digest, retainer=plan.retainer,
    )
    try:
        paths = write_eval_results(out_dir, merge_rows(outcome), columns(outcome), summary, outcome)
    except OSError as exc:
        raise usage_error(f"cannot write results to {out_dir}: {exc}") from None
    finally:
        if wer_summary is not None:
            print_summary(summary)
        print_audio_summary(summary)
    err_console.print(f"results: {paths['tsv']}, {paths['jsonl']}; summary: {paths['summary']}")
    report_after_run(report_file, [gen_dir, out_dir, *([keep_failed] if keep_failed else [])])
    raise typer.Exit(EXIT_OK if all_scored(summary) else EXIT_SOME_FAILED)
