"""Resolves the CUDA install set for Linux x86_64 without installing it, and fails when it does not
resolve or when vLLM and vLLM-Omni disagree on major.minor (vLLM-Omni's own
`warn_if_misaligned_vllm_version` rule). Needs the PyPI registry; no GPU. Run by .ci/run.

    python scripts/check_cuda_stack.py [--python-version 3.11]

The set is what scripts/setup.sh installs on a CUDA machine: omnicli's dependencies and its `cuda`
extra (pyproject.toml) resolved by pip (`--dry-run --report`, `--platform`, `--python-version`,
`--only-binary=:all:`, `--isolated`: the machine's own pip configuration does not take part), and
vLLM-Omni at setup.sh's pin without its dependencies (as setup.sh installs it); the transformers
resolved must also be within what that vLLM-Omni declares.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parent.parent
# A CUDA machine of today: glibc 2.35 (Ubuntu 22.04) accepts every manylinux tag up to 2_35.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


def vllm_omni_pin(setup: Path = REPO / "scripts" / "setup.sh") -> str:
    found = re.search(r'"vllm-omni==([^"]+)"', setup.read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit(f"{setup}: no vllm-omni==VERSION pin")
    return found.group(1)


def install_set(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["cuda"]]


def resolve(requirements: list[str], python_version: str, *, no_deps: bool = False) -> list[dict]:
    """pip's report entries of the resolution; SystemExit with pip's reason when it does not resolve."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet", "--ignore-installed",
               "--report", str(report), "--target", str(Path(tmp) / "target"), "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp",
               *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
               *(["--no-deps"] if no_deps else []), *requirements]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("the CUDA install set does not resolve:\n" + (done.stderr or done.stdout)[-3000:])
        return json.loads(report.read_text(encoding="utf-8"))["install"]


def versions(items: list[dict]) -> dict[str, str]:
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in items}


def major_minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-version", default="3.11")
    args = parser.parse_args()
    requirements = install_set()
    print("resolving for Linux x86_64, CPython", args.python_version, ":", " ".join(requirements), flush=True)
    resolved = versions(resolve(requirements, args.python_version))
    omni_item = resolve([f"vllm-omni=={vllm_omni_pin()}"], args.python_version, no_deps=True)[0]
    vllm, omni, transformers = resolved.get("vllm"), omni_item["metadata"]["version"], resolved.get("transformers")
    print(f"vllm {vllm}, vllm-omni {omni} (no deps), torch {resolved.get('torch')}, transformers {transformers}")
    if vllm is None or transformers is None:
        print("error: the resolution has no vllm or no transformers", file=sys.stderr)
        return 1
    if major_minor(vllm) != major_minor(omni):
        print(f"error: vLLM {vllm} beside vLLM-Omni {omni}: major.minor differ (vLLM-Omni warns and breaks)",
              file=sys.stderr)
        return 1
    wanted = [Requirement(r) for r in omni_item["metadata"].get("requires_dist", [])]
    for req in wanted:
        if req.name.lower() == "transformers" and req.marker is None and transformers not in req.specifier:
            print(f"error: transformers {transformers} is outside vLLM-Omni {omni}'s {req}", file=sys.stderr)
            return 1
    print("ok: the CUDA install set resolves to an aligned vLLM / vLLM-Omni")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
