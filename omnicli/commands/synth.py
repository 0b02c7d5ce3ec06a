"""`omni synth MANIFEST`: synthesize every row to OUT/<utt>.wav (the run itself is `omnicli.synth`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from omnicli.commands.common import (
    ProfileOption,
    QuietOption,
    SetOption,
    VerboseOption,
    require_folder,
    resolve_profile,
)
from omnicli.commands.report import ReportOption, check_report_option, report_after_run
from omnicli.commands.synth_console import SynthConsole, print_ending, print_summary
from omnicli.errors import UsageError
from omnicli.runtime.console import VERBOSITY, set_verbosity
from omnicli.synth.shard import ShardSpec, ShardSpecError

if TYPE_CHECKING:
    from omnicli.runtime.cluster import RayOptions


def _parse_shard(text: str) -> ShardSpec:
    try:
        return ShardSpec.parse(text)
    except ShardSpecError as exc:
        raise typer.BadParameter(str(exc)) from None


def synth(
    manifest: Annotated[Optional[Path], typer.Argument(
        metavar="MANIFEST", show_default=False,
        help="Seed-TTS meta.lst (utt|prompt_text|prompt_wav|text[|gt_wav]) or JSONL (utt, text, ref_audio, ref_text).",
    )] = None,
    demo: Annotated[bool, typer.Option(
        "--demo", help="Synthesize the demo set shipped in the package (no MANIFEST needed).")] = False,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Output folder: <utt>.wav, results.jsonl, summary.json.")] = Path("out"),
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", min=1, help="Requests in flight at once.")] = 8,
    limit: Annotated[Optional[int], typer.Option(
        "--limit", "-n", min=0, help="Only the first N valid rows of the manifest.")] = None,
    shard: Annotated[Optional[ShardSpec], typer.Option(
        "--shard", metavar="I/N", parser=_parse_shard, show_default=False,
        help="Only shard I of N (I from 0; rows by a hash of the utt), into an --out of its own; "
             "combine with `omni synth-merge`. After --limit.",
    )] = None,
    retry_failed: Annotated[bool, typer.Option(
        "--retry-failed", help="Also redo utterances that failed in an earlier run into the same --out.")] = False,
    max_new_tokens: Annotated[Optional[int], typer.Option(
        "--max-new-tokens", min=1,
        help="Cap on talker tokens per utterance (default: the profile's talker.max_new_tokens).")] = None,
    keep_failed: Annotated[Optional[Path], typer.Option(
        "--keep-failed", envvar="OMNI_FAILED_SPEECH_AUDIO_DIR",
        help="Retain failed/suspect audio + metadata here. Thresholds: --set retention.KEY=VALUE.")] = None,
    allow_outside_paths: Annotated[bool, typer.Option(
        "--allow-outside-paths",
        help="Allow absolute reference paths and paths outside the manifest's folder.")] = False,
    ray: Annotated[bool, typer.Option(
        "--ray", help="Run the rows on a Ray actor pool, one engine per actor "
                      "(needs omnicli\\[ray]; see docs/scale-out.md).")] = False,
    ray_address: Annotated[Optional[str], typer.Option(
        "--ray-address", metavar="auto|HOST:PORT",
        help="With --ray: join this running cluster instead of starting a local one.")] = None,
    engines: Annotated[int, typer.Option("--engines", min=1, help="With --ray: engine actors, one engine each.")] = 1,
    gpus_per_engine: Annotated[float, typer.Option(
        "--gpus-per-engine", min=0,
        help="With --ray: GPUs each engine reserves (above 0: the profile is resolved for cuda).")] = 0.0,
    cpus_per_engine: Annotated[float, typer.Option(
        "--cpus-per-engine", min=0, help="With --ray: CPUs each engine reserves.")] = 1.0,
    report_file: ReportOption = None,
    profile: ProfileOption = None,
    set_: SetOption = None,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Synthesize every line of a manifest to OUT/<utt>.wav.

    Resumable: run it again with the same --out and finished utterances are
    skipped (--retry-failed redoes failed ones). A bad row is reported
    (file:line: reason) and skipped; the rest of the batch goes on. Ctrl-C,
    SIGTERM or SIGHUP stops admitting rows, lets requests in flight finish for a few
    seconds, writes the summary and shuts the engine down; a second Ctrl-C
    exits at once. Exit code: 0 all rows ok, 1 some rows failed or were
    invalid, 2 bad usage or input, 3 the engine failed, 4 the output folder
    could not be written (disk full: unfinished rows stay pending), 130
    interrupted. With --ray the same holds; the rows run on Ray actors that
    write into --out, which must be storage every node shares.
    """
    from omnicli.synth import SynthArgs, SynthJob

    set_verbosity(quiet, verbose)
    check_report_option(report_file)
    if (manifest is None) == (not demo):
        raise UsageError("give a MANIFEST or --demo (exactly one)")
    if demo:
        from omnicli.datasets import demo_manifest_path

        manifest = demo_manifest_path()
    assert manifest is not None
    ray_options = _ray_options(ray, ray_address, engines, gpus_per_engine, cpus_per_engine)
    # With --ray the engines run in actors: a GPU actor resolves for cuda, a CPU-only one for
    # cpu, whatever the coordinator's own machine has.
    platform = ("cuda" if gpus_per_engine > 0 else "cpu") if ray else None
    resolved = resolve_profile(profile, set_, platform=platform)
    if ray and resolved.platform == "cuda" and gpus_per_engine <= 0:
        raise UsageError(f"profile {resolved.name} runs on cuda: give each engine a GPU (--gpus-per-engine 1)")
    require_folder(out, "--out")
    args = SynthArgs(
        manifest=manifest, out=out, resolved=resolved, concurrency=concurrency, limit=limit, shard=shard,
        retry_failed=retry_failed, max_new_tokens=max_new_tokens, keep_failed=keep_failed,
        allow_outside_paths=allow_outside_paths, ray=ray_options,
    )
    console_ = SynthConsole(manifest)
    job = SynthJob(args, console_, console_.stop_request)
    console_.attach(job)
    with console_.signal_scope:  # entered by the job's STARTING phase, once OUT is locked and planned
        report = job.run()  # UsageError (bad manifest, OUT in use, ...): exit 2 (omnicli.cli)
    print_summary(report.summary, out)
    report_after_run(report_file, [out, *([keep_failed] if keep_failed else [])])
    print_ending(report)
    raise typer.Exit(report.exit_code)


def _ray_options(ray: bool, address: str | None, engines: int, gpus: float, cpus: float) -> RayOptions | None:
    """--ray's options (exit 2 with the install hint when Ray is missing); None without --ray."""
    from omnicli.runtime.cluster import EngineResources, RayOptions, import_ray

    if not ray:
        if address is not None or engines != 1 or gpus != 0 or cpus != 1:
            raise UsageError("--ray-address, --engines, --gpus-per-engine and --cpus-per-engine need --ray")
        return None
    import_ray()  # RayUnavailable (exit 2, with the install hint)
    resources = EngineResources(engines=engines, gpus_per_engine=gpus, cpus_per_engine=cpus)
    return RayOptions(resources=resources, address=address, quiet=not VERBOSITY.verbose)
