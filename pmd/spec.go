package pmd

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// SpecSyntax is the grammar of a port spec, quoted in parse errors.
const SpecSyntax = "DRIVER:TARGET[?KEY=VALUE&KEY=VALUE...]"

// ErrBadSpec is wrapped by every error caused by a malformed spec string.
var ErrBadSpec = errors.New("pmd: bad port spec")

// ErrBadParam is wrapped by every error about a spec parameter: unknown,
// repeated, or with a value the driver does not accept.
var ErrBadParam = errors.New("pmd: bad port parameter")

// Spec is a parsed port spec. Drivers read Target and Params; Raw is the
// string the spec was parsed from and becomes the port's Info().Name.
type Spec struct {
	Driver string
	Target string
	Params url.Values
	Raw    string
}

// ParseSpec splits "DRIVER:TARGET[?KEY=VALUE&...]" into a Spec. The driver
// name is lower-case letters, digits, '-' and '_', starting with a letter;
// the target may be empty ("null:") and is not interpreted here. A parameter
// given twice is an error, since a driver would have to guess which one was
// meant.
func ParseSpec(s string) (Spec, error) {
	colon := strings.IndexByte(s, ':')
	if colon < 0 {
		return Spec{}, fmt.Errorf("%w: %q has no ':' after the driver name (syntax %s, e.g. \"mem:ab/0\")", ErrBadSpec, s, SpecSyntax)
	}
	driver := s[:colon]
	if err := checkDriverName(driver); err != nil {
		return Spec{}, fmt.Errorf("%w: %q: %s (syntax %s)", ErrBadSpec, s, err, SpecSyntax)
	}
	target, query, hasQuery := strings.Cut(s[colon+1:], "?")
	spec := Spec{Driver: driver, Target: target, Params: url.Values{}, Raw: s}
	if !hasQuery || query == "" {
		return spec, nil
	}
	for pair := range strings.SplitSeq(query, "&") {
		if pair == "" {
			continue // tolerate "a=1&&b=2" and a trailing '&'
		}
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			return Spec{}, fmt.Errorf("%w: %q: parameter name %q: %v (syntax %s)", ErrBadSpec, s, rawKey, err, SpecSyntax)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return Spec{}, fmt.Errorf("%w: %q: value of parameter %q: %v (syntax %s)", ErrBadSpec, s, key, err, SpecSyntax)
		}
		if key == "" {
			return Spec{}, fmt.Errorf("%w: %q: parameter %q has no name (syntax %s)", ErrBadSpec, s, pair, SpecSyntax)
		}
		if spec.Params.Has(key) {
			return Spec{}, fmt.Errorf("%w: %q: parameter %q is given twice (give it once)", ErrBadParam, s, key)
		}
		spec.Params.Set(key, value)
	}
	return spec, nil
}

func checkDriverName(name string) error {
	if name == "" {
		return errors.New("the driver name before ':' is empty")
	}
	for i, c := range name {
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_'):
		default:
			return fmt.Errorf("driver name %q may hold only lower-case letters, digits, '-' and '_', starting with a letter", name)
		}
	}
	return nil
}

// String returns Raw, or a canonical form when the Spec was built by hand.
func (s Spec) String() string {
	if s.Raw != "" {
		return s.Raw
	}
	out := s.Driver + ":" + s.Target
	if len(s.Params) > 0 {
		out += "?" + s.Params.Encode()
	}
	return out
}

// CheckParams rejects any parameter not in valid, naming it and listing the
// valid ones. Drivers call it first thing in Open.
func (s Spec) CheckParams(valid ...string) error {
	keys := make([]string, 0, len(s.Params))
	for k := range s.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys) // report the same unknown parameter every time
	for _, k := range keys {
		if !slices.Contains(valid, k) {
			if len(valid) == 0 {
				return fmt.Errorf("%w: %s: unknown parameter %q in %q (this driver takes no parameters)", ErrBadParam, s.Driver, k, s.String())
			}
			return fmt.Errorf("%w: %s: unknown parameter %q in %q (valid parameters: %s)", ErrBadParam, s.Driver, k, s.String(), strings.Join(valid, ", "))
		}
	}
	return nil
}

// Int returns parameter name as an int in [lo, hi], or def when absent.
func (s Spec) Int(name string, def, lo, hi int) (int, error) {
	if !s.Params.Has(name) {
		return def, nil
	}
	raw := s.Params.Get(name)
	v, err := strconv.Atoi(raw)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: parameter %s=%q is not an integer (use %s=%d, say)", ErrBadParam, s.Driver, name, raw, name, def)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%w: %s: parameter %s=%d is out of range (use %d..%d)", ErrBadParam, s.Driver, name, v, lo, hi)
	}
	return v, nil
}

// Bool returns parameter name as a bool ("1", "true", "0", "false"), or def
// when absent. A bare "name" with no value means true.
func (s Spec) Bool(name string, def bool) (bool, error) {
	if !s.Params.Has(name) {
		return def, nil
	}
	switch raw := s.Params.Get(name); raw {
	case "", "1", "true", "yes":
		return true, nil
	case "0", "false", "no":
		return false, nil
	default:
		return false, fmt.Errorf("%w: %s: parameter %s=%q is not a boolean (use %s=1 or %s=0)", ErrBadParam, s.Driver, name, raw, name, name)
	}
}

// Choice returns parameter name, which must be one of choices, or def when
// absent.
func (s Spec) Choice(name, def string, choices ...string) (string, error) {
	if !s.Params.Has(name) {
		return def, nil
	}
	raw := s.Params.Get(name)
	if !slices.Contains(choices, raw) {
		return "", fmt.Errorf("%w: %s: parameter %s=%q is not one of %s", ErrBadParam, s.Driver, name, raw, strings.Join(choices, ", "))
	}
	return raw, nil
}

// CaptureParam is the port-spec parameter every driver takes: the port's
// traffic, received and transmitted, is mirrored to this pcap file
// ("afxdp:veth0?capture=veth0.pcap"). The driver never sees it: whoever
// opens the port (package app) strips it with SplitCapture and wraps the
// port in a pcap mirror, so a port opened without it pays nothing.
const CaptureParam = "capture"

// SplitCapture removes the capture parameter from spec: it returns the
// spec without it, which the driver opens and which names the port, and
// the capture file ("" when there is none). The other parameters keep
// their order and spelling.
func SplitCapture(spec string) (rest, file string, err error) {
	s, err := ParseSpec(spec)
	if err != nil {
		return "", "", err
	}
	if !s.Params.Has(CaptureParam) {
		return spec, "", nil
	}
	file = s.Params.Get(CaptureParam)
	if file == "" {
		return "", "", fmt.Errorf("%w: %q: %s= needs a file name, e.g. %s=port0.pcap", ErrBadParam, spec, CaptureParam, CaptureParam)
	}
	return WithoutParams(spec, CaptureParam), file, nil
}

// WithoutParams returns spec without the parameters named keys; the others
// keep their order and spelling.
func WithoutParams(spec string, keys ...string) string {
	head, query, _ := strings.Cut(spec, "?")
	var keep []string
	for pair := range strings.SplitSeq(query, "&") {
		k, _, _ := strings.Cut(pair, "=")
		if key, err := url.QueryUnescape(k); err == nil && slices.Contains(keys, key) {
			continue
		}
		if pair != "" {
			keep = append(keep, pair)
		}
	}
	if len(keep) == 0 {
		return head
	}
	return head + "?" + strings.Join(keep, "&")
}

// SamePort reports whether specs a and b open the same device: the same
// driver and target, in the same network namespace, on the same queue.
// Parameters that only shape the port (ring sizes, a capture file) do not
// make another one. The null driver's ports are all distinct, having no
// device behind them. Malformed specs are compared as strings.
func SamePort(a, b string) bool {
	return PortKey(a) == PortKey(b) && !strings.HasPrefix(a, "null:")
}

// PortKey is what SamePort compares: specs with equal keys open the same
// device (a null: spec's key is never that of another port), so many
// specs are checked for repeats with a map instead of pair by pair.
func PortKey(spec string) string {
	s, err := ParseSpec(spec)
	if err != nil {
		return spec
	}
	return s.Driver + ":" + s.Target + "?netns=" + s.Params.Get("netns") + "&queue=" + s.Params.Get("queue")
}
