package netstack

import (
	"encoding/binary"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

func init() {
	attacks["connect-forms"] = connectForms
}

// rawConnect calls connect(2) with b's first n bytes as the address
// (b itself is at least n bytes long).
func rawConnect(fd int, b []byte, n uintptr) string {
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), n)
	if e != 0 {
		return errName(e)
	}
	return "ok"
}

// connectForms: connect(2) calls to addr (an IPv4 address of the world)
// that the kernel itself judges by their form: an IPv6 socket given a
// sockaddr_in, an address longer than sockaddr_storage, a socket with
// IP_BIND_ADDRESS_NO_PORT, and an MPTCP one. Each step's answer from the sandbox
// should be the kernel's (runClient with no sandbox).
func connectForms(addr string) map[string]string {
	steps := map[string]string{}
	ap := sa4(addr)
	in4 := make([]byte, 256)
	binary.NativeEndian.PutUint16(in4[0:2], unix.AF_INET)
	binary.BigEndian.PutUint16(in4[2:4], uint16(ap.Port))
	copy(in4[4:8], ap.Addr[:])
	in6 := make([]byte, 256)
	binary.NativeEndian.PutUint16(in6[0:2], unix.AF_INET6)
	binary.BigEndian.PutUint16(in6[2:4], uint16(ap.Port))
	in6[18], in6[19] = 0xff, 0xff
	copy(in6[20:24], ap.Addr[:])
	sock := func(family int) int {
		fd, _ := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 3})
		return fd
	}
	for _, c := range []struct {
		name   string
		family int
		b      []byte
		n      uintptr
	}{
		{"v6 socket, sockaddr_in, 16 bytes", unix.AF_INET6, in4, 16},
		{"v6 socket, sockaddr_in, 28 bytes", unix.AF_INET6, in4, 28},
		{"v6 socket, sockaddr_in6, 200 bytes", unix.AF_INET6, in6, 200},
		{"v4 socket, sockaddr_in, 200 bytes", unix.AF_INET, in4, 200},
		// sizeof(struct sockaddr_storage), as many C programs pass it:
		// the kernel takes any length up to it.
		{"v4 socket, sockaddr_in, 128 bytes", unix.AF_INET, in4, 128},
		{"v4 socket, sockaddr_in, 113 bytes", unix.AF_INET, in4, 113},
		{"v6 socket, sockaddr_in6, 128 bytes", unix.AF_INET6, in6, 128},
		{"v4 socket, sockaddr_in, 0x80000010 bytes", unix.AF_INET, in4, 0x80000010},
	} {
		fd := sock(c.family)
		steps[c.name] = rawConnect(fd, c.b, c.n)
		unix.Close(fd)
	}
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		fd := sock(family)
		name := map[int]string{unix.AF_INET: "v4", unix.AF_INET6: "v6"}[family]
		unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		b, n := in4, uintptr(16)
		if family == unix.AF_INET6 {
			b, n = in6, 28
		}
		steps[name+" socket, IP_BIND_ADDRESS_NO_PORT"] = rawConnect(fd, b, n)
		steps[name+" socket, IP_BIND_ADDRESS_NO_PORT, then"] = readLine(fd, "GET / HTTP/1.0\r\n\r\n")
		unix.Close(fd)
	}
	// MPTCP (curl --mptcp), which falls back to TCP where the other end
	// does not speak it.
	if fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_MPTCP); err != nil {
		steps["mptcp socket"] = errName(err)
	} else {
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 3})
		steps["mptcp socket"] = rawConnect(fd, in4, 16)
		steps["mptcp socket, then"] = readLine(fd, "GET / HTTP/1.0\r\n\r\n")
		unix.Close(fd)
	}
	return steps
}

// TestFastPathConnectAsTheKernel: every step of connect-forms answers in
// the sandbox (under the real filter, fast path on) as the kernel answers
// it on the host. It failed on an IPv6 socket given a sockaddr_in, on
// lengths above sockaddr_storage or negative, and on
// IP_BIND_ADDRESS_NO_PORT (EADDRNOTAVAIL), before the fast path left
// those to the kernel (review of 60d6d40).
func TestFastPathConnectAsTheKernel(t *testing.T) {
	asTheKernel(t, newSandboxMode(t, netpolicy.Options{}, viaFast), "connect-forms", "203.0.113.1:80")
}

// asTheKernel runs workload against addr in sb and from the host's
// namespace (the kernel's own answers), and fails on each step whose
// answers differ (any HTTP status line counts as the same).
func asTheKernel(t *testing.T, sb *sandbox, workload, addr string) {
	t.Helper()
	got := runClient(t, sb, workload, addr, 1, nil).Steps
	want := runClient(t, nil, workload, addr, 1, nil).Steps
	for k, w := range want {
		if g := got[k]; g != w && !(strings.HasPrefix(g, "HTTP/") && strings.HasPrefix(w, "HTTP/")) {
			t.Errorf("%s: %s in the sandbox, %s from the kernel", k, g, w)
		} else {
			t.Logf("%s: %s (kernel: %s)", k, g, w)
		}
	}
}

// TestNoTUNConnectAsTheKernel: as TestFastPathConnectAsTheKernel, in a
// sandbox without a TUN device, where what the fast path leaves to the
// kernel meets no route (review of 261c90e).
func TestNoTUNConnectAsTheKernel(t *testing.T) {
	asTheKernel(t, newSandboxMode(t, netpolicy.Options{}, viaNoTUN), "connect-forms", "203.0.113.1:80")
}

// v6onlyRace: an IPv6 socket connected to addr (v4-mapped) while another
// thread flips IPV6_V6ONLY and tries to bind it, 200 times; counts the
// outcomes, and whether a socket that says connected reads the world.
func v6onlyRace(addr string) map[string]string {
	steps := map[string]string{}
	ap := sa4(addr)
	dst := &unix.SockaddrInet6{Port: ap.Port}
	copy(dst.Addr[10:12], []byte{0xff, 0xff})
	copy(dst.Addr[12:], ap.Addr[:])
	count := map[string]int{}
	for range 200 {
		fd, _ := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 3})
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, i&1)
				if i%7 == 0 {
					unix.Bind(fd, &unix.SockaddrInet6{Addr: [16]byte{15: 1}})
				}
			}
		}()
		r := errName(unix.Connect(fd, dst))
		close(stop)
		<-done
		if r == "ok" {
			if l := readLine(fd, "GET / HTTP/1.0\r\n\r\n"); !strings.HasPrefix(l, "HTTP/") {
				r += ", then " + l
			}
		}
		count[r]++
		unix.Close(fd)
	}
	for k, v := range count {
		steps[k] = strconvI(v)
	}
	return steps
}

func init() { attacks["v6only-race"] = v6onlyRace }

// TestFastPathV6onlyRace logs v6only-race's outcomes; a connect that
// says ok must read the world.
func TestFastPathV6onlyRace(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
	got := runClient(t, sb, "v6only-race", "203.0.113.1:80", 1, nil).Steps
	logSteps(t, got)
	for k := range got {
		if strings.HasPrefix(k, "ok, then") {
			t.Errorf("connected but: %s", k)
		}
	}
	t.Logf("fast: %d", sb.eng.Stats().TCPFast)
}
