//go:build !race

package txn

const sendRace = false
