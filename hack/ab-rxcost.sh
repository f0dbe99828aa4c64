#!/usr/bin/env bash
# ab-rxcost.sh: the receive path's cost per packet, this tree against a base
# revision, timed in interleaved rounds so that the machine's drift hits
# both sides alike; it prints each round and the median of each figure.
#
# Figures, in ns per packet: rx and rx-nocsum are `peregrine bench
# transport-core`'s transport receive path (bench/perf RxCost, with and
# without UDP checksums: the transport and a ULP that takes every packet);
# send and push are the transaction layer's receive path over it (bench/dix
# RxCost: 4 KiB Sends into posted WQEs, and unsolicited pushes), with their
# heap allocations per packet, which must stay 0.
#
# Both sides are built from the same driver (a Go file added to each tree
# by `go build -overlay`, so neither tree is changed): the base from `git
# archive BASE`, this side from the working tree as it is, uncommitted
# changes included. Time it on a quiet machine; -c pins both to one CPU.
#
# Usage: hack/ab-rxcost.sh [-b BASE] [-n ROUNDS] [-p PACKETS] [-c CPU]
#   -b  base revision (default main)
#   -n  rounds, each running both sides once, in alternating order (default 11)
#   -p  packets per transport figure (default 1048576; the dix figures take a
#       sixteenth of it)
#   -c  run both under taskset -c CPU
set -euo pipefail

base=main rounds=11 packets=1048576 cpu=
while getopts b:n:p:c:h opt; do
	case $opt in
	b) base=$OPTARG ;;
	n) rounds=$OPTARG ;;
	p) packets=$OPTARG ;;
	c) cpu=$OPTARG ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done

root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/base"
git -C "$root" archive --format=tar "$base" | tar -x -C "$tmp/base"

cat >"$tmp/main.go" <<'GO'
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/peregrine-net/peregrine/bench/dix"
	"github.com/peregrine-net/peregrine/bench/perf"
)

func main() {
	packets := flag.Int("packets", 1<<20, "packets per transport figure")
	flag.Parse()
	rx, err := perf.RxCost(perf.RxCostOptions{Packets: *packets})
	check(err)
	rxNoCsum, err := perf.RxCost(perf.RxCostOptions{Packets: *packets, NoUDPChecksum: true})
	check(err)
	d, err := dix.RxCost(*packets / 16)
	check(err)
	fmt.Printf("%.2f %.2f %.2f %.2f %.3f %.3f\n", rx, rxNoCsum, d.SendNs, d.PushNs, d.SendAllocs, d.PushAllocs)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
GO

build() { # tree output
	local drv=$1/abrxcost/main.go
	printf '{"Replace":{"%s":"%s"}}\n' "$drv" "$tmp/main.go" >"$tmp/overlay-$2.json"
	(cd "$1" && go build -overlay "$tmp/overlay-$2.json" -o "$tmp/bin-$2" ./abrxcost)
}
echo "ab-rxcost: building $base ($(git -C "$root" rev-parse --short "$base")) and the working tree ($(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ', modified'))"
build "$tmp/base" base
build "$root" new

run() { # side
	if [ -n "$cpu" ]; then
		taskset -c "$cpu" "$tmp/bin-$1" -packets "$packets"
	else
		"$tmp/bin-$1" -packets "$packets"
	fi
}

echo "round side   rx  rx-nocsum  send  push  send-allocs push-allocs"
for ((r = 1; r <= rounds; r++)); do
	order="base new"
	((r % 2 == 0)) && order="new base"
	for side in $order; do
		line=$(run "$side")
		echo "$r $side $line" | tee -a "$tmp/results"
	done
done

echo "medians over $rounds rounds (ns/packet; allocs/packet):"
for side in base new; do
	printf '%-5s' "$side"
	for col in 3 4 5 6 7 8; do
		awk -v s="$side" -v c="$col" '$2 == s { print $c }' "$tmp/results" | sort -g |
			awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf " %9.3f", m }'
	done
	echo
done
awk '$2 == "base" { b[$1] = $3 } $2 == "new" { n[$1] = $3 } END { for (r in b) print n[r] / b[r] }' "$tmp/results" | sort -g |
	awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "rx new/base, median of the rounds'"'"' ratios: %.3f\n", m }'
