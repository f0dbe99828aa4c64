#!/usr/bin/env bash
# Installs every Debian package whose programs the tests, benchmarks and
# scripts of this repository run: iproute2 and ethtool for the veth
# topologies, DPDK 22.11 for the anchors, tshark to cross-check the
# decoders, and so on; each line below says who runs what. A program a test
# or script runs must come from a package listed here (or from a Debian
# base package): internal/tools' table maps programs to packages, and its
# test fails when a shell-out has no entry or its package is missing here.
#
# Idempotent: exits 0 at once when everything is already installed. Runs
# `apt-get update` at most once, and only when something is missing.
set -euo pipefail

# One package per line, first word: internal/tools parses this list.
packages=(
	iproute2               # ip: namespaces and veth pairs (pmd/netns, hack/topo.sh, bench/*.sh)
	ethtool                # ethtool: GRO on veth ends (pmd/netns), offloads (bench/vs-quic.sh)
	dpdk-dev               # dpdk-testpmd, dpdk-test, libdpdk.pc: the DPDK anchors (bench/anchor, bench/vstestpmd)
	librte-net-af-xdp23    # DPDK's AF_XDP PMD, for dpdk-testpmd's net_af_xdp vdevs
	librte-net-af-packet23 # DPDK's AF_PACKET PMD, for net_af_packet vdevs
	pkg-config             # pkg-config: libdpdk's flags and version (bench/dpdk/build.sh, bench/vstestpmd)
	gcc                    # gcc: builds bench/dpdk/mempool_bench
	tshark                 # tshark: Wireshark's dissectors cross-check pmd/pcap and core/wire/wirelayers
	linux-perf             # perf: per-window profiles of bench/vstestpmd (PEREGRINE_VS_PROFILE)
	git                    # git: the static-build test checks --version names the commit (cmd/peregrine)
	python3-scapy          # python3 with scapy's RoCE layer: the RoCEv2 oracle (core/roce)
	sockperf               # sockperf: kernel UDP ping-pong latency, the anchor of bench/latency
)

is_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q '^install ok installed$'
}

missing=()
for pkg in "${packages[@]}"; do
	if ! is_installed "$pkg"; then
		missing+=("$pkg")
	fi
done

if [ "${#missing[@]}" -eq 0 ]; then
	echo "install-deps: all present: ${packages[*]}"
	exit 0
fi

echo "install-deps: missing: ${missing[*]}"

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: installing packages needs root; run as root (or: sudo $0)" >&2
	echo "install-deps: or install by hand: apt-get install -y --no-install-recommends ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: apt-get update"
apt-get update
echo "install-deps: apt-get install -y --no-install-recommends ${missing[*]}"
apt-get install -y --no-install-recommends "${missing[@]}"

still_missing=()
for pkg in "${missing[@]}"; do
	if ! is_installed "$pkg"; then
		still_missing+=("$pkg")
	fi
done
if [ "${#still_missing[@]}" -ne 0 ]; then
	echo "install-deps: still missing after apt-get install: ${still_missing[*]}" >&2
	exit 1
fi
echo "install-deps: done"
