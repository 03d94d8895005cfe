#!/bin/bash
# Times rfx (`rfx bench --threads T`: its batch medians through the checked call, `batch_p50_s`,
# and through the pre-bound call, `args_batch_p50_s`) and the peers script's one-thread gcc C
# (build.py's driver, a direct call through a function pointer) side by side, alternating round
# by round (rfx at each thread count, then gcc), and prints the medians and the medians of the
# per-round ratios: gcc's time over rfx's (above 1: rfx is faster), checked and pre-bound, and,
# with several thread counts, rfx's checked time on the first over its time on each other.
# Usage: benches/peers-one/compare.sh ROUNDS K:rfx_kernel... (e.g. 3 K4:fused_chain
# K5:chain10 K6:pid_clip K7:value_and_grad_sum_sq); SIZES (default "1024 65536 1048576"),
# THREADS (default "1"; e.g. "1 2") and RFX (default target/release/rfx) from the environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
RFX=${RFX:-target/release/rfx}
SIZES=${SIZES:-"1024 65536 1048576"}
THREADS=${THREADS:-1}
DRIVER=$(python3 benches/peers-one/build.py target/peers-one | tail -1)
json=$(mktemp)
trap 'rm -f "$json"' EXIT
rounds=$1; shift
for n in $SIZES; do for kk in "$@"; do
  k=${kk%%:*}; name=${kk#*:}; rfx=(); gcc=()
  for _ in $(seq "$rounds"); do
    round=""
    for t in $THREADS; do
      "$RFX" bench --no-baselines --threads "$t" --size "$n" --filter "$name" --json-out "$json" >/dev/null 2>&1
      round+="$(python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['results']:
    if r['kernel'] == sys.argv[2]:
        print(f\"{r['batch_p50_s'] * 1e6}:{r['args_batch_p50_s'] * 1e6}\")
" "$json" "$name"),"
    done
    rfx+=("${round%,}")
    gcc+=("$("$DRIVER" one "${k#K}" "$n" | sed 's/.*med_us=\([0-9.]*\).*/\1/')")
  done
  python3 -c "
import statistics as s, sys
threads = sys.argv[6].split()
# rounds[r][t] = (checked, pre-bound) in µs
rounds = [[tuple(float(v) for v in x.split(':')) for x in r.split(',')] for r in sys.argv[1].split()]
g = [float(x) for x in sys.argv[2].split()]
line = f'{sys.argv[3]} {sys.argv[4]} n={sys.argv[5]}: gcc {s.median(g):.3f} us'
for i, t in enumerate(threads):
    for j, path in enumerate(('checked', 'pre-bound')):
        r = [round[i][j] for round in rounds]
        ratios = [gi / ri[i][j] for gi, ri in zip(g, rounds)]
        line += f'; rfx {t} thread(s) {path} {s.median(r):.3f} us, gcc/rfx {s.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})'
    if i > 0:
        scale = [ri[0][0] / ri[i][0] for ri in rounds]
        line += f', rfx {threads[0]}/{t} threads {s.median(scale):.2f} ({min(scale):.2f}-{max(scale):.2f})'
print(line)
" "${rfx[*]}" "${gcc[*]}" "$k" "$name" "$n" "$THREADS"
done; done
