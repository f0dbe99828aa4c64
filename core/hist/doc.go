// Package hist holds fixed-size log-linear histograms for latencies and
// sizes: Record costs a few instructions and never allocates, so they can
// sit on the packet path. Histogram (7.6 KiB) answers quantiles within 1/16
// (6.25 %) relative error; HDR (58 KiB), HdrHistogram's layout with 128
// buckets per octave, within 1/128 (0.78 %), and lists its buckets for
// export.
//
// A histogram belongs to one goroutine. To read it from another, the owner
// copies it (a plain value copy) at a safe point, or Merge is called after
// the owner stopped.
package hist
