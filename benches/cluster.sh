#!/usr/bin/env bash
# Runs the cluster benchmark (benches/cluster.rs) against N `agentry serve` processes on a
# fresh PostgreSQL database:
#
#   benches/cluster.sh N [generator arguments...]
#   benches/cluster.sh 2 --connections 8 --warmup 2 --duration 8 --lag-probes 4
#
# It builds the release binaries, creates the database `agentry_bench_<random>` on the
# server of BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable),
# migrates it once, starts the N processes on core 0 (ports BENCH_BASE_PORT, default 18081,
# and up), waits for each one's /readyz, runs the generator on core 1 and, at exit, stops the
# processes and drops the database.
#
# The processes get a configuration with two echo agents: `echo` (8 characters per delta,
# no pause: the throughput turns) and `echo-paced` (8 characters per delta, a pause of
# BENCH_PROBE_DELAY_MS, default 5 ms, before each: the lag probes, so their events are
# committed one by one while a follower is connected). BENCH_PROBE_AGENT=echo makes the probes
# use the immediate agent instead. CARGO_TARGET_DIR is honoured.
set -euo pipefail

if [[ $# -lt 1 || ! $1 =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 N [generator arguments...]" >&2
    exit 2
fi
processes=$1
shift

cd "$(dirname "$0")/.."
target_dir=${CARGO_TARGET_DIR:-target}
pg_url=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
base_port=${BENCH_BASE_PORT:-18081}
probe_agent=${BENCH_PROBE_AGENT:-echo-paced}
probe_delay_ms=${BENCH_PROBE_DELAY_MS:-5}
admin_secret=bench

# Build, and find the generator among the artifacts cargo reports.
build_log=$(mktemp)
cargo build --release --bins --benches --message-format=json-render-diagnostics >"$build_log"
generator=$(sed -n 's/.*"kind":\["bench"\][^}]*"name":"cluster".*"executable":"\([^"]*\)".*/\1/p' "$build_log" | tail -n 1)
rm -f "$build_log"
if [[ -z $generator || ! -x $generator ]]; then
    generator=$(find "$target_dir/release/deps" -maxdepth 1 -type f -name 'cluster-*' -perm -u+x \
        -printf '%T@ %p\n' | sort -n | tail -n 1 | cut -d' ' -f2-)
fi
agentry=$target_dir/release/agentry
[[ -x $agentry ]] || { echo "no $agentry after the build" >&2; exit 1; }
[[ -n $generator && -x $generator ]] || { echo "no cluster generator after the build" >&2; exit 1; }

# The bench database's URL: the server's URL with its database name replaced.
database=agentry_bench_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
scheme=${pg_url%%://*}
rest=${pg_url#*://}
query=
if [[ $rest == *\?* ]]; then
    query="?${rest#*\?}"
    rest=${rest%%\?*}
fi
authority=${rest%%/*}
database_url="$scheme://$authority/$database$query"

work=$(mktemp -d)
pids=()
cleanup() {
    local status=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    for ((i = 0; i < ${#pids[@]}; i++)); do
        local log=$work/serve-$i.log
        [[ -f $log ]] || continue
        local noisy
        noisy=$(grep -c -E 'WARN|ERROR' "$log" || true)
        echo "process $i: $noisy log lines at warn or above" >&2
        if [[ $noisy -gt 0 || $status -ne 0 ]]; then
            tail -n 20 "$log" | sed "s/^/  [$i] /" >&2
        fi
    done
    psql "$pg_url" -qAt -v ON_ERROR_STOP=1 \
        -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null || true
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql "$pg_url" -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE $database" >/dev/null

cat >"$work/agentry.toml" <<EOF
[[agents]]
name = "echo"
provider = "echo"
model = "echo"
chunk_size = 8
delay_ms = 0

[[agents]]
name = "echo-paced"
provider = "echo"
model = "echo"
chunk_size = 8
delay_ms = $probe_delay_ms
EOF

export AGENTRY_CONFIG=$work/agentry.toml
export AGENTRY__DATABASE__URL=$database_url
export AGENTRY__AUTH__ADMIN_SECRET=$admin_secret
# Fixed keys: the processes need not race to store generated ones, nor warn about them.
AGENTRY__AUTH__JWT_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
AGENTRY__SECRETS__KEY=$(head -c 32 /dev/urandom | base64)
export AGENTRY__AUTH__JWT_SECRET AGENTRY__SECRETS__KEY
export RUST_LOG=warn

"$agentry" migrate >/dev/null

urls=()
for ((i = 0; i < processes; i++)); do
    port=$((base_port + i))
    AGENTRY__SERVER__BIND=127.0.0.1:$port taskset -c 0 "$agentry" serve \
        >"$work/serve-$i.log" 2>&1 &
    pids+=($!)
    urls+=("http://127.0.0.1:$port")
done
for ((i = 0; i < processes; i++)); do
    ready=
    for _ in $(seq 1 300); do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            echo "process $i exited before it was ready" >&2
            exit 1
        fi
        if curl -fsS -o /dev/null "${urls[$i]}/readyz" 2>/dev/null; then
            ready=1
            break
        fi
        sleep 0.1
    done
    [[ -n $ready ]] || { echo "process $i not ready after 30 s" >&2; exit 1; }
done

echo "processes=$processes database=$database urls=$(IFS=,; echo "${urls[*]}") generator=$generator" >&2
taskset -c 1 "$generator" --urls "$(IFS=,; echo "${urls[*]}")" --admin-secret "$admin_secret" \
    --probe-agent "$probe_agent" "$@"
