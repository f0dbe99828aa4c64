package macaddr

import "testing"

func TestParse(t *testing.T) {
	want := [6]byte{2, 0x70, 0x67, 0, 0, 0xb}
	for _, s := range []string{"02:70:67:00:00:0b", "02706700000b"} {
		if m, err := Parse(s); err != nil || m != want {
			t.Errorf("Parse(%q) = %x, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "02:70", "0270670000", "zz706700000b"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q): no error", s)
		}
	}
}
