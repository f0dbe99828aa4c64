//go:build race

package txn

// sendRace: the race detector slows the Send property suite about tenfold;
// it runs fewer seeds then (PEREGRINE_SIM_SEEDS still sets them).
const sendRace = true
