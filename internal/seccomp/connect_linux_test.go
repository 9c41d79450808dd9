package seccomp

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// connectReport is what connectChild prints.
type connectReport struct {
	Errs map[string]string `json:"errs"`
	// Peer is the port the "carried" socket ended connected to.
	Peer int `json:"peer"`
}

// connectChild loads InstallNotify(Notify{Connect: true})'s filter, sends
// the listener, waits for the gate, then connects three TCP sockets to
// 127.0.0.1 at the ports in ROOTFS_SECCOMP_PORTS (run, refuse, carry),
// makes a refused call and asks for a listener of its own, and prints
// what each returned.
func connectChild() {
	sock, gate := 3, os.NewFile(4, "gate")
	lf, _, err := InstallNotify(Notify{Connect: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "install:", err)
		os.Exit(3)
	}
	if err := unix.Sendmsg(sock, []byte("x"), unix.UnixRights(int(lf.Fd())), nil, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sendmsg:", err)
		os.Exit(3)
	}
	lf.Close()
	unix.Close(sock)
	var b [1]byte
	gate.Read(b[:])
	rep := connectReport{Errs: map[string]string{}}
	for i, name := range []string{"run", "refuse", "carry"} {
		port, _ := strconv.Atoi(strings.Split(os.Getenv("ROOTFS_SECCOMP_PORTS"), ",")[i])
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, "socket:", err)
			os.Exit(3)
		}
		err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
		rep.Errs[name] = errName(err)
		if name == "carry" {
			if sa, err := unix.Getpeername(fd); err == nil {
				rep.Peer = sa.(*unix.SockaddrInet4).Port
			}
		}
	}
	_, _, e := unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	rep.Errs["unshare"] = errName(errno(e))
	_, lerr := outerListener()
	rep.Errs["listener"] = errName(lerr)
	json.NewEncoder(os.Stdout).Encode(rep)
	os.Exit(0)
}

// TestNotifyConnect: under InstallNotify(Notify{Connect: true}) every
// connect(2) waits for the listener, which can let it run (Continue),
// refuse it with an errno, or carry it out itself on a copy of the
// caller's socket (Call.FD) after reading its address once
// (Call.ReadMem): the caller then holds a socket connected where the
// listener chose. Refusals stay plain EPERM returns (not referred), and
// the server still gets no listener of its own. Negative control: with
// Connect nil the listener lets every call run, so all three connect to
// where the caller asked.
func TestNotifyConnect(t *testing.T) {
	target, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	tport := target.Addr().(*net.TCPAddr).Port
	// Two more listening ports the caller asks for: "refuse" and "carry".
	other := make([]int, 2)
	for i := range other {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		other[i] = l.Addr().(*net.TCPAddr).Port
	}
	ports := fmt.Sprintf("ROOTFS_SECCOMP_PORTS=%d,%d,%d", tport, other[0], other[1])
	for _, handled := range []bool{true, false} {
		t.Run(fmt.Sprintf("handler=%v", handled), func(t *testing.T) {
			c := startChild(t, "connect", 0, ports)
			if c.listener == nil {
				t.Fatal("the child sent no listener")
			}
			var o ListenOptions
			asked := make(chan int, 3)
			if handled {
				o.Connect = func(call *Call) Answer {
					var sa [unix.SizeofSockaddrInet4]byte
					if err := call.ReadMem(call.Args[1], sa[:]); err != nil {
						t.Errorf("ReadMem: %v", err)
						return Answer{Continue: true}
					}
					port := int(binary.BigEndian.Uint16(sa[2:4]))
					asked <- port
					switch port {
					case other[0]:
						return Answer{Errno: unix.EHOSTUNREACH}
					case other[1]:
						fd, err := call.FD(int(call.Args[0]))
						if err != nil {
							t.Errorf("FD: %v", err)
							return Answer{Continue: true}
						}
						defer unix.Close(fd)
						if err := unix.Connect(fd, &unix.SockaddrInet4{Port: tport, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
							return Answer{Errno: err.(unix.Errno)}
						}
						return Answer{}
					}
					return Answer{Continue: true}
				}
			}
			l, err := Listen(c.listener, o)
			if err != nil {
				t.Fatal(err)
			}
			var rep connectReport
			c.gate.Write([]byte{1})
			if err := c.cmd.Wait(); err != nil {
				t.Fatalf("child: %v", err)
			}
			l.Close()
			if err := json.Unmarshal([]byte(c.out.String()), &rep); err != nil {
				t.Fatalf("child output %q: %v", c.out.String(), err)
			}
			want := map[string]string{"run": "ok", "refuse": "EHOSTUNREACH", "carry": "ok", "unshare": "EPERM", "listener": "EBUSY"}
			wantPeer := tport
			if !handled {
				want["refuse"] = "ok"
				wantPeer = other[1]
			}
			for k, w := range want {
				if rep.Errs[k] != w {
					t.Errorf("%s: %s, want %s", k, rep.Errs[k], w)
				}
			}
			if rep.Peer != wantPeer {
				t.Errorf("the carried socket is connected to port %d, want %d", rep.Peer, wantPeer)
			}
			close(asked)
			var n int
			for range asked {
				n++
			}
			if handled && n != 3 {
				t.Errorf("the handler saw %d connects, want 3", n)
			}
			if l.Answered() != 0 {
				t.Errorf("%d refusals answered; a connect-only filter refers none", l.Answered())
			}
		})
	}
}
