package mountmgr

import "os"

// NetFiles are what P2 hands P1 for a NetSpec. The caller owns them.
type NetFiles struct {
	// TUN is the device's queue (non-blocking, IP packets without header);
	// nil when the sandbox could not make one (Unavailable says why): it
	// then has only lo, and no route out. With DNS it still has the fast
	// path and the resolver, on lo; without, nothing, as with NoNetwork.
	TUN *os.File
	// Unavailable is why there is no TUN ("" when there is one).
	Unavailable string
	// Relay is a listening socket at 127.0.0.1 inside the sandbox, any
	// port, for the fast path (netstack.Engine.ServeRelay).
	Relay *os.File
	// DNS and DNSTCP, without TUN, are a UDP socket and a TCP listener at
	// NetSpec.Gateway port 53 on lo, for the resolver
	// (netstack.Engine.ServeDNS).
	DNS, DNSTCP *os.File
	// FastPath says the server's filter refers its connect(2) calls to
	// ServerOptions.Connect (Linux 5.19): without TUN, its only way out.
	FastPath bool
	// IPv6 says the sandbox has NetSpec.Addr6 and its route: its IPv6
	// packets come through TUN too. Without TUN, the address is on lo and
	// only the fast path carries IPv6.
	IPv6 bool
	// Local are listening sockets of the sandbox's loopback, one or two
	// per NetSpec.LocalPorts entry.
	Local []LocalListener
}

// TCPOnly says the sandbox has no TUN but reaches out by the fast path
// (TCP) and asks the resolver on lo (DNS).
func (f *NetFiles) TCPOnly() bool { return f.TUN == nil && f.DNS != nil && f.FastPath }

// LocalListener is a listening socket inside the sandbox for Port.
type LocalListener struct {
	Port uint16
	File *os.File
}

// Close closes every file.
func (f *NetFiles) Close() {
	if f == nil {
		return
	}
	if f.TUN != nil {
		f.TUN.Close()
	}
	for _, x := range []*os.File{f.Relay, f.DNS, f.DNSTCP} {
		if x != nil {
			x.Close()
		}
	}
	for _, l := range f.Local {
		l.File.Close()
	}
}
