// Package cam is peregrine's software content-addressable memory: a
// fixed-capacity exact-match table that maps a small fixed-size key to an
// entry index. Every transport engine is built on one — the retransmission
// engine keyed by (CID, window, PSN), the reorder engine by (CID, RSN or SSN);
// QP translation by 24-bit global QPN will be one too once it is built — and
// keeps its per-entry context in an array of its own, indexed by the entry
// index the table hands out:
//
//	retx, _ := cam.New[RetxKey](cam.Options{Capacity: 4096, Seed: seed})
//	ctx := make([]RetxContext, retx.Cap())
//	idx, err := retx.Insert(RetxKey{CID: cid, Win: win, PSN: psn}) // on send
//	ctx[idx] = RetxContext{...}
//	if idx, ok := retx.Lookup(key); ok { ... ctx[idx] ... }        // on ACK
//	retx.DeleteIndex(idx)                                          // retire
//
// # Ownership
//
// The table owns only keys and the index free list. An entry index belongs to
// the key from the Insert that returned it until Delete or DeleteIndex of that
// key; until then it never changes (the table may move the key between its
// two buckets, never to another index), so callers may keep it in their
// contexts and in other tables. After the delete the index is free and the
// next Insert may hand it out again (last freed, first reused), so a caller
// must drop its references before deleting. A Table belongs to one goroutine
// (one lcore); it has no locks.
//
// # Keys
//
// K is any comparable type of 4, 8, 12 or 16 bytes, aligned to at least 4,
// made of integers and booleans (in structs and arrays) with no padding:
// uint32, uint64, Key16, struct{CID, Win, PSN uint32}. The table hashes the
// key's bytes; padding would make equal keys hash apart (and reading a padded
// key through memory is slow), so New refuses it and says which field to
// widen. Keys whose fields are 32 or 64 bits wide are the fastest.
//
// # Design and worst cases
//
// Bucketized cuckoo hashing over a fixed array of buckets, Capacity of them
// rounded up to a power of two (at least 2), four slots each, so the load
// never exceeds 25 % (memory is traded for branches: at 50 % load one key in
// nine drifts to its alternate bucket under churn, at 25 % one in sixty, and
// each such key's lookup and delete mispredicts a branch). A bucket is the four keys in place followed by 16 bytes
// of metadata — the four slots' 24-bit entry indexes, then their tags, one
// 32-bit word (0 = empty): for a 12-byte key one 64-byte cache line. The
// seeded hash (HashWords over the key's bytes: one 64×64→128-bit multiply)
// picks the primary bucket with its low bits, the alternate with the bits
// from 32 on and the 7-bit tag from the top. A lookup matches the tag against
// the bucket's four tags in one branch-free step on a 32-bit word (SWAR, the
// borrow test, whose lowest match is exact), then compares the full key (as
// two words) only where the tag matched.
//
// The common paths are written for the machine: Lookup, Insert and Delete
// each hash and probe in one function body with no bounds checks (the
// bucket, slot and index accessors in bucket_unsafe.go, whose arguments are
// in range by construction; the metadata ones are plain functions, not
// methods of the generic bucket, since an inlined generic method still
// loads and nil-checks its dictionary). Lookup calls nothing and spills
// nothing, so it runs without a stack frame; Insert and Delete leave their
// rare cases (a tag match, a full table or a stashed key, a key that may be
// in or must go to the alternate bucket on insert; a key in the alternate
// bucket on delete) to helpers that start over, so that few values are live
// on the common path.
// Every metadata access is one 32-bit word, and the tags word shares no byte
// with an index word, so the tags read that starts each operation is
// forwarded from the latest store to it even right after an insert or
// delete in the same bucket.
//
// An Insert goes to the primary bucket, else the alternate; a per-bucket
// overflow count records that keys of that primary bucket live elsewhere, so
// while it is zero (nearly always at this load) a lookup or a miss reads one
// bucket. When both buckets are full, a breadth-first search over at most 64
// full buckets looks for a chain of at most four keys that can each move to
// their other bucket; the search only reads, and the moves run from the free
// end, so each goes into a slot just emptied. A move carries the key's tag
// and entry index with it: keys move between slots, indexes never change. If
// no chain exists the key goes to a 16-entry stash, which drains back into
// buckets as slots free.
//
// Worst-case costs, each independent of the number of keys:
//
//   - Lookup, Delete: one hash; two buckets (8 tag checks, key compares only
//     on tag matches); the 16-entry stash. Typically: one bucket.
//   - Insert: the above, then at most 64 buckets searched (256 key hashes)
//     and 4 keys moved. Typically: one bucket write.
//   - DeleteIndex, KeyAt: O(1) through the index's position record.
//   - Range, Clear: O(Capacity).
//
// The burst calls (LookupBurst, InsertBurst, DeleteBurst; up to 64 keys, as
// a poll loop's packet burst) give the same results as the single-key calls
// in order, but hash every key and touch every primary bucket first, so the
// cache misses of a large table overlap instead of queueing.
//
// # SIMD
//
// Built with GOEXPERIMENT=simd on amd64, and on a CPU with AVX2, the tag
// match of Lookup, Delete and LookupBurst uses simd/archsimd (one VPCMPEQB
// over the bucket's metadata); without it, or on a CPU without AVX2, it uses
// the SWAR match (Insert always does: it needs the empty-slot mask from the
// same word too). Both give the same lowest match and, for the empty slots,
// the same mask (SWAR may also flag an occupied slot above a match, whose key
// compare then fails), and every caller takes the lowest bit or compares
// keys, so indexes do not depend on the build. With four tags per bucket the
// SWAR match is a handful of integer operations and measures the same as the
// SIMD one (within noise, either way); SIMD would pay off with 16 or 32 tags
// per bucket, which would move most keys out of their bucket's cache line.
//
// # Capacity guarantee
//
// Capacity keys always fit in practice: ErrFull is returned when Len() ==
// Cap(), the free list being exactly Capacity indexes long. A refusal below
// Capacity would need a set of keys whose buckets, after the 64-bucket
// search, leave no free slot, with the 16-entry stash also full; at 25 % load
// with two choices of four slots that is astronomically unlikely for keys the
// seeded hash spreads. The tests fill tables to capacity over many seeds,
// sizes and adversarially structured key sets, and churn full tables for
// 100 000 replacements, without ever touching the stash; neither did a
// one-off run of 200 seeds per size up to 65 536 keys with 20 replacements
// per key, nor 2^20 sequential QPNs. It is not impossible — keys crafted to
// hash into the same two buckets force it, and crafting them needs the seed
// — and then Insert returns ErrFull early and changes nothing. Give tables
// that face forged packets a secret seed; the transport inserts keys it chose
// itself (its own CIDs and PSNs), so only lookups see forged keys, and
// lookups are bounded whatever the keys.
//
// # Determinism
//
// No randomness at run time: the seed is Options.Seed (0 means DefaultSeed),
// the free list is a LIFO initialised to 0, 1, 2, …, and the displacement
// search is breadth-first in slot order. The same seed and the same sequence
// of operations give the same indexes, with or without SIMD, so a simulation
// replays exactly.
package cam
