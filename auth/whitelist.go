package auth

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// whitelist is a parsed whiteRemoteAddress: any of its patterns matches.
type whitelist struct {
	v4 [][4]segment
	v6 []net.IP
}

// segment matches one IPv4 octet: lo..hi, or one of set.
type segment struct {
	lo, hi int
	set    []int
}

func (s segment) match(v int) bool {
	if s.set != nil {
		for _, x := range s.set {
			if x == v {
				return true
			}
		}
		return false
	}
	return v >= s.lo && v <= s.hi
}

// parseWhitelist reads RocketMQ's formats: "1.2.3.4", "1.2.3.*",
// "1.2.3.1-100", "1.2.3.{1,2,3}", several separated by commas (outside
// braces), IPv6 addresses. A pattern that matches every address ("*",
// "*.*.*.*") is refused: it would open the account to everyone.
func parseWhitelist(s string) (*whitelist, error) {
	w := &whitelist{}
	for _, p := range splitOutsideBraces(s) {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if p == "*" || p == "*.*.*.*" || strings.Trim(p, "*:") == "" {
			return nil, fmt.Errorf("%q matches every address: list the addresses instead", p)
		}
		if strings.Contains(p, ":") {
			ip := net.ParseIP(p)
			if ip == nil {
				return nil, fmt.Errorf("%q: not an IPv6 address (ranges are IPv4 only)", p)
			}
			w.v6 = append(w.v6, ip)
			continue
		}
		parts := strings.Split(p, ".")
		if len(parts) != 4 {
			return nil, fmt.Errorf("%q: want four dotted parts", p)
		}
		var segs [4]segment
		for i, part := range parts {
			seg, err := parseSegment(part)
			if err != nil {
				return nil, fmt.Errorf("%q: %w", p, err)
			}
			segs[i] = seg
		}
		w.v4 = append(w.v4, segs)
	}
	if len(w.v4) == 0 && len(w.v6) == 0 {
		return nil, errors.New("no address")
	}
	return w, nil
}

func splitOutsideBraces(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func parseSegment(p string) (segment, error) {
	switch {
	case p == "*":
		return segment{lo: 0, hi: 255}, nil
	case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
		var set []int
		for _, x := range strings.Split(p[1:len(p)-1], ",") {
			v, err := octet(strings.TrimSpace(x))
			if err != nil {
				return segment{}, err
			}
			set = append(set, v)
		}
		return segment{set: set}, nil
	case strings.Contains(p, "-"):
		a, b, _ := strings.Cut(p, "-")
		lo, err := octet(a)
		if err != nil {
			return segment{}, err
		}
		hi, err := octet(b)
		if err != nil {
			return segment{}, err
		}
		if lo > hi {
			return segment{}, fmt.Errorf("range %s: start after end", p)
		}
		return segment{lo: lo, hi: hi}, nil
	}
	v, err := octet(p)
	if err != nil {
		return segment{}, err
	}
	return segment{lo: v, hi: v}, nil
}

func octet(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > 255 {
		return 0, fmt.Errorf("%q is not a number from 0 to 255", s)
	}
	return v, nil
}

// match reports whether the IP of peer ("host:port" or a bare IP) is listed.
func (w *whitelist) match(peer string) bool {
	ip := net.ParseIP(PeerIP(peer))
	if ip == nil {
		return false
	}
	if v4 := ip.To4(); v4 != nil {
		for _, segs := range w.v4 {
			ok := true
			for i := range segs {
				if !segs[i].match(int(v4[i])) {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
		return false
	}
	for _, x := range w.v6 {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

// PeerIP is the host part of a peer address ("1.2.3.4:5678" → "1.2.3.4";
// a bare IP is returned as it is).
func PeerIP(peer string) string {
	if h, _, err := net.SplitHostPort(peer); err == nil {
		return h
	}
	return strings.Trim(peer, "[]")
}

// IsLoopback reports whether peer is on a loopback address.
func IsLoopback(peer string) bool {
	ip := net.ParseIP(PeerIP(peer))
	return ip != nil && ip.IsLoopback()
}
