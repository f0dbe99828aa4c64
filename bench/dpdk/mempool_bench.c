/* SPDX-License-Identifier: Apache-2.0
 *
 * mempool_bench: the DPDK side of peregrine's mempool anchor.
 *
 * It measures one configuration of DPDK's mempool_perf_autotest (the
 * "with cache" case on one lcore) so that peregrine can compare its own
 * handle pool against it in the same run on the same machine. The full
 * autotest sweeps 9 core/cache layouts x 5 get sizes x 5 put sizes x 3 keep
 * counts at 5 s each, which takes hours; peregrine needs a handful of points.
 *
 * Method (same as the autotest's per-lcore loop):
 *   - a mempool of (MAX_KEEP + cache) * lcores - 1 objects of 2048 bytes with
 *     a per-lcore cache of RTE_MEMPOOL_CACHE_MAX_SIZE (512) objects, default
 *     ops (ring_mp_mc);
 *   - one round = ROUND_OBJS / keep repetitions of: get `keep` objects in
 *     bulks of `bulk`, then put them all back in bulks of `bulk`, both through
 *     the lcore's default cache;
 *   - rounds repeat until the requested time has passed; the clock (TSC) is
 *     read only between rounds.
 * With keep <= 512 every get and put is served by the per-lcore cache, so
 * this is the hot path a poll-mode driver hits for each packet buffer.
 *
 * Output, one line per case (parsed by bench/anchor):
 *   MEMPOOL cached cache=512 lcores=1 bulk=32 keep=32 constant_n=0 objs=...
 *           seconds=... cycles_per_obj=... ns_per_obj=... rate_persec=...
 * where one "obj" is one object taken by a get AND returned by a put, so
 * ns_per_obj = elapsed ns / objects cycled (each got once and put once), and
 * rate_persec = objects cycled per second (the autotest's rate_persec).
 * constant_n=0 passes the bulk size as a run-time value (the autotest's
 * first line for each point); constant_n=1 lets the compiler see it as a
 * constant (the autotest's "replay test with constant values").
 *
 * Usage: mempool_bench [EAL options] [-- -t SECONDS]
 * Without EAL options (no argument, or "--" first) it uses:
 *   --no-huge --no-pci --no-shconf -l 0 -m 256 --no-telemetry
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_version.h>

#define ELT_SIZE 2048
#define MAX_KEEP 512
#define CACHE_SIZE RTE_MEMPOOL_CACHE_MAX_SIZE
/* Objects cycled between two clock reads; the autotest's N. */
#define ROUND_OBJS 65536u

struct bench_case {
	unsigned int bulk;
	unsigned int keep;
	int constant_n;
};

static const struct bench_case cases[] = {
	{ 32, 32, 0 },
	{ 32, 128, 0 },
	{ 32, 32, 1 },
	{ 32, 128, 1 },
	{ 1, 32, 0 },
	{ 1, 128, 0 },
};

/*
 * Read through volatile so the compiler cannot specialise the run-time
 * variant of the loop for the bulk size, just as the autotest keeps
 * n_get_bulk in a global.
 */
static volatile unsigned int runtime_bulk;

static __rte_always_inline int
cycle_round(struct rte_mempool *mp, struct rte_mempool_cache *cache,
	    unsigned int keep, unsigned int bulk)
{
	void *objs[MAX_KEEP] __rte_cache_aligned;
	unsigned int rep, idx;

	for (rep = 0; rep < ROUND_OBJS / keep; rep++) {
		for (idx = 0; idx < keep; idx += bulk) {
			if (unlikely(rte_mempool_generic_get(mp, &objs[idx],
							     bulk, cache) < 0))
				return -ENOBUFS;
		}
		for (idx = 0; idx < keep; idx += bulk)
			rte_mempool_generic_put(mp, &objs[idx], bulk, cache);
	}
	return 0;
}

static __rte_noinline int
round_runtime(struct rte_mempool *mp, struct rte_mempool_cache *cache,
	      unsigned int keep)
{
	return cycle_round(mp, cache, keep, runtime_bulk);
}

static __rte_noinline int
round_const(struct rte_mempool *mp, struct rte_mempool_cache *cache,
	    unsigned int keep, unsigned int bulk)
{
	switch (bulk) {
	case 1:
		return cycle_round(mp, cache, keep, 1);
	case 32:
		return cycle_round(mp, cache, keep, 32);
	default:
		return -EINVAL;
	}
}

static int
run_case(struct rte_mempool *mp, const struct bench_case *c, double seconds)
{
	struct rte_mempool_cache *cache =
		rte_mempool_default_cache(mp, rte_lcore_id());
	const uint64_t hz = rte_get_tsc_hz();
	const uint64_t budget = (uint64_t)(seconds * (double)hz);
	uint64_t start, now, objs = 0;
	int ret;

	if (cache == NULL) {
		fprintf(stderr, "mempool_bench: lcore %u has no mempool cache\n",
			rte_lcore_id());
		return -1;
	}
	if (c->keep % c->bulk != 0 || c->keep > MAX_KEEP) {
		fprintf(stderr, "mempool_bench: keep %u must be a multiple of "
			"bulk %u and at most %u\n", c->keep, c->bulk, MAX_KEEP);
		return -1;
	}
	runtime_bulk = c->bulk;

	/* One untimed round so the cache starts in its steady state. */
	ret = c->constant_n ? round_const(mp, cache, c->keep, c->bulk)
			    : round_runtime(mp, cache, c->keep);
	if (ret < 0)
		goto fail;

	start = rte_rdtsc_precise();
	do {
		ret = c->constant_n ? round_const(mp, cache, c->keep, c->bulk)
				    : round_runtime(mp, cache, c->keep);
		if (ret < 0)
			goto fail;
		objs += ROUND_OBJS / c->keep * c->keep;
		now = rte_rdtsc_precise();
	} while (now - start < budget);

	const double cycles = (double)(now - start);
	const double secs = cycles / (double)hz;
	printf("MEMPOOL cached cache=%u lcores=1 bulk=%u keep=%u constant_n=%d "
	       "objs=%" PRIu64 " seconds=%.3f cycles_per_obj=%.3f "
	       "ns_per_obj=%.3f rate_persec=%.0f\n",
	       (unsigned int)mp->cache_size, c->bulk, c->keep, c->constant_n,
	       objs, secs, cycles / (double)objs, secs * 1e9 / (double)objs,
	       (double)objs / secs);
	fflush(stdout);

	if (rte_mempool_avail_count(mp) != mp->size) {
		fprintf(stderr, "mempool_bench: %u of %u objects back after "
			"bulk=%u keep=%u\n", rte_mempool_avail_count(mp),
			mp->size, c->bulk, c->keep);
		return -1;
	}
	return 0;

fail:
	fprintf(stderr, "mempool_bench: get failed (%s) at bulk=%u keep=%u\n",
		strerror(-ret), c->bulk, c->keep);
	return -1;
}

static int
parse_app_args(int argc, char **argv, double *seconds)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-t") == 0 && i + 1 < argc) {
			char *end;
			*seconds = strtod(argv[++i], &end);
			if (*end != '\0' || *seconds <= 0 || *seconds > 60) {
				fprintf(stderr, "mempool_bench: -t %s: want "
					"seconds in (0, 60]\n", argv[i]);
				return -1;
			}
			continue;
		}
		fprintf(stderr, "mempool_bench: unknown argument %s "
			"(usage: mempool_bench [EAL options] [-- -t SECONDS])\n",
			argv[i]);
		return -1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	static const char *const default_eal_args[] = {
		"--no-huge", "--no-pci", "--no-shconf", "-l", "0", "-m", "256",
		"--no-telemetry", "--log-level=lib.eal:error",
	};
	char *eal_argv[RTE_DIM(default_eal_args) + argc + 1];
	struct rte_mempool *mp;
	double seconds = 1.0;
	unsigned int i;
	int used, rc = 0;

	/* No EAL options given (nothing, or "--" first): use the defaults. */
	if (argc == 1 || strcmp(argv[1], "--") == 0) {
		int n = 0;

		eal_argv[n++] = argv[0];
		for (i = 0; i < RTE_DIM(default_eal_args); i++)
			eal_argv[n++] = (char *)(uintptr_t)default_eal_args[i];
		for (i = 1; i < (unsigned int)argc; i++)
			eal_argv[n++] = argv[i];
		eal_argv[n] = NULL;
		argc = n;
		argv = eal_argv;
	}

	used = rte_eal_init(argc, argv);
	if (used < 0) {
		fprintf(stderr, "mempool_bench: rte_eal_init failed: %s\n",
			rte_strerror(rte_errno));
		return 1;
	}
	argc -= used;
	argv += used;
	if (parse_app_args(argc, argv, &seconds) < 0) {
		rte_eal_cleanup();
		return 2;
	}

	mp = rte_mempool_create("pg_anchor_cache",
				(MAX_KEEP + CACHE_SIZE) * rte_lcore_count() - 1,
				ELT_SIZE, CACHE_SIZE, 0, NULL, NULL, NULL, NULL,
				SOCKET_ID_ANY, 0);
	if (mp == NULL) {
		fprintf(stderr, "mempool_bench: rte_mempool_create failed: %s\n",
			rte_strerror(rte_errno));
		rte_eal_cleanup();
		return 1;
	}

	printf("MEMPOOL_INFO version=\"%s\" tsc_hz=%" PRIu64 " lcore=%u "
	       "pool_size=%u elt_size=%u ops=%s seconds_per_case=%.3f\n",
	       rte_version(), rte_get_tsc_hz(), rte_lcore_id(), mp->size,
	       mp->elt_size, rte_mempool_get_ops(mp->ops_index)->name, seconds);
	fflush(stdout);

	for (i = 0; i < RTE_DIM(cases); i++) {
		if (run_case(mp, &cases[i], seconds) < 0) {
			rc = 1;
			break;
		}
	}
	if (rc == 0)
		printf("MEMPOOL done\n");

	rte_mempool_free(mp);
	rte_eal_cleanup();
	return rc;
}
