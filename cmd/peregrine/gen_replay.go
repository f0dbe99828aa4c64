package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/peregrine-net/peregrine/internal/units"
	"github.com/peregrine-net/peregrine/pmd/pcap"
)

// gen --replay FILE sends a capture's frames (pcap or pcapng, read a
// record at a time, so larger than memory is fine) through a pcap: port
// whose timing paces them on the pipeline's clock: --timing fast,
// original (the capture's gaps), speed=N (its gaps divided by N) or rate
// (at --rate), --loop passes.

// timingHelp is --timing's help.
const timingHelp = "replay timing: fast, original (the capture's own gaps), speed=N (its gaps divided by N: 2 is twice as fast) or rate (at --rate)"

// replaySpec is the pcap: port spec of the replay. Parameters appear only
// when not the defaults: the spec names the port in the summary.
func (c *genConfig) replaySpec() string {
	q := url.Values{}
	if c.timing != "" && c.timing != "fast" {
		q.Set("timing", c.timing)
	}
	if t, _, _ := pcap.ParseTiming(c.timing); t == pcap.TimingRate {
		q.Set("rate", c.rate)
	}
	if c.loop != 1 {
		q.Set("loop", fmt.Sprint(c.loop))
	}
	spec := "pcap:" + c.replay
	if len(q) > 0 {
		// The values are flags already checked: keep them readable.
		enc, _ := url.QueryUnescape(q.Encode())
		spec += "?" + enc
	}
	return spec
}

// checkReplay checks the replay's flags before anything opens: the
// timing, --rate only to pace --timing rate (and then a rate, not max),
// the flags that shape generated frames, and the file, which must be a
// capture this port reads.
func (c *genConfig) checkReplay(flags *pflag.FlagSet) error {
	if err := inert(flags, "with --replay: the capture's frames are sent as they are", "size", "flows", "count", "src-mac", "dst-mac", "src-ip", "dst-ip", "src-port", "dst-port", "vlan"); err != nil {
		return err
	}
	t, _, err := pcap.ParseTiming(c.timing)
	if err != nil {
		return fmt.Errorf("--timing %w", err)
	}
	if t != pcap.TimingRate {
		if err := inert(flags, "unless --timing rate: the replay's timing paces it", "rate"); err != nil {
			return err
		}
	} else if r := strings.ToLower(strings.TrimSpace(c.rate)); r == "" || r == "max" {
		return fmt.Errorf("--timing rate needs --rate: give %s", units.RateHelp)
	} else if rate, err := units.ParseRate(c.rate); err != nil || rate.IsZero() {
		return fmt.Errorf("--rate %q: give %s", c.rate, units.RateHelp)
	}
	f, err := os.Open(c.replay)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("--replay %s: %w", c.replay, err)
	}
	defer f.Close()
	if _, err := pcap.OpenSource(c.replay, f); err != nil {
		return fmt.Errorf("--replay %w (give a pcap or pcapng file)", err)
	}
	return nil
}
