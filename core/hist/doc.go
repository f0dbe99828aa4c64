// Package hist is a fixed-size log-linear histogram for latencies and sizes:
// Record costs a few instructions and never allocates, so it can sit on the
// packet path; Quantile answers within 1/16 (6.25 %) relative error.
//
// A Histogram belongs to one goroutine. To read it from another, the owner
// copies it (a plain value copy) at a safe point, or Merge is called after
// the owner stopped.
package hist
