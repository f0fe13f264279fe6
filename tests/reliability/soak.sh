#!/usr/bin/env bash
# The soak (issue 8, point 4), run by hand: minferd_soak drives a minferd
# with the shipped model for SECONDS (default 600) with the mixed workload of
# the load test (plain and streamed completions, cancelled streams, early
# drops, a queue that overflows) and samples RSS, descriptors and outcomes
# every 5 s; then plot_soak.py draws docs/soak.png from the CSV when
# matplotlib is installed (apt-get install python3-matplotlib).
#   tests/reliability/soak.sh BUILD_DIR [SECONDS] [CLIENTS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: soak.sh BUILD_DIR [SECONDS] [CLIENTS]}
seconds=${2:-600}
clients=${3:-16}
csv=$root/docs/soak.csv
mkdir -p "$root/docs"
"$build/tests/reliability/minferd_soak" --seconds "$seconds" --clients "$clients" --csv "$csv" \
  --token-delay-ms 1 --queue-size 8 | tee "$root/docs/soak-summary.txt"
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$here/plot_soak.py" "$csv" "$root/docs/soak.png"
else
  echo "soak.sh: no matplotlib; the CSV is $csv" >&2
fi
