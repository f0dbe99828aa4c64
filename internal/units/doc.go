// Package units reads the quantities a user types on a command line or in a
// profile: byte sizes ("1500", "4KiB", "1MB", "1GiB") and rates ("1mpps",
// "500kpps", "10gbit", "100Mbit/s").
//
// One parser for each, so every subcommand and profile accepts the same
// spellings and refuses the same mistakes with the same words. Units are
// case-insensitive; IEC prefixes (Ki, Mi, Gi, Ti) are powers of 1024, SI
// prefixes (k, M, G, T) powers of 1000, as in iproute2 and ethtool. A size
// without a unit is bytes; a rate without a unit is frames per second.
// Errors quote the input exactly as it was typed, so the user sees what
// the program saw.
//
// The package is a leaf: it imports nothing of this module, so every layer
// may use it. It owns no buffers and keeps no state.
package units
