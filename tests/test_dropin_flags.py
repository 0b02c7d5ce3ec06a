"""Issue 32 item 1 (and item 9's bare --profile): every flag of vLLM-Omni's `vllm bench serve --omni`,
read from the parser in the installed vLLM-Omni wheel, is in omni's table (omnicli/benchmark/vllm_flags.py)
and `omni bench` takes it: an omni option (implemented), accepted and reported once, or refused with its
reason; never "No such option". A flag vLLM-Omni adds upstream fails here first."""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from omnicli.benchmark.vllm_flags import lookup, strip_reported, table
from omnicli.cli import app
from tests.fakes import write_manifest

runner = CliRunner()


def vllm_omni_parser() -> argparse.ArgumentParser:
    """`vllm bench serve --omni`'s parser as vLLM-Omni builds it (entrypoints/cli/benchmark/main.py: the
    `--omni` switch, vLLM's serve arguments, then vLLM-Omni's). cli_args.py is loaded from the wheel's
    file: its package's __init__ imports the API server, which needs torchvision (not installed here)."""
    pytest.importorskip("vllm_omni", reason="vLLM-Omni is not installed")
    from vllm.benchmarks.serve import add_cli_args

    path = Path(str(importlib.metadata.distribution("vllm-omni").locate_file(
        "vllm_omni/entrypoints/cli/benchmark/cli_args.py")))
    spec = importlib.util.spec_from_file_location("vllm_omni_bench_cli_args", path)
    assert spec is not None and spec.loader is not None
    cli_args = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli_args)
    parser = argparse.ArgumentParser()
    parser.add_argument("--omni", action="store_true")
    add_cli_args(parser)
    cli_args.add_omni_args(parser)
    cli_args.extend_omni_choices(parser)
    return parser


def _nargs(action: argparse.Action) -> object:
    if action.nargs == 0:
        return 0
    return 1 if action.nargs is None else action.nargs


def _value(action: argparse.Action) -> list[str]:
    """One value argparse would take for the flag (the first choice, else a number, else a word)."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(next(iter(action.choices)))]
    return ["1"] if action.type in (int, float) else ["x"]


@pytest.fixture(scope="module")
def vllm_actions() -> dict[str, argparse.Action]:
    parser = vllm_omni_parser()
    return {flag: action for action in parser._actions for flag in action.option_strings
            if flag.startswith("--") and flag != "--help"}


def bench_command():
    return typer.main.get_command(app).commands["bench"]  # type: ignore[attr-defined]


def test_every_vllm_omni_flag_is_in_the_table_with_its_arity(vllm_actions):
    missing = sorted(flag for flag in vllm_actions if lookup(flag) is None)
    assert not missing, f"vLLM-Omni flags omni bench does not know (add them to vllm_flags.py): {missing}"
    wrong = {flag: (lookup(flag).nargs, _nargs(a)) for flag, a in vllm_actions.items()  # type: ignore[union-attr]
             if lookup(flag).nargs != _nargs(a)}  # type: ignore[union-attr]
    assert not wrong, f"(table, vLLM-Omni) arity: {wrong}"
    assert len(vllm_actions) > 150  # the whole parser was read, not a stub


def test_omni_bench_takes_every_flag_it_does_not_refuse(vllm_actions):
    command = bench_command()
    own = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for flag, action in sorted(vllm_actions.items()):
        entry = lookup(flag)
        assert entry is not None
        if entry.status == "implemented":
            assert flag in own, f"{flag}: the table says implemented, omni bench has no such option"
        if entry.status == "refused":
            continue
        args = [flag, *_value(action)]
        ctx = command.make_context("bench", list(args))  # click's parse: a NoSuchOption fails the test
        assert ctx.params is not None


def test_the_table_names_no_flag_vllm_omni_lacks(vllm_actions):
    assert not sorted(set(table()) - set(vllm_actions))


def test_a_bare_profile_is_refused_with_the_reason(vllm_actions):
    assert lookup("--profile").status == "refused"  # type: ignore[union-attr]
    for args in (["--profile", "--num-prompts", "2"], ["--num-prompts", "2", "--profile"]):
        result = runner.invoke(app, ["bench", *args])
        assert result.exit_code == 2
        assert "--profile needs a value" in result.output and "torch profiler" in result.output


def test_reported_flags_are_taken_out_with_their_values():
    stripped = strip_reported(["--omni", "--header", "a=1", "b=2", "-n", "2", "--hf-split=test", "--no-stream",
                               "--omni-request-timeout-s", "-1", "--goodput", "e2el:1", "m.lst"],
                              own={"--goodput", "-n"})
    assert stripped.args == ["-n", "2", "--goodput", "e2el:1", "m.lst"]
    flags = [f for group in stripped.given.values() for f in group]
    assert flags == ["--omni", "--header", "--hf-split", "--no-stream", "--omni-request-timeout-s"]


def test_a_bench_tts_command_line_runs_and_says_once_what_does_not_apply(token_engine, tmp_path):
    # what bench_tts.py's build_bench_args puts after `vllm bench serve` for a voice_clone run, with the
    # vLLM-Omni TTS flags of issue 32 added
    m = write_manifest(tmp_path, ["one two", "three"])
    line = ["--omni", "--host", "localhost", "--port", "8000", "--model", "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
            "--backend", "openai-audio-speech", "--endpoint", "/v1/audio/speech", "--num-prompts", "2",
            "--num-warmups", "0",
            "--percentile-metrics", "ttft,e2el,audio_rtf,audio_ttfp,audio_duration,audio_underrun",
            "--trust-remote-code", "--max-concurrency", "1", "--request-rate", "inf",
            "--save-result", "--result-dir", str(tmp_path), "--result-filename", "r.json",
            "--seed-tts-file-ref-audio", "--seed-tts-inline-ref-audio", "--seed-tts-system-prompt", "be brief",
            "--seed-tts-wer-save-items", "--seed-tts-reference-as-input", "--print-stage",
            "--omni-request-timeout-s", "30", "--no-stream", "--request-id-prefix", "bench-", "--ignore-eos",
            "--header", "X-A=1", "X-B=2", "--insecure", "--hf-name", "x/y", "--hf-split", "test", str(m)]
    result = runner.invoke(app, ["bench", *line])
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["completed"] == 2
    for flag in ("--omni", "--header", "--insecure", "--no-stream", "--ignore-eos", "--print-stage",
                 "--request-id-prefix", "--omni-request-timeout-s", "--hf-name", "--hf-split",
                 "--seed-tts-wer-save-items", "--seed-tts-reference-as-input", "--seed-tts-system-prompt"):
        assert len(re.findall(re.escape(flag) + r"(?![\w-])", result.output)) == 1, (flag, result.output)
    assert "--trust-remote-code: accepted and never honoured" in result.output


def test_seed_tts_root_reads_the_locale_folder_instead_of_dataset_path(tmp_path):
    from types import SimpleNamespace

    from omnicli.benchmark.options import vllm_compat

    (tmp_path / "root" / "zh").mkdir(parents=True)
    compat = vllm_compat("seed-tts", tmp_path / "root", "zh", None, None, None, None, sampling={}, ignored={})
    assert compat.manifest == tmp_path / "root" / "zh" / "meta.lst"
    assert SimpleNamespace  # (the option itself is checked by test_omni_bench_takes_every_flag_*)
