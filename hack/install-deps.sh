#!/usr/bin/env bash
# Installs the Debian packages that `peregrine bench foundation` and the DPDK
# anchor tests need: DPDK 22.11 (dpdk-test, dpdk-testpmd, headers and
# libdpdk.pc), its AF_XDP and AF_PACKET PMDs, pkg-config and gcc (to build
# bench/dpdk/mempool_bench).
#
# Idempotent: exits 0 at once when everything is already installed. Runs
# `apt-get update` at most once, and only when something is missing.
set -euo pipefail

packages=(
	dpdk-dev
	librte-net-af-xdp23
	librte-net-af-packet23
	pkg-config
	gcc
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
