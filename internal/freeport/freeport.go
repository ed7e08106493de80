// Package freeport hands out loopback ports for daemons that must keep
// their address across restarts: the tests and harnesses that start real
// processes on fixed ports, kill them and start them again.
//
// A port taken from the kernel with port 0 and closed again comes from the
// ephemeral range, which the kernel also hands to every outgoing
// connection and every other port-0 listener on the machine: between the
// close and a daemon's (re)bind, another test's connection may take it.
// Pick draws ports from below that range instead, which the kernel never
// hands out by itself, so only another explicit picker could take one;
// it draws at random, and never hands out the same port twice in one
// process.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports are drawn from [low, the ephemeral range's start); when the
// ephemeral range starts too low to leave room, from the kernel's port 0.
const (
	low     = 10000
	minRoom = 2000
)

var (
	mu     sync.Mutex
	handed = make(map[int]bool)
)

// Pick returns a loopback port that is free for TCP and UDP (memberlist
// binds both), together with port+off for every offset (ports a daemon
// derives from its listen port: replication, gossip). None of them was
// handed out before by this process.
func Pick(offsets ...int) (int, error) {
	from, to := drawRange()
	var lastErr error
	for range 500 {
		p, err := candidate(from, to)
		if err != nil {
			return 0, err
		}
		if err := reserve(p, offsets); err != nil {
			lastErr = err
			continue
		}
		return p, nil
	}
	return 0, fmt.Errorf("freeport: no free port: %w", lastErr)
}

// Addr is Pick as a 127.0.0.1:port address.
func Addr(offsets ...int) (string, error) {
	p, err := Pick(offsets...)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// candidate draws a port in [from, to), or from the kernel if to is 0.
func candidate(from, to int) (int, error) {
	if to == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("freeport: %w", err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	}
	return from + rand.IntN(to-from), nil
}

var errHanded = errors.New("handed out already")

// reserve checks that p and p+off for every offset are free and not handed
// out, and marks them handed out.
func reserve(p int, offsets []int) error {
	ports := append([]int{p}, offsets...)
	for i := 1; i < len(ports); i++ {
		ports[i] += p
	}
	mu.Lock()
	defer mu.Unlock()
	for _, q := range ports {
		if q <= 0 || q > 65535 || handed[q] {
			return errHanded
		}
		if err := bindable(q); err != nil {
			return err
		}
	}
	for _, q := range ports {
		handed[q] = true
	}
	return nil
}

// bindable listens on port q over TCP and UDP and closes both.
func bindable(q int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(q))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	defer l.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	return pc.Close()
}

// drawRange returns the range Pick draws from: [low, the start of the
// kernel's ephemeral range), or 0, 0 when that leaves too little room or
// the range cannot be read (then the kernel's port 0 is used). It is read
// once per process.
var drawRange = sync.OnceValues(readDrawRange)

func readDrawRange() (from, to int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start-low < minRoom {
		return 0, 0
	}
	return low, start
}
