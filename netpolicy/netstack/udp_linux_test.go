package netstack

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

// udpTries sends n datagrams, one at a time, on a UDP socket connected to
// dst in the network namespace of pid, and returns the error of the read
// that waits (up to wait) for each echo; nil for an echo.
func udpTries(t *testing.T, pid int, dst string, n int, wait time.Duration) []error {
	return inNS(t, pid, func() []error {
		c, err := net.Dial("udp4", dst)
		if err != nil {
			return []error{err}
		}
		defer c.Close()
		var errs []error
		for range n {
			start := time.Now()
			_ = c.SetDeadline(start.Add(wait))
			if _, err := c.Write([]byte("quic?")); err != nil {
				errs = append(errs, err)
				continue
			}
			b := make([]byte, 64)
			k, err := c.Read(b)
			t.Logf("%s: %v after %v", dst, err, time.Since(start).Round(time.Millisecond))
			if err == nil && string(b[:k]) != "echo quic?" {
				err = fmt.Errorf("got %q", b[:k])
			}
			errs = append(errs, err)
		}
		return errs
	})
}

// A refused datagram is answered at once (ICMP port unreachable from the
// stack), so an HTTP/3 client falls back to TCP without waiting for its
// handshake timeout: its connected socket's next read is ECONNREFUSED.
// The deadline is generous; what is checked is that the error is the
// refusal and not the deadline, which is what a dropped datagram gives
// (the black-hole control).
func TestUDPRefusedAtOnce(t *testing.T) {
	setupWorld(t)
	// A black hole: reads and never answers, as the engine did with a
	// refused datagram before.
	hole := inNS(t, theWorld.pid, func() any {
		u, err := net.ListenPacket("udp4", internet.String()+":4434")
		if err != nil {
			return err
		}
		go func() {
			b := make([]byte, 2048)
			for {
				if _, _, err := u.ReadFrom(b); err != nil {
					return
				}
			}
		}()
		return u
	})
	u, ok := hole.(net.PacketConn)
	if !ok {
		t.Fatalf("black hole: %v", hole)
	}
	t.Cleanup(func() { u.Close() })
	sb := newSandbox(t, netpolicy.Options{Allow: []string{"203.0.113.1:4433", "203.0.113.1:4434"}})

	t.Run("refused", func(t *testing.T) {
		// QUIC to an address whose TCP :443 the default allows.
		before := sb.eng.Stats().Refused
		for i, err := range udpTries(t, sb.pid, "203.0.113.1:443", 3, 5*time.Second) {
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Errorf("datagram %d to a refused destination: %v; want ECONNREFUSED", i, err)
			}
		}
		if n := sb.eng.Stats().Refused - before; n != 3 {
			t.Errorf("3 refused datagrams recorded %d times", n)
		}
	})
	t.Run("allowed is echoed", func(t *testing.T) {
		for i, err := range udpTries(t, sb.pid, "203.0.113.1:4433", 2, 5*time.Second) {
			if err != nil {
				t.Errorf("datagram %d to an allowed destination: %v", i, err)
			}
		}
	})
	t.Run("dropped times out", func(t *testing.T) {
		errs := udpTries(t, sb.pid, "203.0.113.1:4434", 1, time.Second)
		if !errors.Is(errs[0], os.ErrDeadlineExceeded) || errors.Is(errs[0], syscall.ECONNREFUSED) {
			t.Errorf("datagram into a black hole: %v; want the deadline, not ECONNREFUSED", errs[0])
		}
	})
	t.Run("too many flows", func(t *testing.T) {
		// Every slot taken, as by DefaultMaxFlows flows: an allowed
		// datagram is refused at once too, and recorded.
		held := 0
		for sb.eng.acquire() {
			held++
		}
		defer func() {
			for range held {
				sb.eng.release()
			}
		}()
		before := sb.eng.Stats().Refused
		if err := udpTries(t, sb.pid, "203.0.113.1:4433", 1, 5*time.Second)[0]; !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("allowed datagram with no flow left: %v; want ECONNREFUSED", err)
		}
		if n := sb.eng.Stats().Refused - before; n != 1 {
			t.Errorf("1 datagram over the limit recorded %d times", n)
		}
	})
}
