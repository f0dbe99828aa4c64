package fabric

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/peregrine-net/peregrine/internal/units"
)

// Percent is a probability in percent: 1 means 1 %, 100 means always.
type Percent float64

// Dist is the distribution of the jitter added to a frame's delay.
type Dist uint8

const (
	// DistUniform draws the jitter uniformly from [0, Jitter].
	DistUniform Dist = iota
	// DistNormal draws it from a normal distribution of mean Jitter/2 and
	// standard deviation Jitter/4, redrawn while outside [0, Jitter] (so
	// about 95 % of frames land within one draw).
	DistNormal
)

// Order says whether jitter may reorder frames on one path.
type Order uint8

const (
	// OrderFIFO keeps each path first-in first-out, like a real queue: a
	// frame is never released before the frame that entered its path before
	// it (its release is raised to that frame's when jitter would let it
	// overtake). Jitter then delays bunches of frames instead of shuffling
	// them. Frames picked by Reorder are exempt, and frames of different
	// paths overtake each other freely.
	OrderFIFO Order = iota
	// OrderFree releases every frame at its own jittered time, so jitter
	// alone reorders frames, as netem does without a rate.
	OrderFree
)

// Spray says how frames that need not stay in order pick a path.
type Spray uint8

const (
	// SprayRoundRobin deals such frames to the paths in turn.
	SprayRoundRobin Spray = iota
	// SprayRandom picks a path uniformly at random for each.
	SprayRandom
	// SprayEntropy hashes each frame's own 5-tuple, as an ECMP switch
	// does: a sender that varies a per-packet entropy field (the UDP
	// source port of IOI's sprayed packets) spreads its frames over the
	// paths, and one that does not stays on one path.
	SprayEntropy
	// SprayAdaptive sends each frame down the path whose own link frees
	// earliest (adaptive routing: the least backlog), ties going round
	// robin. It needs PathRate; without it, it deals round-robin.
	SprayAdaptive
)

// GilbertElliott is a two-state (good, bad) Markov loss model. Before each
// frame the state moves good→bad with probability P or bad→good with
// probability R; the frame is then lost with probability BadLoss in the bad
// state and GoodLoss in the good one. With BadLoss 100 % and GoodLoss 0 the
// losses come in runs of mean length 100/R frames, one run starting every
// 100/P good frames on average. It is netem's "loss gemodel p r 1-h 1-k".
type GilbertElliott struct {
	P, R              Percent
	BadLoss, GoodLoss Percent
}

// Enabled reports whether the model is configured (P > 0).
func (g GilbertElliott) Enabled() bool { return g.P > 0 }

// Profile describes the impairments of one direction of a fabric. The zero
// Profile forwards every frame at once, untouched. Frames go through the
// stages in this order: loss (random, then Gilbert-Elliott), duplication,
// the Limit, the TTL (Hops), the rate limiter's queue, corruption, path choice, then delay,
// jitter and reordering. See the package documentation for the model of
// each.
type Profile struct {
	// Loss drops each frame with this probability (loss=1%).
	Loss Percent
	// Burst is the Gilbert-Elliott burst loss model (burst=P%/R%/BAD%/GOOD%).
	Burst GilbertElliott
	// Dup sends a second, identical copy of each frame with this
	// probability (dup=0.1%).
	Dup Percent
	// Reorder holds each frame back by an extra ReorderDelay with this
	// probability, so the frames behind it overtake it (reorder=5%/200us).
	Reorder      Percent
	ReorderDelay time.Duration
	// Corrupt flips one random bit of each frame with this probability
	// (corrupt=0.01%): a bit past the 14-byte Ethernet header, or anywhere
	// in the frame when CorruptL2 is set (corrupt=0.01%/any).
	Corrupt   Percent
	CorruptL2 bool
	// Delay is added to every frame (delay=50us); Jitter adds a random
	// extra in [0, Jitter] drawn from Dist (jitter=10us, dist=normal).
	Delay, Jitter time.Duration
	Dist          Dist
	// Order says whether jitter may reorder a path (order=fifo|free).
	Order Order
	// Rate limits the direction to this many bit/s, 0 for no limit
	// (rate=10gbit). Each frame counts its bytes plus Overhead (overhead=24
	// adds Ethernet's preamble, inter-frame gap and FCS).
	Rate     uint64
	Overhead int
	// QueuePackets or QueueBytes bound the rate limiter's queue, counting
	// the frame on the wire; frames beyond it are tail-dropped (queue=1000
	// or queue=256KiB; a frame larger than QueueBytes never fits). At most
	// one may be set; with Rate and neither, the queue holds DefaultQueue
	// frames. They need Rate.
	QueuePackets int
	QueueBytes   int
	// Paths is the number of parallel paths (paths=4; 0 means 1). Path i
	// adds i*Spread to Delay (spread=20us). Frames classified in-order keep
	// the path their flow hash picks; the others are sprayed by Spray
	// (spray=rr|random).
	Paths  int
	Spread time.Duration
	Spray  Spray
	// Each path may have its own capacity (paths=4,path-rate=1gbit): a
	// serialising link of PathRate bit/s with a queue of PathQueue frames
	// (default DefaultQueue, counting the frame on the wire; beyond it
	// frames are tail-dropped, PathQueueFull), its own loss PathLoss
	// (PathLossDrops), and PathDelay added to Delay in place of i*Spread
	// (path-delay=0/2us/5us/10us). A frame meets its path's link after the
	// direction's shared link (Rate: the sender's access link). Each list
	// holds one value, for every path, or one per path.
	PathRate  []uint64
	PathQueue []int
	PathLoss  []Percent
	PathDelay []time.Duration
	// PathDown lists the paths that are down (path-down=2 or
	// path-down=1/3, path indexes from 0): a black hole the direction's
	// spraying does not see, as when a link beyond the first switch fails.
	// A frame sent down such a path still takes its place on the path's
	// own link (so adaptive spraying finds the path no busier or idler
	// than its traffic makes it) and is then lost (PathDownDrops). The
	// senders must notice and steer around it; Fabric.SetPathDown and the
	// fabric's Schedule take a path down and bring it back at run time.
	PathDown []int
	// Hops is how many routers the direction stands for (hops=3): each IP
	// frame leaves with its IPv4 TTL (header checksum updated) or IPv6 hop
	// limit that much lower, and one that arrives with no more than Hops
	// left is dropped (TTLExpired) without an ICMP message. Receivers that
	// infer path length from the TTL (peregrine's transport, for Swift's
	// per-hop target) then see it. 0 leaves frames untouched, like a
	// bridge or netem. Other frames (ARP, VLAN-tagged) pass unchanged.
	Hops int
	// Limit bounds the frames the direction holds at once (in its delay
	// line, which includes the rate queue); frames beyond it are
	// tail-dropped (limit=8192; 0 means DefaultLimit). At most one more
	// burst may wait for an output port that refused it.
	Limit int
}

// Limits and defaults of Profile fields.
const (
	DefaultLimit = 8192
	MaxLimit     = 1 << 22
	DefaultQueue = 1000 // packets, when Rate is set and no queue is
	MaxQueue     = MaxLimit
	MaxQueueB    = 1 << 30
	MaxPaths     = 64
	MaxHops      = 255
	MaxOverhead  = 1024
	MaxRate      = 1e13 // 10 tbit/s
	// MaxDuration bounds every duration of a Profile, so that release times
	// never overflow.
	MaxDuration = time.Hour
)

// ProfileSyntax is the grammar of a profile string, quoted in parse errors.
const ProfileSyntax = `comma-separated KEY=VALUE items, all optional:
  loss=P%                      drop at random
  burst=P%/R%[/BAD%[/GOOD%]]   Gilbert-Elliott burst loss: P good->bad, R bad->good, loss in bad state (default 100%) and good state (default 0%)
  dup=P%                       duplicate
  reorder=P%/DURATION          hold back by an extra DURATION
  corrupt=P%[/any]             flip one bit past the Ethernet header (or anywhere)
  delay=DURATION jitter=DURATION dist=uniform|normal order=fifo|free
  rate=N{bit,kbit,mbit,gbit,tbit} overhead=BYTES queue=PACKETS|N{B,KB,KiB,MB,MiB}
  paths=N spread=DURATION spray=rr|random|entropy|adaptive
  path-rate=RATE[/RATE...] path-queue=PACKETS[/...] path-loss=P%[/...] path-delay=DURATION[/...]
                               each path's own link, queue, loss and extra delay (one value, or one per path)
  path-down=I[/I...]           paths (from 0) that are down: a black hole spraying does not see
  hops=N                       lower the IP TTL / hop limit by N (a path of N routers)
  limit=PACKETS
e.g. loss=1%,burst=0.5%/30%/50%,dup=0.1%,reorder=5%/200us,corrupt=0.01%,delay=50us,jitter=10us,rate=10gbit,queue=1000,paths=4,spread=20us,hops=3
     paths=4,path-rate=1gbit,path-delay=0/2us/5us/10us,spray=adaptive`

// ErrBadProfile is wrapped by every error about a profile: a string that
// does not parse or a Profile value out of range.
var ErrBadProfile = errors.New("fabric: bad profile")

// profileKeys lists the keys in the order String writes them.
var profileKeys = [...]string{"loss", "burst", "dup", "reorder", "corrupt", "delay", "jitter", "dist", "order",
	"rate", "overhead", "queue", "paths", "spread", "spray", "path-rate", "path-queue", "path-loss", "path-delay", "path-down", "hops", "limit"}

// keySyntax is each key's own syntax, for its error messages.
var keySyntax = map[string]string{
	"loss":       "loss=P% (e.g. loss=1%)",
	"burst":      "burst=P%/R%[/BAD%[/GOOD%]] (e.g. burst=0.5%/30%/50%)",
	"dup":        "dup=P% (e.g. dup=0.1%)",
	"reorder":    "reorder=P%/DURATION (e.g. reorder=5%/200us)",
	"corrupt":    "corrupt=P%[/any] (e.g. corrupt=0.01%)",
	"delay":      "delay=DURATION (e.g. delay=50us)",
	"jitter":     "jitter=DURATION (e.g. jitter=10us)",
	"dist":       "dist=uniform|normal",
	"order":      "order=fifo|free",
	"rate":       "rate=N{bit,kbit,mbit,gbit,tbit} (e.g. rate=10gbit)",
	"overhead":   "overhead=BYTES (e.g. overhead=24)",
	"queue":      "queue=PACKETS or queue=N{B,KB,KiB,MB,MiB} (e.g. queue=1000 or queue=256KiB)",
	"paths":      "paths=N (e.g. paths=4)",
	"spread":     "spread=DURATION (e.g. spread=20us)",
	"spray":      "spray=rr|random|entropy|adaptive",
	"path-rate":  "path-rate=RATE or RATE/RATE/... one per path (e.g. path-rate=1gbit)",
	"path-queue": "path-queue=PACKETS or one per path (e.g. path-queue=100)",
	"path-loss":  "path-loss=P% or one per path (e.g. path-loss=1% or path-loss=0%/0%/5%/0%)",
	"path-delay": "path-delay=DURATION or one per path (e.g. path-delay=0/2us/5us/10us)",
	"path-down":  "path-down=I or I/I/... path indexes from 0 (e.g. path-down=2)",
	"hops":       "hops=N (e.g. hops=3)",
	"limit":      "limit=PACKETS (e.g. limit=8192)",
}

// ParseProfile parses a profile string such as
// "loss=1%,delay=50us,jitter=10us,rate=10gbit" (see ProfileSyntax). The
// empty string is the zero Profile. The result is validated; errors wrap
// ErrBadProfile and name the offending key with its syntax.
func ParseProfile(s string) (Profile, error) {
	var p Profile
	seen := make(map[string]bool)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, value, ok := strings.Cut(item, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if _, known := keySyntax[key]; !known {
			return Profile{}, fmt.Errorf("%w: unknown key %q in %q; syntax:\n%s", ErrBadProfile, key, s, ProfileSyntax)
		}
		if !ok || value == "" {
			return Profile{}, fmt.Errorf("%w: key %q has no value (syntax %s)", ErrBadProfile, key, keySyntax[key])
		}
		if seen[key] {
			return Profile{}, fmt.Errorf("%w: key %q is given twice in %q (give it once)", ErrBadProfile, key, s)
		}
		seen[key] = true
		if err := p.set(key, value); err != nil {
			return Profile{}, fmt.Errorf("%w: %s=%s: %v (syntax %s)", ErrBadProfile, key, value, err, keySyntax[key])
		}
	}
	if err := p.Validate(); err != nil {
		return Profile{}, err
	}
	return p, nil
}

// set parses one key's value into p.
func (p *Profile) set(key, value string) error {
	var err error
	switch key {
	case "loss":
		p.Loss, err = parsePercent(value)
	case "burst":
		parts := strings.Split(value, "/")
		if len(parts) < 2 || len(parts) > 4 {
			return fmt.Errorf("want 2 to 4 percentages separated by '/', got %d", len(parts))
		}
		g := GilbertElliott{BadLoss: 100}
		fields := []*Percent{&g.P, &g.R, &g.BadLoss, &g.GoodLoss}
		for i, part := range parts {
			if *fields[i], err = parsePercent(part); err != nil {
				return err
			}
		}
		p.Burst = g
	case "dup":
		p.Dup, err = parsePercent(value)
	case "reorder":
		prob, delay, ok := strings.Cut(value, "/")
		if !ok {
			return errors.New("missing '/DURATION', the extra delay of a reordered frame")
		}
		if p.Reorder, err = parsePercent(prob); err != nil {
			return err
		}
		p.ReorderDelay, err = parseDuration(delay)
	case "corrupt":
		prob, where, hasWhere := strings.Cut(value, "/")
		if hasWhere {
			if where != "any" {
				return fmt.Errorf("unknown place %q (only \"any\" may follow the '/')", where)
			}
			p.CorruptL2 = true
		}
		p.Corrupt, err = parsePercent(prob)
	case "delay":
		p.Delay, err = parseDuration(value)
	case "jitter":
		p.Jitter, err = parseDuration(value)
	case "dist":
		switch value {
		case "uniform":
			p.Dist = DistUniform
		case "normal":
			p.Dist = DistNormal
		default:
			return fmt.Errorf("unknown distribution %q", value)
		}
	case "order":
		switch value {
		case "fifo":
			p.Order = OrderFIFO
		case "free":
			p.Order = OrderFree
		default:
			return fmt.Errorf("unknown order %q", value)
		}
	case "rate":
		p.Rate, err = parseRate(value)
	case "overhead":
		p.Overhead, err = parseCount(value)
	case "queue":
		if n, perr := parseCount(value); perr == nil {
			p.QueuePackets = n
		} else {
			p.QueueBytes, err = parseBytes(value)
		}
	case "paths":
		p.Paths, err = parseCount(value)
	case "spread":
		p.Spread, err = parseDuration(value)
	case "spray":
		switch value {
		case "rr":
			p.Spray = SprayRoundRobin
		case "random":
			p.Spray = SprayRandom
		case "entropy":
			p.Spray = SprayEntropy
		case "adaptive":
			p.Spray = SprayAdaptive
		default:
			return fmt.Errorf("unknown spray mode %q", value)
		}
	case "path-rate":
		p.PathRate, err = parseList(value, parseRate)
	case "path-queue":
		p.PathQueue, err = parseList(value, parseCount)
	case "path-loss":
		p.PathLoss, err = parseList(value, parsePercent)
	case "path-delay":
		p.PathDelay, err = parseList(value, parseDuration)
	case "path-down":
		p.PathDown, err = parseList(value, parseCount)
	case "hops":
		p.Hops, err = parseCount(value)
	case "limit":
		p.Limit, err = parseCount(value)
	}
	return err
}

// String formats p in the syntax ParseProfile reads, listing only the keys
// that differ from the zero Profile; ParseProfile(p.String()) returns p.
func (p Profile) String() string {
	var b strings.Builder
	add := func(key, value string) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(key)
		b.WriteByte('=')
		b.WriteString(value)
	}
	for _, key := range profileKeys {
		switch key {
		case "loss":
			if p.Loss != 0 {
				add(key, formatPercent(p.Loss))
			}
		case "burst":
			if p.Burst != (GilbertElliott{}) {
				v := formatPercent(p.Burst.P) + "/" + formatPercent(p.Burst.R)
				if p.Burst.BadLoss != 100 || p.Burst.GoodLoss != 0 {
					v += "/" + formatPercent(p.Burst.BadLoss)
				}
				if p.Burst.GoodLoss != 0 {
					v += "/" + formatPercent(p.Burst.GoodLoss)
				}
				add(key, v)
			}
		case "dup":
			if p.Dup != 0 {
				add(key, formatPercent(p.Dup))
			}
		case "reorder":
			if p.Reorder != 0 || p.ReorderDelay != 0 {
				add(key, formatPercent(p.Reorder)+"/"+formatDuration(p.ReorderDelay))
			}
		case "corrupt":
			if p.Corrupt != 0 || p.CorruptL2 {
				v := formatPercent(p.Corrupt)
				if p.CorruptL2 {
					v += "/any"
				}
				add(key, v)
			}
		case "delay":
			if p.Delay != 0 {
				add(key, formatDuration(p.Delay))
			}
		case "jitter":
			if p.Jitter != 0 {
				add(key, formatDuration(p.Jitter))
			}
		case "dist":
			if p.Dist == DistNormal {
				add(key, "normal")
			} else if p.Dist != DistUniform {
				add(key, fmt.Sprintf("Dist(%d)", p.Dist))
			}
		case "order":
			if p.Order == OrderFree {
				add(key, "free")
			} else if p.Order != OrderFIFO {
				add(key, fmt.Sprintf("Order(%d)", p.Order))
			}
		case "rate":
			if p.Rate != 0 {
				add(key, formatRate(p.Rate))
			}
		case "overhead":
			if p.Overhead != 0 {
				add(key, strconv.Itoa(p.Overhead))
			}
		case "queue":
			if p.QueuePackets != 0 {
				add(key, strconv.Itoa(p.QueuePackets))
			}
			if p.QueueBytes != 0 {
				add(key, formatBytes(p.QueueBytes))
			}
		case "paths":
			if p.Paths != 0 {
				add(key, strconv.Itoa(p.Paths))
			}
		case "spread":
			if p.Spread != 0 {
				add(key, formatDuration(p.Spread))
			}
		case "spray":
			switch p.Spray {
			case SprayRoundRobin:
			case SprayRandom:
				add(key, "random")
			case SprayEntropy:
				add(key, "entropy")
			case SprayAdaptive:
				add(key, "adaptive")
			default:
				add(key, fmt.Sprintf("Spray(%d)", p.Spray))
			}
		case "path-rate":
			if len(p.PathRate) > 0 {
				add(key, formatList(p.PathRate, formatRate))
			}
		case "path-queue":
			if len(p.PathQueue) > 0 {
				add(key, formatList(p.PathQueue, strconv.Itoa))
			}
		case "path-loss":
			if len(p.PathLoss) > 0 {
				add(key, formatList(p.PathLoss, formatPercent))
			}
		case "path-delay":
			if len(p.PathDelay) > 0 {
				add(key, formatList(p.PathDelay, formatDuration))
			}
		case "path-down":
			if len(p.PathDown) > 0 {
				add(key, formatList(p.PathDown, strconv.Itoa))
			}
		case "hops":
			if p.Hops != 0 {
				add(key, strconv.Itoa(p.Hops))
			}
		case "limit":
			if p.Limit != 0 {
				add(key, strconv.Itoa(p.Limit))
			}
		}
	}
	return b.String()
}

// Validate checks every field of p; errors wrap ErrBadProfile and name the
// field, its value and the fix.
func (p Profile) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadProfile, fmt.Sprintf(format, args...))
	}
	for _, pc := range []struct {
		name string
		v    Percent
	}{
		{"Loss", p.Loss}, {"Burst.P", p.Burst.P}, {"Burst.R", p.Burst.R}, {"Burst.BadLoss", p.Burst.BadLoss},
		{"Burst.GoodLoss", p.Burst.GoodLoss}, {"Dup", p.Dup}, {"Reorder", p.Reorder}, {"Corrupt", p.Corrupt},
	} {
		if !(pc.v >= 0 && pc.v <= 100) { // also catches NaN
			return bad("%s %v%% is out of range (use 0..100, in percent)", pc.name, float64(pc.v))
		}
	}
	if p.Burst.P > 0 && p.Burst.R == 0 {
		return bad("Burst.R is 0: the bad state would never end (give a bad->good probability, e.g. burst=%s/30%%)", formatPercent(p.Burst.P))
	}
	if p.Burst.P > 0 && p.Burst.BadLoss == 0 && p.Burst.GoodLoss == 0 {
		return bad("Burst.BadLoss and Burst.GoodLoss are both 0: the burst model would drop nothing (set BadLoss, e.g. 100)")
	}
	if p.Burst.P == 0 && p.Burst != (GilbertElliott{}) && p.Burst != (GilbertElliott{BadLoss: 100}) {
		return bad("Burst.P is 0 but other Burst fields are set: the model never leaves the good state (set P, e.g. burst=0.5%%/30%%)")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"ReorderDelay", p.ReorderDelay}, {"Delay", p.Delay}, {"Jitter", p.Jitter}, {"Spread", p.Spread}} {
		if d.v < 0 || d.v > MaxDuration {
			return bad("%s %v is out of range (use 0..%v)", d.name, d.v, MaxDuration)
		}
	}
	if p.Reorder > 0 && p.ReorderDelay == 0 {
		return bad("Reorder %s needs a ReorderDelay to hold frames back by (e.g. reorder=%s/200us)", formatPercent(p.Reorder), formatPercent(p.Reorder))
	}
	if p.Dist > DistNormal {
		return bad("Dist %d is unknown (use DistUniform or DistNormal)", p.Dist)
	}
	if p.Order > OrderFree {
		return bad("Order %d is unknown (use OrderFIFO or OrderFree)", p.Order)
	}
	if p.Spray > SprayAdaptive {
		return bad("Spray %d is unknown (use SprayRoundRobin, SprayRandom, SprayEntropy or SprayAdaptive)", p.Spray)
	}
	if p.Rate > MaxRate {
		return bad("Rate %d bit/s is out of range (use up to %s, or 0 for no limit)", p.Rate, formatRate(MaxRate))
	}
	if p.Overhead < 0 || p.Overhead > MaxOverhead {
		return bad("Overhead %d is out of range (use 0..%d bytes; 24 is Ethernet's preamble, gap and FCS)", p.Overhead, MaxOverhead)
	}
	if p.QueuePackets < 0 || p.QueuePackets > MaxQueue {
		return bad("QueuePackets %d is out of range (use 1..%d, or 0 for the default)", p.QueuePackets, MaxQueue)
	}
	if p.QueueBytes < 0 || p.QueueBytes > MaxQueueB {
		return bad("QueueBytes %d is out of range (use 1..%d, or 0 for none)", p.QueueBytes, MaxQueueB)
	}
	if p.QueuePackets > 0 && p.QueueBytes > 0 {
		return bad("QueuePackets %d and QueueBytes %d are both set (bound the queue in packets or in bytes, not both)", p.QueuePackets, p.QueueBytes)
	}
	if p.Rate == 0 && (p.QueuePackets > 0 || p.QueueBytes > 0 || p.Overhead > 0) {
		return bad("a queue or overhead is set without Rate: only the rate limiter queues (set a rate, e.g. rate=10gbit)")
	}
	if p.Hops < 0 || p.Hops > MaxHops {
		return bad("Hops %d is out of range (use 0..%d routers per direction)", p.Hops, MaxHops)
	}
	if p.Paths < 0 || p.Paths > MaxPaths {
		return bad("Paths %d is out of range (use 1..%d, or 0 for one path)", p.Paths, MaxPaths)
	}
	if p.Spread > 0 && p.Paths <= 1 {
		return bad("Spread %v needs more than one path (set paths, e.g. paths=4)", p.Spread)
	}
	if err := p.validatePaths(); err != nil {
		return bad("%v", err)
	}
	if p.Limit < 0 || p.Limit > MaxLimit {
		return bad("Limit %d is out of range (use 1..%d, or 0 for %d)", p.Limit, MaxLimit, DefaultLimit)
	}
	if time.Duration(p.paths()-1)*p.Spread+p.maxPathDelay()+p.Delay+p.Jitter+p.ReorderDelay > 2*MaxDuration {
		return bad("the largest delay (delay + jitter + reorder delay + spread*(paths-1)) exceeds %v", 2*MaxDuration)
	}
	return nil
}

func (p Profile) paths() int { return max(p.Paths, 1) }

// validatePaths checks the per-path lists: each holds one value or one per
// path, in range.
func (p Profile) validatePaths() error {
	for _, l := range []struct {
		name, key string
		n         int
	}{{"PathRate", "path-rate", len(p.PathRate)}, {"PathQueue", "path-queue", len(p.PathQueue)},
		{"PathLoss", "path-loss", len(p.PathLoss)}, {"PathDelay", "path-delay", len(p.PathDelay)}} {
		if l.n > 1 && l.n != p.paths() {
			return fmt.Errorf("%s has %d values for %d paths (give one value for every path or exactly %d, e.g. %s=1gbit)", l.name, l.n, p.paths(), p.paths(), l.key)
		}
	}
	for i, r := range p.PathRate {
		if r > MaxRate {
			return fmt.Errorf("PathRate[%d] %d bit/s is out of range (use up to %s, or 0 for no limit)", i, r, formatRate(MaxRate))
		}
	}
	for i, q := range p.PathQueue {
		if q < 0 || q > MaxQueue {
			return fmt.Errorf("PathQueue[%d] %d is out of range (use 1..%d, or 0 for %d)", i, q, MaxQueue, DefaultQueue)
		}
	}
	if len(p.PathQueue) > 0 && len(p.PathRate) == 0 {
		return errors.New("PathQueue is set without PathRate: only a path's own link queues (set path-rate, e.g. path-rate=1gbit)")
	}
	for i, l := range p.PathLoss {
		if !(l >= 0 && l <= 100) {
			return fmt.Errorf("PathLoss[%d] %v%% is out of range (use 0..100, in percent)", i, float64(l))
		}
	}
	for i, d := range p.PathDelay {
		if d < 0 || d > MaxDuration {
			return fmt.Errorf("PathDelay[%d] %v is out of range (use 0..%v)", i, d, MaxDuration)
		}
	}
	for i, k := range p.PathDown {
		if k < 0 || k >= p.paths() {
			return fmt.Errorf("PathDown[%d] names path %d of %d (paths are numbered from 0)", i, k, p.paths())
		}
	}
	if len(p.PathDown) > 0 && p.paths() == 1 {
		return errors.New("PathDown needs more than one path: a direction whose only path is down is a link down (use SetLinkDown)")
	}
	if len(p.PathDelay) > 0 && p.Spread > 0 {
		return fmt.Errorf("PathDelay and Spread are both set (give each path's delay with path-delay, or a constant step with spread, not both)")
	}
	return nil
}

// pathAt returns path i's value of a per-path list (zero when empty).
func pathAt[T any](l []T, i int) T {
	var zero T
	switch len(l) {
	case 0:
		return zero
	case 1:
		return l[0]
	}
	return l[i]
}

func (p Profile) maxPathDelay() time.Duration {
	var m time.Duration
	for _, d := range p.PathDelay {
		m = max(m, d)
	}
	return m
}

// parseList reads one value or several separated by '/'.
func parseList[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for part := range strings.SplitSeq(s, "/") {
		v, err := parse(strings.TrimSpace(part))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func formatList[T any](l []T, format func(T) string) string {
	parts := make([]string, len(l))
	for i, v := range l {
		parts[i] = format(v)
	}
	return strings.Join(parts, "/")
}

func (p Profile) limit() int {
	if p.Limit == 0 {
		return DefaultLimit
	}
	return p.Limit
}

func parsePercent(s string) (Percent, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q needs a percent sign (e.g. 1%%)", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || !(v >= 0 && v <= 100) {
		return 0, fmt.Errorf("%q is not a percentage in 0..100%%", s)
	}
	return Percent(v), nil
}

func formatPercent(p Percent) string { return strconv.FormatFloat(float64(p), 'g', -1, 64) + "%" }

func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 50us, 1.5ms or 0", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// formatDuration writes d in the largest unit that divides it exactly, in
// ASCII ("us", not "µs") so profiles stay easy to type.
func formatDuration(d time.Duration) string {
	for _, u := range []struct {
		unit time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}} {
		if d != 0 && d%u.unit == 0 {
			return strconv.FormatInt(int64(d/u.unit), 10) + u.name
		}
	}
	if d == 0 {
		return "0"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

var rateUnits = []struct {
	name string
	bits uint64
}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}}

// parseRate reads a bit rate with internal/units, the parser of every
// subcommand's --rate, but insists on a bit/s unit: a fabric link limits
// bits, and a bare number would be read elsewhere as frames per second.
func parseRate(s string) (uint64, error) {
	r, err := units.ParseRate(s)
	if errors.Is(err, units.ErrUnit) {
		return 0, fmt.Errorf("%q has no unit fabric knows (bit/s units: bit, kbit, mbit, gbit, tbit)", s)
	}
	if err != nil {
		return 0, err
	}
	if r.Bits == 0 && r.PPS == 0 {
		return 0, fmt.Errorf("%q is not a positive rate", s)
	}
	if r.Bits == 0 {
		return 0, fmt.Errorf("%q has no unit (bit/s units: bit, kbit, mbit, gbit, tbit)", s)
	}
	bps := math.Round(r.Bits)
	if bps < 1 || bps > MaxRate {
		return 0, fmt.Errorf("%q is out of range (use 1bit..%s)", s, formatRate(MaxRate))
	}
	return uint64(bps), nil
}

func formatRate(bps uint64) string {
	for _, u := range rateUnits {
		if bps%u.bits == 0 {
			return strconv.FormatUint(bps/u.bits, 10) + u.name
		}
	}
	return strconv.FormatUint(bps, 10) + "bit"
}

func parseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return n, nil
}

// parseBytes reads a queue size in bytes with internal/units (B, KB, KiB,
// MB, MiB … as every subcommand's sizes).
func parseBytes(s string) (int, error) {
	n, err := units.ParseSize(s)
	if errors.Is(err, units.ErrUnit) {
		return 0, fmt.Errorf("%q is neither a packet count nor a size in B, KB, KiB, MB or MiB", s)
	}
	if err != nil {
		return 0, err
	}
	if n <= 0 || n > MaxQueueB {
		return 0, fmt.Errorf("%q is not a size in 1B..1GiB", s)
	}
	return int(n), nil
}

func formatBytes(n int) string {
	switch {
	case n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "MiB"
	case n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}
