"""Resolves the CUDA install set for Linux x86_64 without installing it, and fails when it does not
resolve or when vLLM and vLLM-Omni disagree on major.minor (vLLM-Omni's own
`warn_if_misaligned_vllm_version` rule). Needs the PyPI registry; no GPU. Run by .ci/run.

    python scripts/check_cuda_stack.py [--python-version 3.11]

The set is what scripts/setup.sh installs on a CUDA machine: omnicli's dependencies, its `cuda`
extra (pyproject.toml) and vLLM-Omni at setup.sh's pin, resolved by pip (`--dry-run --report`,
`--platform`, `--python-version`, `--only-binary=:all:`, `--isolated`: the machine's own pip
configuration does not take part).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

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
    return [*project["dependencies"], *project["optional-dependencies"]["cuda"], f"vllm-omni=={vllm_omni_pin()}"]


def resolve(requirements: list[str], python_version: str) -> dict[str, str]:
    """{name: version} of pip's resolution; SystemExit with pip's reason when it does not resolve."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--quiet", "--ignore-installed",
               "--report", str(report), "--target", str(Path(tmp) / "target"), "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp",
               *(arg for platform in PLATFORMS for arg in ("--platform", platform)), *requirements]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit("the CUDA install set does not resolve:\n" + (done.stderr or done.stdout)[-3000:])
        items = json.loads(report.read_text(encoding="utf-8"))["install"]
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
    versions = resolve(requirements, args.python_version)
    vllm, omni = versions.get("vllm"), versions.get("vllm-omni")
    print(f"vllm {vllm}, vllm-omni {omni}, torch {versions.get('torch')}, transformers {versions.get('transformers')}")
    if vllm is None or omni is None:
        print("error: the resolution has no vllm or no vllm-omni", file=sys.stderr)
        return 1
    if major_minor(vllm) != major_minor(omni):
        print(f"error: vLLM {vllm} beside vLLM-Omni {omni}: major.minor differ (vLLM-Omni warns and breaks)",
              file=sys.stderr)
        return 1
    print("ok: the CUDA install set resolves to an aligned vLLM / vLLM-Omni")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
