#!/usr/bin/env bash
# Build or tear down the veth test topologies that pmd/netns/netnstest builds
# for Go tests, from the shell (bench scripts, manual runs).
#
#   hack/topo.sh up2  [PREFIX]   PREFIX-a (PREFIX-a0 198.18.0.1/30) <-> PREFIX-b (PREFIX-b0 198.18.0.2/30)
#   hack/topo.sh up3  [PREFIX]   PREFIX-gen (PREFIX-g0 198.18.0.1/30) <-> PREFIX-fwd (PREFIX-f0 .2/30, PREFIX-f1 .5/30)
#                                <-> PREFIX-sink (PREFIX-s0 198.18.0.6/30)
#   hack/topo.sh down [PREFIX]   delete every namespace named PREFIX-* (idempotent); also what
#                                peregrine demo --veth (pgdemo, or pgdemo-PID) and bench
#                                vs-testpmd (pgvsPID) leave after a kill -9
#
# PREFIX defaults to "pg" (for up2 and up3 at most 10 characters, so
# interface names fit in 15; down takes any namespace name prefix). Environment: QUEUES (default 1), MTU (default 1500). GRO is turned on
# at every end (veth delivers to AF_PACKET and generic XDP only with GRO on)
# and IPv6 is disabled before the links come up, so the kernel injects no
# frames of its own. Addresses are only ever taken from 198.18.0.0/15.
# Needs root.
set -euo pipefail

usage() {
	sed -n '4,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

[[ $# -ge 1 && $# -le 2 ]] || usage
cmd=$1
prefix=${2:-pg}
queues=${QUEUES:-1}
mtu=${MTU:-1500}

if [[ $cmd == down ]]; then
	# Any prefix of a namespace name: demo --veth's are pgdemo-PID-gen …
	[[ $prefix =~ ^[A-Za-z0-9_.-]{1,200}$ ]] || { echo "topo.sh: PREFIX '$prefix' must be letters, digits, '-', '_' or '.'" >&2; exit 2; }
else
	[[ $prefix =~ ^[A-Za-z0-9_.-]{1,10}$ ]] || { echo "topo.sh: PREFIX '$prefix' must be 1..10 letters, digits, '-', '_' or '.' (interface names are PREFIX-g0 …, at most 15 characters)" >&2; exit 2; }
fi
[[ $queues =~ ^[0-9]+$ && $queues -ge 1 && $queues -le 4096 ]] || { echo "topo.sh: QUEUES=$queues is out of range (use 1..4096)" >&2; exit 2; }
[[ $mtu =~ ^[0-9]+$ && $mtu -ge 68 && $mtu -le 65535 ]] || { echo "topo.sh: MTU=$mtu is out of range (use 68..65535)" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then
	echo "topo.sh: needs root to create network namespaces (CAP_SYS_ADMIN, CAP_NET_ADMIN); run with sudo" >&2
	exit 1
fi

down() {
	local ns
	for ns in $(ip netns list | awk '{print $1}'); do
		if [[ $ns == "$prefix"-* ]]; then
			ip netns del "$ns" 2>/dev/null || true
			echo "deleted namespace $ns"
		fi
	done
}

mkns() {
	if ip netns list | awk '{print $1}' | grep -qx -- "$1"; then
		echo "topo.sh: namespace $1 exists (run: $0 down $prefix)" >&2
		exit 1
	fi
	ip netns add "$1"
	ip -n "$1" link set lo up
}

# end NS IF ADDR: quiet, address, up, then GRO on (after up: on 6.18 GRO
# set on a down link left XDP-redirected frames into it dropped until an XDP
# program had once been attached there).
end() {
	ip netns exec "$1" sh -c "echo 1 > /proc/sys/net/ipv6/conf/$2/disable_ipv6" 2>/dev/null || true
	ip -n "$1" addr add "$3" dev "$2"
	ip -n "$1" link set "$2" up
	ip netns exec "$1" ethtool -K "$2" gro on
}

# pair NS_A IF_A ADDR_A MAC_A NS_B IF_B ADDR_B MAC_B
pair() {
	ip -n "$1" link add "$2" numtxqueues "$queues" numrxqueues "$queues" mtu "$mtu" address "$4" \
		type veth peer name "$6" numtxqueues "$queues" numrxqueues "$queues" mtu "$mtu" address "$8" netns "$5"
	end "$1" "$2" "$3"
	end "$5" "$6" "$7"
	echo "$1/$2 $3 $4 <-> $5/$6 $7 $8"
}

case $cmd in
up2)
	trap 'echo "topo.sh: failed, tearing down" >&2; down >/dev/null' ERR
	mkns "$prefix-a"
	mkns "$prefix-b"
	pair "$prefix-a" "$prefix-a0" 198.18.0.1/30 02:70:67:00:00:0a \
		"$prefix-b" "$prefix-b0" 198.18.0.2/30 02:70:67:00:00:0b
	;;
up3)
	trap 'echo "topo.sh: failed, tearing down" >&2; down >/dev/null' ERR
	mkns "$prefix-gen"
	mkns "$prefix-fwd"
	mkns "$prefix-sink"
	pair "$prefix-gen" "$prefix-g0" 198.18.0.1/30 02:70:67:00:01:01 \
		"$prefix-fwd" "$prefix-f0" 198.18.0.2/30 02:70:67:00:01:02
	pair "$prefix-fwd" "$prefix-f1" 198.18.0.5/30 02:70:67:00:01:05 \
		"$prefix-sink" "$prefix-s0" 198.18.0.6/30 02:70:67:00:01:06
	;;
down)
	down
	;;
*)
	usage
	;;
esac
