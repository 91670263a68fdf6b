#!/usr/bin/env bash
# Capture a profile of one pipelined step, in the spirit of the pipelining tutorial's
# scripts/profile.sh: one session run with a single pipeline pass and a small gradient
# accumulation count, reports switched on with POPLAR_ENGINE_OPTIONS, and synthetic data so
# host I/O stays out of the execution trace.
#
#   bash examples/profile_step3.sh                    # needs the import hook, or:
#   python -m ipu_emulator run --tf1 examples/profile_step3.sh
#
# The report (the emulator's simulated execution trace, for https://ui.perfetto.dev, and a
# text summary) goes to ${REPORT_DIR:-./profile_step3_pipelining}.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
report_dir="${REPORT_DIR:-./profile_step3_pipelining}"
export POPLAR_ENGINE_OPTIONS="{\"autoReport.all\":\"true\",\"autoReport.directory\":\"${report_dir}\"}"
export TF_POPLAR_FLAGS="${TF_POPLAR_FLAGS:-} --use_synthetic_data"
python3 "${here}/pipelining_step3.py" --steps 1 --repeat-count 1 --batches-to-accumulate 4 "$@"
