package netstack

// Attacks on the fast path, most from an outside review of an earlier
// version that handed the sandbox sockets of rootfs's namespace ("direct
// connections", withdrawn: each of fastopen-after-refusal, dup2-race and
// slots-full reached the host's loopback through them). Each is a
// workload of runClient's child (a process in the sandbox's namespace
// under the real connect-notify filter, answered by
// Engine.SeccompConnect as P1 answers it), and a test that fails if it
// reached the host's private side. They stand as the fast path's
// regression tests: whatever the fast path does, the sandbox's sockets
// stay the sandbox's.

import (
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/netpolicy"
)

var attacks = map[string]func(addr string) map[string]string{
	"fastopen-after-refusal": fastopenAfterRefusal,
	"fastopen-after-use":     fastopenAfterUse,
	"dup2-race":              dup2Race,
	"slots-full":             slotsFull,
	"misc":                   misc,
	"reuse":                  reuse,
	"reuse6":                 reuse6,
}

var (
	hostDB  = &unix.SockaddrInet4{Port: 5432, Addr: [4]byte{127, 0, 0, 1}}
	lanHTTP = &unix.SockaddrInet4{Port: 80, Addr: [4]byte{192, 168, 77, 1}}
)

func sa4(ap string) *unix.SockaddrInet4 {
	a := netip.MustParseAddrPort(ap)
	return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
}

func name4(sa unix.Sockaddr, err error) string {
	if err != nil {
		return errName(err)
	}
	in4, ok := sa.(*unix.SockaddrInet4)
	if !ok {
		return "not inet4"
	}
	return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
}

// readLine waits (poll, 3 s) for fd to be writable, sends req if any,
// and reads what comes back.
func readLine(fd int, req string) string {
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	unix.Poll(p, 3000)
	if v, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); v != 0 {
		return errName(unix.Errno(v))
	}
	if req != "" {
		unix.Write(fd, []byte(req))
	}
	p = []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	unix.Poll(p, 3000)
	b := make([]byte, 512)
	n, err := unix.Read(fd, b)
	if err != nil {
		return errName(err)
	}
	s, _, _ := strings.Cut(string(b[:max(n, 0)]), "\n")
	return strings.TrimSpace(s)
}

// ifconf lists the interfaces of fd's namespace (SIOCGIFCONF).
func ifconf(fd int) string {
	buf := make([]byte, 40*32)
	ifc := struct {
		Len int32
		_   int32
		Buf uintptr
	}{Len: int32(len(buf)), Buf: uintptr(unsafe.Pointer(&buf[0]))}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCGIFCONF, uintptr(unsafe.Pointer(&ifc))); e != 0 {
		return errName(e)
	}
	var out []string
	for i := 0; i+40 <= int(ifc.Len); i += 40 {
		r := buf[i : i+40]
		n, _, _ := strings.Cut(string(r[:16]), "\x00")
		out = append(out, n+"="+netip.AddrFrom4([4]byte(r[20:24])).String())
	}
	runtime.KeepAlive(buf)
	return strings.Join(out, ",")
}

// twiceFastOpen sends TCP Fast Open to dst twice on fd: the first, on a
// socket whose connection has ended (TCP_CLOSE) but is still "connecting"
// to the socket layer, fails and resets it to unconnected; the second
// connects it, from the socket's namespace, with no connect(2) at all.
func twiceFastOpen(steps map[string]string, fd int, dst unix.Sockaddr, req string) {
	steps["fastopen 1"] = errName(unix.Sendto(fd, []byte(req), unix.MSG_FASTOPEN, dst))
	steps["fastopen 2"] = errName(unix.Sendto(fd, []byte(req), unix.MSG_FASTOPEN, dst))
	steps["peer"] = name4(unix.Getpeername(fd))
	if steps["fastopen 2"] == "EINPROGRESS" {
		steps["read"] = readLine(fd, req) // no cookie: the SYN carried no data
	} else {
		steps["read"] = readLine(fd, "")
	}
}

// fastopenAfterRefusal: a direct connection to an allowed destination
// that refuses (a non-blocking connect gets the host's socket, which then
// fails), then Fast Open to the host's loopback database.
func fastopenAfterRefusal(addr string) map[string]string {
	steps := map[string]string{}
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	steps["connect"] = errName(unix.Connect(fd, sa4(addr)))
	steps["result"] = readLine(fd, "")
	steps["sockname"] = name4(unix.Getsockname(fd))
	steps["ifconf"] = ifconf(fd)
	twiceFastOpen(steps, fd, hostDB, "x")
	// The same to the LAN and the metadata address.
	for _, dst := range []string{"192.168.77.1:80", "169.254.169.254:80"} {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		unix.Connect(fd, sa4(addr))
		readLine(fd, "")
		s := map[string]string{}
		twiceFastOpen(s, fd, sa4(dst), "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
		steps["read "+dst] = s["read"]
		unix.Close(fd)
	}
	return steps
}

// fastopenAfterUse: an ordinary blocking direct connection, used and
// closed by both sides, then Fast Open to the host's loopback database.
func fastopenAfterUse(addr string) map[string]string {
	steps := map[string]string{}
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	steps["connect"] = errName(unix.Connect(fd, sa4(addr)))
	steps["result"] = readLine(fd, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
	b := make([]byte, 4096)
	for {
		if n, err := unix.Read(fd, b); n <= 0 || err != nil {
			break
		}
	}
	unix.Shutdown(fd, unix.SHUT_WR)
	time.Sleep(200 * time.Millisecond)
	twiceFastOpen(steps, fd, hostDB, "x")
	return steps
}

// dup2Race: the listener judges the descriptor it copied
// (pidfd_getfd); a call it lets run (Continue) runs on whatever the
// number holds then. One thread connects descriptor N (a UDP socket of
// the sandbox's: declined, let run) while another swaps a direct
// connection's socket in and out of N.
func dup2Race(addr string) map[string]string {
	steps := map[string]string{}
	h, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	steps["connect"] = errName(unix.Connect(h, sa4(addr)))
	steps["sockname"] = name4(unix.Getsockname(h))
	u, _ := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	const n = 900
	unspec := unix.RawSockaddrAny{}
	unspec.Addr.Family = unix.AF_UNSPEC
	db := unix.RawSockaddrInet4{Family: unix.AF_INET, Port: 5432<<8&0xff00 | 5432>>8, Addr: [4]byte{127, 0, 0, 1}}
	phase := func(sa unsafe.Pointer, done func() bool) int {
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for !stop.Load() {
				unix.Dup3(h, n, 0)
				unix.Dup3(u, n, 0)
			}
		}()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tries := 0
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && !done(); tries++ {
			unix.Syscall(unix.SYS_CONNECT, n, uintptr(sa), unix.SizeofSockaddrAny)
		}
		stop.Store(true)
		wg.Wait()
		if !done() {
			return -1
		}
		return tries
	}
	t1 := phase(unsafe.Pointer(&unspec), func() bool { _, err := unix.Getpeername(h); return err != nil })
	steps["disconnected after"] = strconvI(t1)
	t2 := phase(unsafe.Pointer(&db), func() bool { _, err := unix.Getpeername(h); return err == nil })
	steps["reconnected after"] = strconvI(t2)
	steps["peer"] = name4(unix.Getpeername(h))
	steps["read"] = readLine(h, "")
	return steps
}

func strconvI(i int) string {
	if i < 0 {
		return "never"
	}
	return strconv.Itoa(i) + " tries"
}

// slotsFull: past maxConnects connect(2)s being answered, the listener
// lets the call run (Continue) without looking at the socket. Hold the
// slots with blocking connects to an allowed destination that never
// answers, then point a direct connection's socket elsewhere.
func slotsFull(addr string) map[string]string {
	steps := map[string]string{}
	h, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	steps["connect"] = errName(unix.Connect(h, sa4(addr)))
	steps["sockname"] = name4(unix.Getsockname(h))
	for range 300 {
		go func() {
			fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			unix.Connect(fd, sa4("203.0.113.77:80")) // black-holed in the world
		}()
	}
	time.Sleep(1 * time.Second)
	unspec := unix.RawSockaddrAny{}
	unspec.Addr.Family = unix.AF_UNSPEC
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(h), uintptr(unsafe.Pointer(&unspec)), unix.SizeofSockaddrAny)
	steps["disconnect"] = errName(e)
	steps["reconnect to the host's database"] = errName(unix.Connect(h, hostDB))
	steps["peer"] = name4(unix.Getpeername(h))
	steps["read"] = readLine(h, "")
	return steps
}

// misc: calls that might pass the connect interception, and what a
// direct connection's socket tells or takes.
func misc(addr string) map[string]string {
	steps := map[string]string{}
	// Fast Open on a fresh socket of the sandbox's: through the TUN.
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{Sec: 3})
	steps["fresh fastopen to the lan"] = errName(unix.Sendto(fd, []byte("GET / HTTP/1.0\r\n\r\n"), unix.MSG_FASTOPEN, lanHTTP))
	unix.Close(fd)
	// TCP_FASTOPEN_CONNECT then connect.
	fd, _ = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1)
	steps["fastopen_connect to the lan"] = errName(unix.Connect(fd, lanHTTP))
	steps["fastopen_connect to the lan, write"] = errName2(unix.Write(fd, []byte("GET / HTTP/1.0\r\n\r\n")))
	unix.Close(fd)
	fd, _ = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1)
	steps["fastopen_connect to the world"] = errName(unix.Connect(fd, sa4(addr)))
	steps["fastopen_connect to the world, sockname"] = name4(unix.Getsockname(fd))
	unix.Close(fd)
	// IPv6, v4-mapped.
	fd, _ = unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	m := &unix.SockaddrInet6{Port: 80, Addr: netip.AddrFrom16(netip.MustParseAddr("::ffff:192.168.77.1").As16()).As16()}
	steps["v4-mapped to the lan"] = errName(unix.Connect(fd, m))
	unix.Close(fd)
	// MPTCP.
	for _, dst := range []string{addr, "192.168.77.1:80"} {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 262)
		if err != nil {
			steps["mptcp socket"] = errName(err)
			break
		}
		steps["mptcp to "+dst] = errName(unix.Connect(fd, sa4(dst)))
		steps["mptcp to "+dst+", sockname"] = name4(unix.Getsockname(fd))
		unix.Close(fd)
	}
	// A direct connection's socket: options that need the host's privileges, and what it tells.
	h, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	steps["direct"] = errName(unix.Connect(h, sa4(addr)))
	steps["direct sockname"] = name4(unix.Getsockname(h))
	steps["direct ifconf"] = ifconf(h)
	steps["direct SO_BINDTODEVICE"] = errName(unix.SetsockoptString(h, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, "lo"))
	steps["direct TCP_REPAIR"] = errName(unix.SetsockoptInt(h, unix.IPPROTO_TCP, unix.TCP_REPAIR, 1))
	steps["direct SO_MARK"] = errName(unix.SetsockoptInt(h, unix.SOL_SOCKET, unix.SO_MARK, 1))
	steps["direct IP_TRANSPARENT"] = errName(unix.SetsockoptInt(h, unix.IPPROTO_IP, unix.IP_TRANSPARENT, 1))
	lsrr := []byte{1, 0x83, 7, 4, 192, 168, 77, 1} // NOP, LSRR via the LAN
	steps["direct IP_OPTIONS lsrr"] = errName(unix.SetsockoptString(h, unix.IPPROTO_IP, unix.IP_OPTIONS, string(lsrr)))
	_, err := unix.IoctlRetInt(h, unix.SIOCGSKNS)
	steps["direct SIOCGSKNS"] = errName(err)
	return steps
}

// reuse connects to addr, then tries to point the same socket elsewhere
// (lanHTTP, the host's private side) every way a socket can be, and
// reads the interfaces through it: what a server would do with a
// socket of rootfs's namespace to get past the policy.
func reuse(addr string) map[string]string {
	steps := map[string]string{}
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		steps["dial"] = err.Error()
		return steps
	}
	defer c.Close()
	steps["dial"] = "ok"
	raw, _ := c.(*net.TCPConn).SyscallConn()
	lan := &unix.SockaddrInet4{Port: 80, Addr: [4]byte{192, 168, 77, 1}}
	_ = raw.Control(func(fd uintptr) {
		peer := func() string {
			sa, err := unix.Getpeername(int(fd))
			if err != nil {
				return errName(err)
			}
			in4 := sa.(*unix.SockaddrInet4)
			return netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)).String()
		}
		steps["peer"] = peer()
		unspec := unix.RawSockaddrAny{}
		unspec.Addr.Family = unix.AF_UNSPEC
		_, _, e := unix.Syscall(unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&unspec)), unix.SizeofSockaddrAny)
		steps["disconnect"] = errName(e)
		unix.SetNonblock(int(fd), false)
		steps["reconnect to the lan"] = errName(unix.Connect(int(fd), lan))
		steps["listen"] = errName(unix.Listen(int(fd), 1))
		steps["fastopen to the lan"] = errName(unix.Sendto(int(fd), []byte("x"), unix.MSG_FASTOPEN, lan))
		steps["peer at the end"] = peer()
		steps["interfaces through it"] = ifconf(int(fd))
	})
	fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	steps["interfaces through a new socket"] = ifconf(fd)
	steps["new socket to the lan"] = errName(unix.Connect(fd, lan))
	unix.Close(fd)
	return steps
}

// reuse6 is reuse from an IPv6 socket: it connects to addr (an IPv6
// address, or an IPv4 one in its v4-mapped form), then points the same
// socket at the LAN both ways and reads what answers.
func reuse6(addr string) map[string]string {
	steps := map[string]string{}
	ap := netip.MustParseAddrPort(addr)
	fd, _ := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	defer unix.Close(fd)
	sa6 := func(ap netip.AddrPort) *unix.SockaddrInet6 {
		return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	steps["dial"] = errName(unix.Connect(fd, sa6(ap)))
	steps["read"] = readLine(fd, "GET / HTTP/1.0\r\n\r\n")
	peer := func() string {
		sa, err := unix.Getpeername(fd)
		if err != nil {
			return errName(err)
		}
		in6 := sa.(*unix.SockaddrInet6)
		return netip.AddrPortFrom(netip.AddrFrom16(in6.Addr), uint16(in6.Port)).String()
	}
	steps["peer"] = peer()
	// Each in turn, from a disconnected socket (a connected one would
	// answer EISCONN).
	for _, lan := range []struct {
		name string
		ap   netip.AddrPort
	}{
		{"the lan, v4-mapped", netip.MustParseAddrPort("[::ffff:192.168.77.1]:80")},
		{"the lan over IPv6", netip.AddrPortFrom(lan6, 80)},
	} {
		unspec := unix.RawSockaddrAny{}
		unspec.Addr.Family = unix.AF_UNSPEC
		_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unix.SizeofSockaddrAny)
		steps["disconnect before "+lan.name] = errName(e)
		steps["reconnect to "+lan.name] = errName(unix.Connect(fd, sa6(lan.ap)))
		if steps["reconnect to "+lan.name] == "ok" {
			steps["read "+lan.name] = readLine(fd, "GET / HTTP/1.0\r\n\r\n")
		}
	}
	steps["peer at the end"] = peer()
	steps["interfaces through it"] = ifconf(fd)
	return steps
}

func errName2(_ int, err error) string { return errName(err) }

// blackhole makes 203.0.113.77 drop silently in the world.
func blackhole(t *testing.T) {
	w := setupWorld(t)
	exec.Command("nsenter", "-t", strconv.Itoa(w.pid), "-n", "ip", "route", "replace", "blackhole", "203.0.113.77/32").Run()
}

func logSteps(t *testing.T, steps map[string]string) {
	t.Helper()
	for k, v := range steps {
		t.Logf("%s: %s", k, v)
	}
}

// TestFastPathAttacks: each attack, from the sandbox under the real
// filter, must not reach the host's loopback database (127.0.0.1:5432 of
// rootfs's namespace), the LAN or the metadata address. Negative
// control, where the attack is one a socket of the host's namespace
// allows: the same workload from the host's namespace, unfiltered,
// reaches the database.
func TestFastPathAttacks(t *testing.T) {
	for _, tc := range []struct {
		workload, addr string
		control        bool // the workload reaches the database from the host's namespace
		blackhole      bool
	}{
		// Fast Open after a failed connection: the socket is reset and
		// connected with no connect(2).
		{"fastopen-after-refusal", "203.0.113.1:9", true, false},
		// The same after an ordinary connection: EISCONN even on the host.
		{"fastopen-after-use", "203.0.113.1:80", false, false},
		// A socket swapped onto the number of a connect rootfs lets run.
		{"dup2-race", "203.0.113.1:80", true, false},
		// With the listener's slots held, calls run unexamined.
		{"slots-full", "203.0.113.1:80", true, true},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			if tc.blackhole {
				blackhole(t)
			}
			sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
			steps := runClient(t, sb, tc.workload, tc.addr, 1, nil).Steps
			logSteps(t, steps)
			if strings.HasPrefix(steps["read"], "host") {
				t.Errorf("BROKEN: reached the host's loopback: %q", steps["read"])
			}
			for _, k := range []string{"read 192.168.77.1:80", "read 169.254.169.254:80"} {
				if strings.HasPrefix(steps[k], "HTTP/") {
					t.Errorf("BROKEN: %s: %q", k, steps[k])
				}
			}
			if tc.control {
				if c := runClient(t, nil, tc.workload, tc.addr, 1, nil).Steps; !strings.HasPrefix(c["read"], "host") {
					t.Errorf("negative control: from the host's namespace the workload read %q, want the database", c["read"])
				}
			}
		})
	}
}

// TestFastPathAttackMisc: logs what each call did; fails on a LAN reach.
func TestFastPathAttackMisc(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
	steps := runClient(t, sb, "misc", "203.0.113.1:80", 1, nil).Steps
	logSteps(t, steps)
	for _, k := range []string{"fresh fastopen to the lan", "fastopen_connect to the lan", "v4-mapped to the lan", "mptcp to 192.168.77.1:80"} {
		if steps[k] == "ok" {
			t.Errorf("BROKEN? %s: ok", k)
		}
	}
}

// TestFastPathSocketStaysTheSandboxs6: the same from an IPv6 socket, to
// the world over IPv6 and to its IPv4 address v4-mapped: the fast path
// connects it to the relay (at ::ffff:127.0.0.1), and pointed at the LAN
// afterwards it reaches nothing. Negative control: the same steps on a
// socket of the host's namespace reconnect and read the LAN.
func TestFastPathSocketStaysTheSandboxs6(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
	relay := sb.eng.fast.Load().addr
	for _, dst := range []string{"[2001:db8:113::1]:80", "[::ffff:203.0.113.1]:80"} {
		t.Run(dst, func(t *testing.T) {
			before := sb.eng.Stats().TCPFast
			got := runClient(t, sb, "reuse6", dst, 1, nil).Steps
			logSteps(t, got)
			want := map[string]string{"dial": "ok", "peer": "[::ffff:127.0.0.1]:" + strconv.Itoa(relay.Port), "disconnect before the lan, v4-mapped": "ok",
				"interfaces through it": "lo=127.0.0.1," + DeviceName + "=" + SandboxAddr.Addr().String()}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("in the sandbox, %s: %s, want %s", k, got[k], w)
				}
			}
			if !strings.HasPrefix(got["read"], "HTTP/") {
				t.Errorf("the world did not answer: %q", got["read"])
			}
			for k, v := range got {
				if strings.HasPrefix(k, "read the lan") && strings.HasPrefix(v, "HTTP/") {
					t.Errorf("BROKEN: %s: %q", k, v)
				}
			}
			if n := sb.eng.Stats().TCPFast - before; n != 1 {
				t.Errorf("%d connections on the fast path, want 1", n)
			}
			control := runClient(t, nil, "reuse6", dst, 1, nil).Steps
			for _, lan := range []string{"the lan, v4-mapped", "the lan over IPv6"} {
				if !strings.HasPrefix(control["read "+lan], "HTTP/") {
					t.Errorf("negative control: on the host, %s: disconnect %s, reconnect %s, read %q",
						lan, control["disconnect before "+lan], control["reconnect to "+lan], control["read "+lan])
				}
			}
		})
	}
}

// TestFastPathSocketStaysTheSandboxs: a connection the fast path carried
// is the sandbox's own socket, connected to the relay on its loopback;
// disconnected with AF_UNSPEC it cannot be connected to the LAN (it is
// bound to 127.0.0.1), a new socket to the LAN meets the stack, which
// refuses it, and it lists the sandbox's interfaces, never the host's. Negative control: the same steps on a
// socket of the host's namespace reach the LAN and list the host's
// interfaces.
func TestFastPathSocketStaysTheSandboxs(t *testing.T) {
	sb := newSandboxMode(t, netpolicy.Options{}, viaFast)
	relay := sb.eng.fast.Load().addr
	want := map[string]string{
		"dial": "ok", "peer": "127.0.0.1:" + strconv.Itoa(relay.Port), "disconnect": "ok", "reconnect to the lan": "EINVAL", // bound to 127.0.0.1 by the fast path
		"interfaces through it": "lo=127.0.0.1," + DeviceName + "=" + SandboxAddr.Addr().String(),
		"new socket to the lan": "ECONNREFUSED",
	}
	got := runClient(t, sb, "reuse", "203.0.113.1:80", 1, nil).Steps
	for k, w := range want {
		if got[k] != w {
			t.Errorf("in the sandbox, %s: %s, want %s", k, got[k], w)
		}
	}
	if n := sb.eng.Stats().TCPFast; n != 1 {
		t.Errorf("%d connections on the fast path, want 1", n)
	}
	control := runClient(t, nil, "reuse", "203.0.113.1:80", 1, nil).Steps
	if control["disconnect"] != "ok" || control["reconnect to the lan"] != "ok" || !strings.Contains(control["interfaces through it"], "h0=") {
		t.Errorf("negative control: on the host, disconnect %s, reconnect to the lan %s, interfaces %s; want ok, ok, the host's",
			control["disconnect"], control["reconnect to the lan"], control["interfaces through it"])
	}
}
