#!/usr/bin/env bash
# Proves that a normal (non-editable) install works away from the repository:
# builds the wheel, installs it into a fresh venv in a temp folder and runs
# `omni profiles list`, `omni models list`, `omni datasets path demo` and a
# short `omni synth --demo` from a folder where the repo is not on sys.path.
#
# torch, vLLM and the other dependencies are not reinstalled (that would take
# minutes and need the network): the fresh venv sees the repo venv's
# site-packages through a plain path in a .pth file. Such a path's own .pth
# files are not processed, so the repo's editable install of omnicli stays
# invisible and only the wheel's copy can be imported.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${OMNI_VENV:-$repo/.venv}
py="$venv/bin/python"
work=$(mktemp -d "${TMPDIR:-/tmp}/omni-install-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { printf '[check_install] %s\n' "$*"; }

say "building the wheel"
"$py" -m pip wheel --no-deps --no-build-isolation -q -w "$work/dist" "$repo" >/dev/null
wheel=$(ls "$work"/dist/omnicli-*.whl)
# Build leftovers must not be what gets imported later.
rm -rf "$repo/build" "$repo"/omnicli.egg-info

say "installing $(basename "$wheel") into a fresh venv"
base=$("$py" -c 'import sys; print(sys._base_executable)')
"$base" -m venv --without-pip "$work/venv"
site_new=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
site_old=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$py" -m pip --python "$work/venv/bin/python" install --no-deps --no-index -q "$wheel"
echo "$site_old" > "$site_new/omni-check-deps.pth"

cd "$work"  # not the repo: its folder must not be importable
export PYTHONPATH="" PYTHONNOUSERSITE=1 OMNI_CACHE_DIR="${OMNI_CACHE_DIR:-$repo/.cache/omni-test}"
unset OMNI_PROFILES_DIR
omni="$work/venv/bin/omni"
where=$("$work/venv/bin/python" -c 'import omnicli; print(omnicli.__file__)')
case "$where" in
  "$site_new"/*) say "omnicli imported from $where" ;;
  *) say "FAIL: omnicli imported from $where, not from the installed wheel"; exit 1 ;;
esac
"$omni" --version
presets=$("$omni" profiles list)
printf '%s\n' "$presets"
case "$presets" in *cpu*default*) ;; *) say "FAIL: omni profiles list does not show the shipped presets"; exit 1 ;; esac
"$omni" models list
demo=$("$omni" datasets path demo)
case "$demo" in "$site_new"/*) ;; *) say "FAIL: demo set at $demo, not in the installed package"; exit 1 ;; esac
"$omni" synth --demo --out "$work/demo" --limit 2 --concurrency 2 --profile cpu
test -s "$work/demo/summary.json" && ls "$work/demo"/*.wav >/dev/null
say "ok: the wheel works outside the repository"
