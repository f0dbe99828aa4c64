package afpacket

// TxHeld returns how many frames queue q holds unsent (Options.TxBatch).
func TxHeld(p *Port, q int) int { return p.queues[q].txHeld }
