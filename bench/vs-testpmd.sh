#!/usr/bin/env bash
# Compare peregrine's AF_XDP and AF_PACKET ports with dpdk-testpmd's on the
# same veth topology, in one run (against speed goals):
#
#   bench/vs-testpmd.sh [FLAGS...]      e.g. --rounds 5 --duration 3s --sizes 64
#
# Builds peregrine into a temporary directory, installs Debian's DPDK when
# dpdk-testpmd is missing (hack/install-deps.sh), and runs
# `peregrine bench vs-testpmd` as root (re-running itself with sudo when
# needed). That builds gen -> fwd -> sink across three namespaces named
# pgvs<PID>-{gen,fwd,sink} (addresses only in 198.18.0.0/15), measures both
# tools in alternating rounds and prints
#
#   RATIO <name> <value> goal >= 1 <PASS|FAIL>     (one per comparison)
#   BENCH-SUMMARY pass=<n> fail=<m>                (last)
#
# On exit — also after a failure or SIGINT/SIGTERM — any namespace of this
# run still there is deleted (with the processes left inside it) and the
# temporary directory removed. Exits 0 when the comparison ran, whatever the
# verdicts (read BENCH-SUMMARY); non-zero when it could not run. Takes about
# four minutes with the defaults (3 rounds of 3 s, 64- and 1518-byte frames).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [[ $(id -u) -ne 0 ]]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo --preserve-env=PATH,GOPATH,GOCACHE,GOMODCACHE "$0" "$@"
	fi
	echo "vs-testpmd.sh: needs root (namespaces, veth, AF_XDP and AF_PACKET ports: CAP_SYS_ADMIN, CAP_NET_ADMIN, CAP_NET_RAW, CAP_BPF, CAP_IPC_LOCK) and sudo is not installed" >&2
	exit 1
fi

go=$(command -v go || true)
[[ -n $go ]] || go=/usr/local/go/bin/go
[[ -x $go ]] || { echo "vs-testpmd.sh: no go toolchain in PATH or at /usr/local/go/bin/go" >&2; exit 1; }

prefix="pgvs$$"
tmp=$(mktemp -d -t vs-testpmd.XXXXXX)
child=

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
		# SIGTERM lets peregrine stop testpmd and delete its topology itself.
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ $ns == "$prefix"-* ]] || continue
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			echo "vs-testpmd.sh: killing process $pid left in namespace $ns" >&2
			kill -KILL "$pid" 2>/dev/null || true
		done
		echo "vs-testpmd.sh: deleting leftover namespace $ns" >&2
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! command -v dpdk-testpmd >/dev/null 2>&1; then
	echo "vs-testpmd.sh: dpdk-testpmd not found; installing Debian's DPDK" >&2
	"$repo/hack/install-deps.sh"
fi

echo "# vs-testpmd.sh: building peregrine ($("$go" version | awk '{print $3}'))"
(cd "$repo" && "$go" build -o "$tmp/peregrine" ./cmd/peregrine)

# In the background, so that the traps run while it works.
"$tmp/peregrine" bench vs-testpmd --netns-prefix "$prefix" "$@" &
child=$!
set +e
wait "$child"
rc=$?
set -e
child=
exit "$rc"
