#!/bin/bash
# Times rfx (`rfx bench --threads 1`, its batch median) and the peers script's one-thread gcc C
# (build.py's driver) side by side, alternating round by round, and prints the medians and
# gcc's time over rfx's (above 1: rfx is faster).
# Usage: benches/peers-one/compare.sh ROUNDS K:rfx_kernel... (e.g. 3 K4:fused_chain
# K5:chain10 K6:pid_clip K7:value_and_grad_sum_sq); SIZES (default "1024 65536 1048576") and
# RFX (default target/release/rfx) from the environment.
set -euo pipefail
cd "$(dirname "$0")/../.."
RFX=${RFX:-target/release/rfx}
SIZES=${SIZES:-"1024 65536 1048576"}
DRIVER=$(python3 benches/peers-one/build.py target/peers-one | tail -1)
rounds=$1; shift
for n in $SIZES; do for kk in "$@"; do
  k=${kk%%:*}; name=${kk#*:}; rfx=(); gcc=()
  for _ in $(seq "$rounds"); do
    rfx+=("$("$RFX" bench --no-baselines --threads 1 --size "$n" --filter "$name" 2>/dev/null | awk -v nm="$name" '$1==nm {print $9}')")
    gcc+=("$("$DRIVER" one "${k#K}" "$n" | sed 's/.*med_us=\([0-9.]*\).*/\1/')")
  done
  python3 -c "
import statistics as s, sys
r = [float(x) for x in sys.argv[1].split()]; g = [float(x) for x in sys.argv[2].split()]
print(f'{sys.argv[3]} {sys.argv[4]} n={sys.argv[5]}: rfx {s.median(r):.3f} us, gcc {s.median(g):.3f} us, gcc/rfx {s.median(g)/s.median(r):.2f}')
" "${rfx[*]}" "${gcc[*]}" "$k" "$name" "$n"
done; done
