package qpx

// PSNOrder is where a received PSN falls against the expected one.
type PSNOrder uint8

const (
	// PSNInOrder: the PSN expected.
	PSNInOrder PSNOrder = iota
	// PSNAhead: later than expected (packets in between are missing): out
	// of sequence.
	PSNAhead
	// PSNBehind: earlier than expected: a duplicate or a retransmission.
	PSNBehind
)

func (o PSNOrder) String() string {
	switch o {
	case PSNInOrder:
		return "in-order"
	case PSNAhead:
		return "ahead"
	}
	return "behind"
}

// ComparePSN places psn against expected in 24-bit serial arithmetic (IBA
// §9.7.1: a PSN is ahead when it lies in the half of the space after the
// expected one).
func ComparePSN(expected, psn uint32) PSNOrder {
	d := (psn - expected) & MaxQPN
	switch {
	case d == 0:
		return PSNInOrder
	case d < 1<<23:
		return PSNAhead
	}
	return PSNBehind
}

// AddPSN returns psn+n in 24 bits.
func AddPSN(psn, n uint32) uint32 { return (psn + n) & MaxQPN }

// CheckRx checks a received PSN against the context's ExpectedPSN and moves
// the expectation past it: to psn+span for a packet in order or ahead (a
// packet ahead resynchronises the check, so one loss is counted once),
// unchanged for one behind. span is the PSNs the packet occupies (1; an
// RDMA READ request occupies one per response packet).
func (c *Context) CheckRx(psn, span uint32) PSNOrder {
	o := ComparePSN(c.ExpectedPSN, psn)
	if o != PSNBehind {
		c.ExpectedPSN = AddPSN(psn, span)
	}
	return o
}

// CheckTx checks a PSN the host sends against the context's NextPSN the same
// way (a resent packet is behind).
func (c *Context) CheckTx(psn, span uint32) PSNOrder {
	o := ComparePSN(c.NextPSN, psn)
	if o != PSNBehind {
		c.NextPSN = AddPSN(psn, span)
	}
	return o
}
