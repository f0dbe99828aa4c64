#!/usr/bin/env bash
# Builds bench/dpdk/mempool_bench.c against Debian's DPDK (pkg-config libdpdk)
# into bench/dpdk/build/mempool_bench. Callable from any directory; prints the
# path of the binary on success. Rebuilds only when the source is newer.
# Needs hack/install-deps.sh to have run (dpdk-dev, pkg-config, gcc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/mempool_bench.c"
out_dir="$here/build"
bin="$out_dir/mempool_bench"

for tool in pkg-config "${CC:-gcc}"; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "build.sh: $tool not found; run hack/install-deps.sh" >&2
		exit 1
	fi
done
if ! pkg-config --exists libdpdk; then
	echo "build.sh: pkg-config cannot find libdpdk; run hack/install-deps.sh" >&2
	exit 1
fi

if [ -x "$bin" ] && [ "$bin" -nt "$src" ] && [ "$bin" -nt "$here/build.sh" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$out_dir"
# Word splitting of pkg-config output is intended.
# shellcheck disable=SC2046
"${CC:-gcc}" -O3 -Wall -Wextra -o "$bin.tmp.$$" "$src" \
	$(pkg-config --cflags libdpdk) $(pkg-config --libs libdpdk)
mv -f "$bin.tmp.$$" "$bin"
echo "$bin"
