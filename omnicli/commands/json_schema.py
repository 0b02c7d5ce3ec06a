"""`omni schema KIND`: the JSON Schema of a file omni writes, for downstream validation."""

from __future__ import annotations

import json
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from pydantic import BaseModel


class Kind(str, Enum):
    results = "results"
    summary = "summary"
    bench = "bench"
    bench_run = "bench-run"
    eval = "eval"


def document_schema(kind: Kind) -> dict:
    """JSON Schema (draft 2020-12, as pydantic emits it) of one kind of file."""
    from omnicli.benchmark.result_models import BenchDocument, VllmRunResult
    from omnicli.evaluation.summaries import EvalSummary
    from omnicli.synth.results import SynthResult, SynthSummary

    models: dict[Kind, type[BaseModel]] = {Kind.results: SynthResult, Kind.summary: SynthSummary,
                                           Kind.bench: BenchDocument, Kind.bench_run: VllmRunResult,
                                           Kind.eval: EvalSummary}
    model = models[kind]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **model.model_json_schema()}


def schema(
    kind: Annotated[
        Kind,
        typer.Argument(
            help="results (results.jsonl rows), summary (summary.json), bench (result file), bench-run (a "
                 "--save-result file), eval (eval-wer's wer_summary.json and eval's eval_summary.json)."
        ),
    ],
) -> None:
    """Print the JSON Schema of a file omni writes (draft 2020-12)."""
    typer.echo(json.dumps(document_schema(kind), indent=2))  # plain text: no terminal styling in what tools read
