package client

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
)

// localAddr returns the first non-loopback IPv4 address of this host, or
// 127.0.0.1 when there is none. It is used in client ids, unique message
// ids and as the born host of sent messages.
var localAddr = sync.OnceValue(func() netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
})

// clientIDs are the ids in use by live clients of this process, so that
// two clients never present the same id to a broker.
var clientIDs = struct {
	sync.Mutex
	inUse map[string]bool
}{inUse: make(map[string]bool)}

// reserveClientID returns "ip@instance", or "ip@instance#n" with the
// smallest n ≥ 2 that is free in this process; releaseClientID frees it.
func reserveClientID(instance string) string {
	if instance == "" {
		instance = strconv.Itoa(os.Getpid())
	}
	base := localAddr().String() + "@" + instance
	clientIDs.Lock()
	defer clientIDs.Unlock()
	id := base
	for n := 2; clientIDs.inUse[id]; n++ {
		id = fmt.Sprintf("%s#%d", base, n)
	}
	clientIDs.inUse[id] = true
	return id
}

func releaseClientID(id string) {
	clientIDs.Lock()
	delete(clientIDs.inUse, id)
	clientIDs.Unlock()
}
