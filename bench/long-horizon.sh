#!/usr/bin/env bash
# Runs adapters of the long-horizon PostgreSQL queue benchmark (hardbyte/postgresql-job-queue-benchmarking, whose
# contract bench/cairn-adapter speaks) side by side on one PostgreSQL server, without that project's Docker harness:
# each adapter in turn, on a fresh database of its own, for DURATION, with the same settings, alternating the order
# from round to round so that neither always runs first. Each run's JSON lines go to OUT, and a table of the runs
# (bench/long-horizon-summary.py) ends the output.
#
# Usage: bench/long-horizon.sh OUT [NAME=COMMAND ...]
#   Cairn's adapter (built here) always runs, as `cairn`. Each NAME=COMMAND adds another adapter, a program that
#   speaks the same contract: for example awa=/path/to/awa-bench, built by its own project's instructions.
# Environment: DURATION (seconds, 600), ROUNDS (1), WORKERS ("32 128"), PRODUCER_MODE (depth-target),
#   TARGET_DEPTH (1000), PRODUCER_RATE (800, with PRODUCER_MODE=fixed), JOB_WORK_MS (1), SAMPLE_EVERY_S (5);
#   CAIRN_BENCH_POSTGRES_URL: a server to create the databases on (postgres://user@host:port/db); without it, a
#   private cluster is started under OUT with scripts/postgres, with the benchmark's own postgres.conf settings
#   for memory and connections, and stopped at the end.
set -euo pipefail

if [ $# -lt 1 ]; then
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "$1")"
shift
mkdir -p "$out"
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

echo "building cairn-adapter (release)..."
(cd "$root" && cargo build --release --quiet -p cairn-adapter)
names=(cairn)
commands=("$root/target/release/cairn-adapter")
for spec in "$@"; do
    name="${spec%%=*}"
    if [ "$name" = "$spec" ] || ! [[ "$name" =~ ^[a-z][a-z0-9_]*$ ]]; then
        echo "expected NAME=COMMAND with a lower-case NAME, got: $spec" >&2
        exit 2
    fi
    names+=("$name")
    commands+=("${spec#*=}")
done

# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
warn_if_building

url="${CAIRN_BENCH_POSTGRES_URL:-}"
started_cluster=""
if [ -z "$url" ]; then
    rm -rf "$out/cluster"
    "$root/scripts/postgres" start "$out/cluster" >/dev/null
    "$root/scripts/postgres" down "$out/cluster" fast
    # The benchmark's postgres.conf: room for every adapter's pool, and its memory settings.
    sed -i 's/-c max_connections=200 -c shared_buffers=128MB/-c max_connections=400 -c shared_buffers=256MB -c work_mem=8MB -c maintenance_work_mem=128MB/' \
        "$out/cluster/options"
    "$root/scripts/postgres" up "$out/cluster"
    url="$(cat "$out/cluster/url")"
    started_cluster="$out/cluster"
fi
running=""
cleanup() {
    if [ -n "$running" ]; then
        kill -TERM "$running" 2>/dev/null || true
    fi
    if [ -n "$started_cluster" ]; then
        "$root/scripts/postgres" stop "$started_cluster" || true
    fi
}
trap cleanup EXIT

duration="${DURATION:-600}"
rounds="${ROUNDS:-1}"
count=${#names[@]}
for workers in ${WORKERS:-32 128}; do
    for ((round = 1; round <= rounds; round++)); do
        for ((k = 0; k < count; k++)); do
            # Round r starts with adapter r-1: over the rounds, each runs first as often as the others.
            i=$(((k + round - 1) % count))
            name="${names[$i]}"
            run="$name-w$workers-r$round"
            database="${name}_bench_w${workers}_r${round}"
            psql "$url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" >/dev/null
            echo "== $run: ${duration} s"
            # What the benchmark's harness sets too (bench_harness/adapters.py), MALLOC_ARENA_MAX included.
            env DATABASE_URL="${url%/*}/$database" SCENARIO=long_horizon \
                PRODUCER_MODE="${PRODUCER_MODE:-depth-target}" TARGET_DEPTH="${TARGET_DEPTH:-1000}" \
                PRODUCER_RATE="${PRODUCER_RATE:-800}" PRODUCER_PACING=adapter WORKER_COUNT="$workers" \
                JOB_WORK_MS="${JOB_WORK_MS:-1}" JOB_PAYLOAD_BYTES=256 SAMPLE_EVERY_S="${SAMPLE_EVERY_S:-5}" \
                BENCH_INSTANCE_ID=0 MALLOC_ARENA_MAX=2 \
                ${commands[$i]} > "$out/$run.jsonl" 2> "$out/$run.log" < /dev/null &
            running=$!
            sleep "$duration"
            kill -TERM "$running" 2>/dev/null || true
            status=0
            wait "$running" || status=$?
            running=""
            if [ "$status" -ne 0 ]; then
                echo "warning: $run exited with status $status (see $out/$run.log)" >&2
            fi
            psql "$url" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null
        done
    done
done
python3 "$root/bench/long-horizon-summary.py" "$out"/*.jsonl | tee "$out/summary.md"
