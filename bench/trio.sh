#!/usr/bin/env bash
# The shipped config trio over AF_PACKET against the same trio over AF_XDP:
#
#   bench/trio.sh             (root; re-runs itself with sudo when needed)
#
# Builds `peregrine` into a temporary directory and a three-namespace veth
# topology with hack/topo.sh (addresses only in 198.18.0.0/15):
#
#   tr<PID>-gen (initiator) <-> tr<PID>-fwd (fabric or forwarder) <-> tr<PID>-sink (target)
#
# then runs configs/transport-target.yaml, configs/fabric.yaml (MIDDLE=
# forwarder: configs/forwarder.yaml) and configs/transport-initiator.yaml
# with `peregrine run -c`, as a user runs them, each in its own process,
# from copies in which only the namespace and interface names change
# (pg-gen -> tr<PID>-gen, ...) and, for the AF_XDP runs, the port kind
# (afpacket: -> afxdp:). Each run starts a fresh target and middle, runs
# the initiator for DURATION and stops the other two with SIGTERM. Goodput
# is the initiator's completed bytes over DURATION, the same formula for
# both kinds. Prints
#
#   # trio ...                                        figures, as comments
#   RATIO trio_goodput_afpacket_vs_afxdp <v> goal >= 0.5 <PASS|FAIL>
#   BENCH-SUMMARY pass=<n> fail=<m>                   (last)
#
# Environment: RUNS (3, the median is kept), DURATION (5s, the config's own),
# MIDDLE (fabric|forwarder, default fabric). On exit — also after a failure
# or SIGINT/SIGTERM — every process this run started is stopped, its
# namespaces deleted and the temporary directory removed. Exits 0 when the
# comparison ran (read BENCH-SUMMARY), non-zero when it could not run.
set -euo pipefail
shopt -s inherit_errexit

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
script=trio.sh
# shellcheck source=bench/lib.sh
source "$repo/bench/lib.sh"

if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo --preserve-env=PATH,GOPATH,GOCACHE,GOMODCACHE,RUNS,DURATION,MIDDLE "$0" "$@"
	fi
	echo "trio.sh: needs root (namespaces, veth, AF_XDP and AF_PACKET ports) and sudo is not installed" >&2
	exit 1
fi
[[ $# -eq 0 ]] || { echo "trio.sh: takes no arguments (configure with RUNS, DURATION, MIDDLE)" >&2; exit 2; }

runs=${RUNS:-3}
duration=${DURATION:-5s}
middle=${MIDDLE:-fabric}
[[ $runs =~ ^[1-9][0-9]?$ ]] || { echo "trio.sh: RUNS=$runs must be 1..99" >&2; exit 2; }
[[ $duration =~ ^[0-9]+(ms|s)$ ]] || { echo "trio.sh: DURATION=$duration must look like 5s or 500ms" >&2; exit 2; }
[[ $middle =~ ^(fabric|forwarder)$ ]] || { echo "trio.sh: MIDDLE=$middle must be fabric or forwarder" >&2; exit 2; }
seconds=$(awk -v d="$duration" 'BEGIN {if (d ~ /ms$/) print substr(d, 1, length(d) - 2) / 1000; else print substr(d, 1, length(d) - 1)}')

go=$(bench_go)

prefix="tr$$"
tmp=$(mktemp -d -t trio.XXXXXX)
# The run -c processes live in this namespace (their ports open in the
# topology's namespaces by ?netns=), so they are tracked by PID, each a
# child of this script; each is given 15 s to stop (a drain takes up to 10 s).
pids=()

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	local pid
	for pid in "${pids[@]}"; do
		stop_pid "$pid" 15
	done
	"$repo/hack/topo.sh" down "$prefix" >/dev/null 2>&1
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_line FILE PATTERN PID WHAT: wait (30 s at most) for a line matching
# PATTERN in FILE written by PID.
wait_line() {
	local i
	for ((i = 0; i < 300; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || die "$4 exited before it was ready:
$(cat "$1")"
		sleep 0.1
	done
	die "$4 not ready after 30 s:
$(cat "$1")"
}

echo "# trio.sh: building peregrine ($("$go" version | awk '{print $3}'))"
(cd "$repo" && "$go" build -o "$tmp/peregrine" ./cmd/peregrine)
"$repo/hack/topo.sh" up3 "$prefix" >/dev/null

# configs KIND: copies of the trio in $tmp/KIND/ with this topology's names
# and KIND (afpacket or afxdp) as every port's driver.
configs() {
	local kind=$1 name
	mkdir -p "$tmp/$kind"
	for name in transport-target.yaml "$middle.yaml" transport-initiator.yaml; do
		sed -e "s/pg-\(gen\|fwd\|sink\|g0\|f0\|f1\|s0\)\b/$prefix-\1/g" \
			-e "s/spec: \"afpacket:/spec: \"$kind:/" "$repo/configs/$name" >"$tmp/$kind/$name"
		grep -q "spec: \"$kind:$prefix-" "$tmp/$kind/$name" || die "configs/$name: no afpacket:pg-… port spec to rewrite"
	done
}

# trio KIND RUN: one run of the trio over KIND ports; $goodput is its Gbit/s.
trio() {
	local kind=$1 run=$2 dir=$tmp/$1 target mid rc=0 bytes
	"$tmp/peregrine" run -c "$dir/transport-target.yaml" >"$tmp/target.log" 2>&1 &
	target=$!
	pids+=("$target")
	wait_line "$tmp/target.log" '^running' "$target" "the target ($kind)"
	"$tmp/peregrine" run -c "$dir/$middle.yaml" --quiet >"$tmp/middle.log" 2>&1 &
	mid=$!
	pids+=("$mid")
	wait_line "$tmp/middle.log" '^running' "$mid" "the $middle ($kind)"
	timeout 120 "$tmp/peregrine" run -c "$dir/transport-initiator.yaml" --duration "$duration" >"$tmp/initiator.log" 2>&1 || rc=$?
	stop_pid "$mid" 15
	stop_pid "$target" 15
	pids=()
	# Exit 1 is a run whose verification failed (operations left after the
	# drain on a loaded machine): its goodput still counts, and it is said.
	((rc == 1)) && grep -q '^verification FAILED' "$tmp/initiator.log" && {
		echo "#   $kind run $run: the initiator's verification FAILED:"
		grep -E '^ *\[FAIL\]|LOST' "$tmp/initiator.log" | sed 's/^ */#     /'
		rc=0
	}
	((rc == 0)) || die "the initiator ($kind, run $run) failed (exit $rc):
$(cat "$tmp/initiator.log")
--- target:
$(cat "$tmp/target.log")
--- $middle:
$(cat "$tmp/middle.log")"
	bytes=$(sed -n 's/.*operations: [0-9]* posted, [0-9]* completed ok, [0-9]* failed, \([0-9]*\) B.*/\1/p' "$tmp/initiator.log")
	[[ -n $bytes ]] || die "the initiator ($kind) printed no operations line:
$(cat "$tmp/initiator.log")"
	goodput=$(awk -v b="$bytes" -v s="$seconds" 'BEGIN {printf "%.4f\n", b * 8 / s / 1e9}')
	grep -h 'latency post→completion\|transport sent' "$tmp/initiator.log" | sed "s/^ */#   $kind run $run: /"
}

echo "# machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start; middle: configs/$middle.yaml; $runs runs of $duration per kind"
declare -A trio_goodput
for kind in afpacket afxdp; do
	configs "$kind"
	gs=()
	for ((i = 1; i <= runs; i++)); do
		trio "$kind" "$i"
		gs+=("$goodput")
	done
	trio_goodput[$kind]=$(median "${gs[@]}")
	echo "# trio $kind goodput_gbps=${trio_goodput[$kind]} (median of $runs: ${gs[*]}; transport-target, $middle, transport-initiator as shipped but for the port kind)"
done
echo "# machine: load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

value=$(awk -v a="${trio_goodput[afpacket]}" -v b="${trio_goodput[afxdp]}" 'BEGIN {printf "%.4f\n", (b > 0 ? a / b : 0)}')
if awk -v v="$value" 'BEGIN {exit !(v >= 0.5)}'; then
	echo "RATIO trio_goodput_afpacket_vs_afxdp $value goal >= 0.5 PASS"
	echo "BENCH-SUMMARY pass=1 fail=0"
else
	echo "RATIO trio_goodput_afpacket_vs_afxdp $value goal >= 0.5 FAIL"
	echo "BENCH-SUMMARY pass=0 fail=1"
fi
