package units

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0 ns", 850: "850 ns", 999: "999 ns", 1000: "1.00 µs", 655_400: "655 µs", 999_700: "1.00 ms",
		176_234_000: "176 ms", 12_340_000: "12.3 ms", 2_049_000_000: "2.05 s", 90 * time.Second: "90.0 s", -1500: "-1.50 µs",
	} {
		require.Equal(t, want, FormatDuration(d), "%d", int64(d))
	}
	require.Equal(t, "n/a", FormatLatency(0, 0))
	require.Equal(t, "176 ms", FormatLatency(176_234_000, 3))
}
