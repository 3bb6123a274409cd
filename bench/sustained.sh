#!/usr/bin/env bash
# The long-horizon runs of BENCHMARKS.md: `cairn bench --scenario sustained` on an embedded queue, default options,
# keeping 1,000 jobs ready, one cairn::Worker of 128 and then 32 slots whose handler works 1 ms, each for DURATION,
# on PostgreSQL (a fresh database each run) and on a fresh SQLite file. Each run's samples (JSON lines), plot (SVG)
# and report go to OUT.
#
# Usage: bench/sustained.sh [OUT]            (OUT: bench-sustained/ by default)
# Environment: DURATION (10m), SLOTS ("128 32"), BACKENDS ("postgres sqlite"),
#   CAIRN_BENCH_POSTGRES_URL: a PostgreSQL server to create the databases on (postgres://user@host:port/db);
#   without it, a private cluster is started under OUT with scripts/postgres and stopped at the end.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(realpath -m "${1:-bench-sustained}")"
duration="${DURATION:-10m}"
mkdir -p "$out"
# psql's notices ("does not exist, skipping") are noise here.
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"

echo "building cairn (release)..."
(cd "$root" && cargo build --release --quiet -p cairn-cli)
cairn="$root/target/release/cairn"

# shellcheck source=bench/common.sh
source "$root/bench/common.sh"
warn_if_building

url="${CAIRN_BENCH_POSTGRES_URL:-}"
started_cluster=""
if [[ " ${BACKENDS:-postgres sqlite} " == *" postgres "* ]] && [ -z "$url" ]; then
    rm -rf "$out/cluster"
    url="$("$root/scripts/postgres" start "$out/cluster")"
    started_cluster="$out/cluster"
fi
cleanup() {
    if [ -n "$started_cluster" ]; then
        "$root/scripts/postgres" stop "$started_cluster" || true
    fi
}
trap cleanup EXIT

for slots in ${SLOTS:-128 32}; do
    for backend in ${BACKENDS:-postgres sqlite}; do
        name="$backend-$slots"
        case "$backend" in
        postgres)
            database="cairn_sustained_$slots"
            psql "$url" -qc "DROP DATABASE IF EXISTS $database" -c "CREATE DATABASE $database" >/dev/null
            db="${url%/*}/$database"
            ;;
        sqlite)
            rm -f "$out/$name.db" "$out/$name.db-wal" "$out/$name.db-shm"
            db="$out/$name.db"
            ;;
        *)
            echo "unknown backend $backend (postgres or sqlite)" >&2
            exit 2
            ;;
        esac
        echo "== $name: $duration"
        "$cairn" bench --db "$db" --scenario sustained --duration "$duration" --clients 1 --in-flight "$slots" \
            --record "$out/$name.jsonl" --plot "$out/$name.svg" > "$out/$name.txt"
        sed -n '/^sustained:/,$p' "$out/$name.txt"
        case "$backend" in
        postgres) psql "$url" -qc "DROP DATABASE IF EXISTS $database" >/dev/null ;;
        sqlite) rm -f "$out/$name.db" "$out/$name.db-wal" "$out/$name.db-shm" ;;
        esac
    done
done
echo "records and plots in $out"
