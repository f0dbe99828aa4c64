package rt

import "time"

// rttEstimator keeps a connection's smoothed RTT and its retransmit
// timeout, after Jacobson and Karels (RFC 6298): the first sample sets
// SRTT = R and RTTVAR = R/2; later ones RTTVAR = 3/4 RTTVAR + 1/4 |SRTT-R|
// and SRTT = 7/8 SRTT + 1/8 R; RTO = SRTT + max(tick, 4 RTTVAR) + the
// receiver's ACK delay (the samples exclude the receiver's turnaround, the
// timer cannot), clamped to [MinRTO, MaxRTO].
//
// Karn's rule is applied where the sample is taken: a receiver echoes the
// timestamp of a packet only if it was not a retransmission, so no sample
// ever comes from an ambiguous packet.
type rttEstimator struct {
	srtt, rttvar time.Duration
	rto          time.Duration
	samples      uint64
}

func (r *rttEstimator) init(initial time.Duration) { *r = rttEstimator{rto: initial} }

func (r *rttEstimator) sample(rtt time.Duration, o *Options) {
	if rtt < 0 {
		return
	}
	if r.samples == 0 {
		r.srtt, r.rttvar = rtt, rtt/2
	} else {
		diff := r.srtt - rtt
		if diff < 0 {
			diff = -diff
		}
		r.rttvar = (3*r.rttvar + diff) / 4
		r.srtt = (7*r.srtt + rtt) / 8
	}
	r.samples++
	r.rto = min(max(r.srtt+max(o.TimerTick, 4*r.rttvar)+o.AckDelay, o.MinRTO), o.MaxRTO)
}

// backoff returns the timeout after n timeouts of one packet: RTO doubled
// n times, capped at max.
func (r *rttEstimator) backoff(n uint8, maxRTO time.Duration) time.Duration {
	d := r.rto
	for range min(n, 20) {
		d *= 2
		if d >= maxRTO {
			return maxRTO
		}
	}
	return min(d, maxRTO)
}
