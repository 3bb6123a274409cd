#!/usr/bin/env bash
# Runs Cairn's benchmark (crates/cairn/benches/throughput.rs) and the same workloads on effectum 0.7
# (bench/effectum-compare) one after the other, then prints them side by side with ratios.
#
# They are two binaries because effectum 0.7 uses rusqlite 0.31 and Cairn uses rusqlite 0.41: their libsqlite3-sys
# versions both declare `links = "sqlite3"`, so they cannot share one dependency graph.
#
# Usage: bench/compare.sh [FILTER...]     (the filters and CAIRN_BENCH_SCALE are passed to both sides)
# With CAIRN_COMPARE_OUT=dir, both sides' tab-separated results are kept there (cairn.tsv, effectum.tsv).
# When the durable group runs, its 8-slot worker row runs once more on each side, untimed, to count the syncs per
# job: with `perf stat` on the fsync and fdatasync tracepoints where perf may read them, else under
# `strace -f -c`, which slows every syscall and so changes how commits group (it counts about half the jobs per sync).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${CAIRN_COMPARE_OUT:-}" ]; then
    out="$CAIRN_COMPARE_OUT"
    mkdir -p "$out"
else
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi

echo "building both sides..."
cairn_bench="$(cd "$root" && cargo bench -p cairn --bench throughput --no-run --quiet --message-format=json |
    sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)"
(cd "$root/bench/effectum-compare" && cargo build --release --quiet)

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
warn_if_building

echo
echo "=== cairn ==="
(cd "$root" && CAIRN_BENCH_TSV="$out/cairn.tsv" "$cairn_bench" --bench "$@")
echo
echo "=== effectum 0.7 ==="
(cd "$root/bench/effectum-compare" && CAIRN_BENCH_TSV="$out/effectum.tsv" ./target/release/effectum-compare "$@")

echo
echo "=== side by side (throughput: cairn / effectum; latency: effectum / cairn; higher favours cairn) ==="
# Each Cairn row and the effectum row it is compared with. Effectum has one durability setting, so both of
# Cairn's one-job-per-call rows are set against its one row.
awk -F'\t' '
    BEGIN {
        pair["baseline/commit"] = "baseline/commit-effectum-settings"
        pair["enqueue/batch-1000"] = "enqueue/batch-1000"
        pair["enqueue/batch-1000-x4"] = "enqueue/batch-1000-x4"
        pair["enqueue/single-x64-full"] = "enqueue/single-x64"
        pair["enqueue/single-x64-normal"] = "enqueue/single-x64"
        pair["dequeue-finish/8x32"] = "dequeue-finish/8x32"
        pair["disk/fdatasync-4k"] = "disk/fdatasync-4k"
        pair["enqueue/one-at-a-time"] = "enqueue/one-at-a-time"
        pair["worker/1-slot"] = "worker/1-slot"
        pair["worker/8-slots"] = "worker/8-slots"
        pair["wakeup/after-enqueue"] = "wakeup/after-enqueue"
        pair["wakeup/from-enqueue-call"] = "wakeup/from-enqueue-call"
        pair["scan/empty"] = "scan/empty"
        pair["scan/1m-future-same-queue"] = "scan/1m-future-same-queue"
        pair["scan/1m-ready-other-queue"] = "scan/1m-ready-other-queue"
        printf "%-28s %10s %10s %8s   %17s %17s %7s\n", "scenario", "cairn/s", "effectum/s", "ratio", "cairn p50/p99 us", "eff. p50/p99 us", "p99 ratio"
    }
    FNR == 1 { next }
    FILENAME ~ /effectum/ { rate[$1] = $4; p50[$1] = $5; p99[$1] = $6; next }
    { order[++n] = $1; crate[$1] = $4; cp50[$1] = $5; cp99[$1] = $6 }
    END {
        for (i = 1; i <= n; i++) {
            c = order[i]; e = pair[c]
            if (e == "" || !(e in rate)) continue
            r = (rate[e] > 0 && crate[c] != "") ? sprintf("%.2fx", crate[c] / rate[e]) : "-"
            lat = ""
            if (cp99[c] != "" && p99[e] != "" && cp99[c] > 0)
                lat = sprintf("%8.0f/%-8.0f %8.0f/%-8.0f %7.1fx", cp50[c], cp99[c], p50[e], p99[e], p99[e] / cp99[c])
            printf "%-28s %10s %10s %8s   %s\n", c, (crate[c] == "" ? "-" : crate[c]), (rate[e] == "" ? "-" : rate[e]), r, lat
        }
    }
' "$out/effectum.tsv" "$out/cairn.tsv"

# Syncs per job: the 8-slot worker row alone, on each side (its fill and the queue's opening included: a few dozen
# syncs).
count_syncs() { # side output-file command...
    local side="$1" file="$2"
    shift 2
    if perf stat -e syscalls:sys_enter_fsync -o /dev/null true > /dev/null 2>&1; then
        (cd "$root" && CAIRN_BENCH_TSV="$out/$side-syncs.tsv" perf stat -e syscalls:sys_enter_fsync \
            -e syscalls:sys_enter_fdatasync -o "$file" "$@" > /dev/null)
        awk '/sys_enter_f/ { gsub(",", "", $1); n += $1 } END { print n + 0 }' "$file"
    else
        (cd "$root" && CAIRN_BENCH_TSV="$out/$side-syncs.tsv" strace -f -c -e trace=fsync,fdatasync \
            -o "$file" "$@" > /dev/null)
        awk '$NF == "fsync" || $NF == "fdatasync" { n += $4 } END { print n + 0 }' "$file"
    fi
}
can_count_syncs() {
    perf stat -e syscalls:sys_enter_fsync -o /dev/null true > /dev/null 2>&1 || command -v strace > /dev/null
}
if grep -q '^worker/8-slots' "$out/cairn.tsv" && can_count_syncs; then
    echo
    echo "=== fsync + fdatasync calls per job, worker/8-slots run again (untimed) ==="
    for side in cairn effectum; do
        if [ "$side" = cairn ]; then
            command=("$cairn_bench" --bench worker/8-slots)
        else
            command=("$root/bench/effectum-compare/target/release/effectum-compare" worker/8-slots)
        fi
        syncs="$(count_syncs "$side" "$out/$side.syncs" "${command[@]}")"
        jobs="$(awk -F'\t' '$1 == "worker/8-slots" { print $2 }' "$out/$side-syncs.tsv")"
        awk -v side="$side" -v syncs="$syncs" -v jobs="$jobs" \
            'BEGIN { printf "%-10s %8d syncs for %8d jobs: %6.1f jobs per sync\n", side, syncs, jobs, jobs / syncs }'
    done
fi
