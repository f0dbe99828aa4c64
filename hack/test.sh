#!/usr/bin/env bash
# The whole test suite, as README.md and CONTRIBUTING.md state it: installs
# what the tests need (Debian packages via hack/install-deps.sh when root),
# then vets, runs every test with the race detector, the tests of the nested
# module bench/quicpeer, and every benchmark once so none rots; each of
# those three runs even when another failed, and the script then fails.
# Root-only tests (veth, AF_XDP, DPDK anchors) run when root and skip with a
# message otherwise. The tests' knobs (PEREGRINE_SEEDS, ...) pass through
# from the environment; CONTRIBUTING.md lists them.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ]; then
	hack/install-deps.sh
else
	echo "test.sh: not root: skipping package installation; root-only tests will skip"
fi

echo "== go vet"
go vet ./...
# The tests and the benchmarks both run whatever the other's outcome, so one
# run shows every failure; the script fails if either did.
failed=()
echo "== go test -race"
if ! go test -race -count=1 -timeout 20m ./...; then
	failed+=("go test -race")
fi
# bench/quicpeer is a module of its own (so the product never depends on
# quic-go): ./... above does not reach it. Its dependencies come from the
# module proxy into the module cache, as the main module's do.
echo "== bench/quicpeer: go vet, go test -race"
if ! (cd bench/quicpeer && go vet ./... && go test -race -count=1 -timeout 5m ./...); then
	failed+=("bench/quicpeer")
fi
echo "== benchmarks, once each (-benchtime=1x)"
if ! go test -run '^$' -bench . -benchtime=1x -count=1 -timeout 10m ./...; then
	failed+=("benchmarks")
fi
if [ "${#failed[@]}" -ne 0 ]; then
	echo "test.sh: FAILED: ${failed[*]}" >&2
	exit 1
fi
echo "test.sh: all passed"
