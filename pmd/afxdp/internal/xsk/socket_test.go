package xsk

import (
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestBusyPollRefusalNamesTheErrno: an option the kernel refuses comes
// back as an *OptionError naming the option, the value and the errno, and
// what it accepts reads back as set.
func TestBusyPollRefusalNamesTheErrno(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: AF_XDP sockets need CAP_NET_RAW")
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	s := &Socket{fd: fd}
	defer s.Close()

	// The kernel takes budgets up to U16_MAX only.
	err = s.SetBusyPoll(BusyPoll{Usec: 10, Budget: 70000})
	var oe *OptionError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "SO_BUSY_POLL_BUDGET", oe.Name)
	require.True(t, errors.Is(err, unix.EINVAL))
	require.Contains(t, err.Error(), "the kernel refused SO_BUSY_POLL_BUDGET=70000: EINVAL")

	err = s.SetBusyPoll(BusyPoll{Usec: -1})
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "SO_BUSY_POLL", oe.Name)
	require.Contains(t, err.Error(), "SO_BUSY_POLL=-1: EINVAL")

	want := BusyPoll{Usec: 25, Budget: 8, Prefer: true}
	require.NoError(t, s.SetBusyPoll(want))
	got, err := s.BusyPollSettings()
	require.NoError(t, err)
	if got.Budget == -1 {
		want.Budget = -1 // this kernel does not report it
	}
	require.Equal(t, want, got)
}
