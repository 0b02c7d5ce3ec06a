#!/usr/bin/env bash
# Regenerates omnicli/data/demo/ (also reachable as datasets/demo/): reference prompts spoken by Debian's flite
# (`apt-get install flite`) in four voices, and the Seed-TTS style meta.lst.
set -euo pipefail
out=$(cd "$(dirname "$0")/.." && pwd)/omnicli/data/demo
mkdir -p "$out/prompts"
say() { flite -voice "$1" -t "$2" -o "$out/prompts/$3.wav"; }
say slt "The birch canoe slid on the smooth planks." slt_birch
say rms "Glue the sheet to the dark blue background." rms_glue
say awb "It is easy to tell the depth of a well." awb_well
say kal "These days a chicken leg is a rare dish." kal_chicken
