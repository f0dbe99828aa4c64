#!/usr/bin/env bash
# The whole test suite, as README.md states it: installs what the tests need
# (Debian packages via hack/install-deps.sh when root), then vets, runs every
# test with the race detector, and runs every benchmark once so none rots.
# Root-only tests (veth, AF_XDP, DPDK anchors) run when root and skip with a
# message otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then
	hack/install-deps.sh
else
	echo "test.sh: not root: skipping package installation; root-only tests will skip"
fi

echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
echo "== benchmarks, once each (-benchtime=1x)"
go test -run '^$' -bench . -benchtime=1x -count=1 -timeout 10m ./...
