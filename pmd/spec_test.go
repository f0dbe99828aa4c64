package pmd_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/peregrine-net/peregrine/pmd"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in             string
		driver, target string
		params         url.Values
	}{
		{"mem:ab/0?queues=2", "mem", "ab/0", url.Values{"queues": {"2"}}},
		{"pcap:in.pcap?timing=recorded&loop=0", "pcap", "in.pcap", url.Values{"timing": {"recorded"}, "loop": {"0"}}},
		{"null:?size=64", "null", "", url.Values{"size": {"64"}}},
		{"null:", "null", "", url.Values{}},
		{"null:?", "null", "", url.Values{}},
		{"pcap-out:/tmp/a b.pcap", "pcap-out", "/tmp/a b.pcap", url.Values{}},
		{"afxdp:veth0?queue=0&mode=native&", "afxdp", "veth0", url.Values{"queue": {"0"}, "mode": {"native"}}},
		{"pcap:c:/x.pcap", "pcap", "c:/x.pcap", url.Values{}},
		{"null:?fill", "null", "", url.Values{"fill": {""}}},
		{"x:t?k=a%26b", "x", "t", url.Values{"k": {"a&b"}}},
	} {
		s, err := pmd.ParseSpec(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.driver, s.Driver, tc.in)
		require.Equal(t, tc.target, s.Target, tc.in)
		require.Equal(t, tc.params, s.Params, tc.in)
		require.Equal(t, tc.in, s.Raw)
		require.Equal(t, tc.in, s.String())
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"mem", `"mem" has no ':' after the driver name`},
		{"", `"" has no ':'`},
		{":x", "the driver name before ':' is empty"},
		{"Mem:x", `driver name "Mem" may hold only lower-case letters`},
		{"1mem:x", `driver name "1mem"`},
		{"mem:x?=3", `parameter "=3" has no name`},
		{"mem:x?a=1&a=2", `parameter "a" is given twice`},
		{"mem:x?a=%zz", `value of parameter "a"`},
	} {
		_, err := pmd.ParseSpec(tc.in)
		require.Error(t, err, tc.in)
		require.ErrorContains(t, err, tc.want, tc.in)
		if !strings.Contains(tc.want, "twice") {
			require.ErrorIs(t, err, pmd.ErrBadSpec, tc.in)
			require.ErrorContains(t, err, pmd.SpecSyntax, "parse errors show the syntax")
		}
	}
}

func TestParamHelpers(t *testing.T) {
	s, err := pmd.ParseSpec("d:t?n=5&b=0&c=fast&bad=x")
	require.NoError(t, err)
	n, err := s.Int("n", 1, 1, 10)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	n, err = s.Int("missing", 7, 1, 10)
	require.NoError(t, err)
	require.Equal(t, 7, n)
	_, err = s.Int("n", 1, 6, 10)
	require.ErrorContains(t, err, "d: parameter n=5 is out of range (use 6..10)")
	_, err = s.Int("bad", 1, 0, 10)
	require.ErrorIs(t, err, pmd.ErrBadParam)
	b, err := s.Bool("b", true)
	require.NoError(t, err)
	require.False(t, b)
	_, err = s.Bool("bad", true)
	require.ErrorContains(t, err, `bad="x" is not a boolean`)
	c, err := s.Choice("c", "x", "fast", "slow")
	require.NoError(t, err)
	require.Equal(t, "fast", c)
	_, err = s.Choice("bad", "x", "fast", "slow")
	require.ErrorContains(t, err, `bad="x" is not one of fast, slow`)
	require.NoError(t, s.CheckParams("n", "b", "c", "bad"))
	err = s.CheckParams("n", "b", "c")
	require.ErrorIs(t, err, pmd.ErrBadParam)
	require.ErrorContains(t, err, `unknown parameter "bad" in "d:t?n=5&b=0&c=fast&bad=x" (valid parameters: n, b, c)`)
	err = s.CheckParams()
	require.ErrorContains(t, err, "takes no parameters")

	hand := pmd.Spec{Driver: "d", Target: "t", Params: url.Values{"a": {"1"}}}
	require.Equal(t, "d:t?a=1", hand.String())
}

func FuzzParseSpec(f *testing.F) {
	for _, seed := range []string{
		"mem:ab/0?queues=2", "pcap:in.pcap?timing=recorded", "null:?size=64", "null:",
		"", ":", "a:?", "a:b?c", "a:b?c=d&c=e", "a:b?%", "a:b?=", "x:y?k=%41&&", "Ab:c", "a-b_c:d?e=f",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := pmd.ParseSpec(in)
		if err != nil {
			require.Empty(t, s.Driver)
			return
		}
		require.NotEmpty(t, s.Driver)
		require.Equal(t, in, s.Raw)
		require.True(t, strings.HasPrefix(in, s.Driver+":"))
		again, err := pmd.ParseSpec(s.Raw)
		require.NoError(t, err)
		require.Equal(t, s, again)
		for k := range s.Params {
			require.NotEmpty(t, k)
			require.Len(t, s.Params[k], 1)
		}
	})
}

// TestSplitCapture: the capture parameter comes off the spec whatever its
// place, the rest keeps its order and spelling; an empty file is refused.
func TestSplitCapture(t *testing.T) {
	for _, tc := range []struct{ in, rest, file string }{
		{"mem:a/0", "mem:a/0", ""},
		{"mem:a/0?capture=x.pcap", "mem:a/0", "x.pcap"},
		{"afxdp:veth0?queue=1&capture=/tmp/v.pcap&netns=b", "afxdp:veth0?queue=1&netns=b", "/tmp/v.pcap"},
		{"afpacket:eth1?capture=a%20b.pcap&netns=x", "afpacket:eth1?netns=x", "a b.pcap"},
	} {
		rest, file, err := pmd.SplitCapture(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.rest, rest, tc.in)
		require.Equal(t, tc.file, file, tc.in)
	}
	_, _, err := pmd.SplitCapture("mem:a/0?capture=")
	require.ErrorIs(t, err, pmd.ErrBadParam)
	require.ErrorContains(t, err, "capture= needs a file name")
}

// TestSamePort: the same device is the same port whatever parameters
// shape it; another queue, namespace or target is another; null ports
// are all distinct.
func TestSamePort(t *testing.T) {
	require.True(t, pmd.SamePort("afxdp:v0", "afxdp:v0?capture=x.pcap&ring=64"))
	require.True(t, pmd.SamePort("afpacket:eth1?netns=a", "afpacket:eth1?netns=a&block_count=8"))
	require.False(t, pmd.SamePort("afxdp:v0?queue=0", "afxdp:v0?queue=1"))
	require.False(t, pmd.SamePort("afxdp:v0?netns=a", "afxdp:v0?netns=b"))
	require.False(t, pmd.SamePort("afxdp:v0", "afpacket:v0"))
	require.False(t, pmd.SamePort("null:", "null:"))
}
