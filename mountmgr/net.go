package mountmgr

import "os"

// NetFiles are what P2 hands P1 for a NetSpec. The caller owns them.
type NetFiles struct {
	// TUN is the device's queue (non-blocking, IP packets without header);
	// nil when the sandbox could not make one (Unavailable says why): it
	// then has only lo, as with NoNetwork.
	TUN *os.File
	// Unavailable is why there is no TUN ("" when there is one).
	Unavailable string
	// Relay is a listening socket at 127.0.0.1 inside the sandbox, any
	// port, for the fast path (netstack.Engine.ServeRelay); with TUN.
	Relay *os.File
	// IPv6 says the sandbox has NetSpec.Addr6 and its route: its IPv6
	// packets come through TUN too.
	IPv6 bool
	// Local are listening sockets of the sandbox's loopback, one or two
	// per NetSpec.LocalPorts entry.
	Local []LocalListener
}

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
	if f.Relay != nil {
		f.Relay.Close()
	}
	for _, l := range f.Local {
		l.File.Close()
	}
}
