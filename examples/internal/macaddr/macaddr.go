// Package macaddr reads the MAC addresses the examples are given.
package macaddr

import (
	"encoding/hex"
	"fmt"
	"net"
)

// Parse reads a MAC address as net.ParseMAC does, or as 12 hex digits
// (how peregrine serve prints its echo peer's).
func Parse(s string) ([6]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 6 {
		return [6]byte(b), nil
	}
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return [6]byte{}, fmt.Errorf("%q is not a 6-byte MAC address", s)
	}
	return [6]byte(mac), nil
}
