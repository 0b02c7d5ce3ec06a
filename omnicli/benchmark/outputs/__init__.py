"""How `omni bench` results are shown and written: small output plug-ins, each `finalize(report, passes)`.

- `table.TableOutput`: the Rich tables (the console's default); `text.TextOutput`: `Label: value` lines;
  `jsonfile.JsonOutput`: the document on stdout (`--format table|text|json`)
- `jsonfile.JsonFile`: the summary file; `csvfile.CsvFile`: `--csv`; `plot.PlotFile`: `--plot`
- `vllm.VllmOutput`: `--save-result`'s vLLM-shaped per-run files (they need the live passes)

`finalize.ReportPlan` (built by option parsing) chooses the list; `finalize.report_passes` runs it at the end
of a bench; `omni bench-export` runs the same outputs over a saved result (`BenchDocument.load`).
"""

from omnicli.benchmark.outputs.base import BenchOutput, OutputFormat
from omnicli.benchmark.outputs.finalize import CONSOLE_OUTPUTS, ReportPlan, report_passes
from omnicli.benchmark.outputs.vllm import VllmFiles

__all__ = ["CONSOLE_OUTPUTS", "BenchOutput", "OutputFormat", "ReportPlan", "VllmFiles", "report_passes"]
