package ctl

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	m := Msg{Type: RError, ID: 7, Conn: 3, A: 1, B: 2, C: 4, Timeout: 99, MAC: [6]byte{2, 0, 0, 0, 0, 1}, Flag: 1, Status: 36, Text: "quota"}
	m.SetAddr(netip.MustParseAddr("198.18.0.9"))
	b := m.Encode(nil)
	var got Msg
	if err := got.Decode(b); err != nil {
		t.Fatal(err)
	}
	if got != m || got.Addr() != netip.MustParseAddr("198.18.0.9") {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
}

func TestDecodeRefuses(t *testing.T) {
	good := (&Msg{Type: TDial, ID: 1}).Encode(nil)
	cases := map[string][]byte{
		"short":        good[:MinLen-1],
		"length field": append(append([]byte{}, good...), 0),
		"version":      func() []byte { b := bytes.Clone(good); b[4] = 9; return b }(),
		"type zero":    func() []byte { b := bytes.Clone(good); b[6] = 0; return b }(),
		"type unknown": func() []byte { b := bytes.Clone(good); b[6] = byte(typeEnd); return b }(),
		"text on dial": (&Msg{Type: TDial, Text: "x"}).Encode(nil),
		"text length":  func() []byte { b := bytes.Clone(good); b[MinLen-2] = 1; return b }(),
	}
	for name, b := range cases {
		var m Msg
		if err := m.Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: Decode = %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add((&Msg{Type: TAttach, A: 64, B: 4096}).Encode(nil))
	f.Add((&Msg{Type: RError, Text: "no"}).Encode(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Msg
		if m.Decode(b) != nil {
			return
		}
		if again := m.Encode(nil); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
}
