package membership

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// DeriveGossipAddr returns the gossip address of a daemon that listens on
// listenAddr: the same host and the port plus offset, so that several
// daemons on one host need no extra flags. Port 0 stays 0 (any free port).
// It returns "" when listenAddr is not host:port or the port would pass
// 65535.
func DeriveGossipAddr(listenAddr string, offset int) string {
	host, portStr, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return ""
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return ""
	}
	if port != 0 {
		port += offset
		if port <= 0 || port > 65535 {
			return ""
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// splitBindAddr parses a bind address into the host memberlist binds
// ("" becomes 0.0.0.0) and a port.
func splitBindAddr(addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("membership: bind address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("membership: bind address %q: bad port", addr)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// freePort finds a port that is free for both TCP and UDP on host, as
// memberlist binds both on one port. Another process may take it before
// memberlist binds it: the caller retries on "address already in use".
func freePort(host string) (int, error) {
	var lastErr error
	for range 20 {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, fmt.Errorf("membership: find a free port on %s: %w", host, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		_ = l.Close()
		if err != nil {
			lastErr = err
			continue
		}
		_ = pc.Close()
		return port, nil
	}
	return 0, fmt.Errorf("membership: no port free for both tcp and udp on %s: %w", host, lastErr)
}

// isAddrInUse reports whether err is a bind conflict. memberlist formats
// its errors with %v, so the text is all that survives.
func isAddrInUse(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, syscall.EADDRINUSE) ||
		strings.Contains(strings.ToLower(err.Error()), "address already in use")
}
