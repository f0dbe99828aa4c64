# Helpers the bench scripts share. Source it from a script after setting
# `script` (the name its messages start with):
#
#   script=trio.sh
#   source "$repo/bench/lib.sh"
#
# Defines die, median, stop_pid and bench_go (the go toolchain's path).

die() {
	echo "$script: $*" >&2
	exit 1
}

# median of the numbers given as arguments
median() {
	printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# stop_pid PID [SECONDS]: SIGTERM, then SIGKILL after SECONDS (5); PID is a
# child of the calling script.
stop_pid() {
	local pid=$1 tenths=$((${2:-5} * 10)) i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < tenths; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# bench_go: the go toolchain in PATH or at /usr/local/go/bin/go (sudo's PATH
# often lacks it).
bench_go() {
	local go
	go=$(command -v go || true)
	[[ -n $go ]] || go=/usr/local/go/bin/go
	[[ -x $go ]] || die "no go toolchain in PATH or at /usr/local/go/bin/go"
	echo "$go"
}
