package mcpbridge

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

const rawInit = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestExitInfoMessage(t *testing.T) {
	for _, tt := range []struct {
		name string
		x    ExitInfo
		want string
	}{
		{"status and stderr", ExitInfo{Status: 1, LastStderr: "fatal: cannot open db"}, "rootfs: the server exited with status 1 before answering: fatal: cannot open db"},
		{"status only", ExitInfo{Status: 0}, "rootfs: the server exited with status 0 before answering"},
		{"signal", ExitInfo{Status: 137}, "rootfs: the server was killed by signal 9 (killed) before answering"},
		{"still running", ExitInfo{Status: -1, LastStderr: "listening"}, "rootfs: the server closed the connection before answering: listening"},
		{"one line", ExitInfo{Status: 2, LastStderr: "a\nb\r\n\tc"}, "rootfs: the server exited with status 2 before answering: a b c"},
		{"note", ExitInfo{Status: 1, LastStderr: "npm error code EAI_AGAIN", Note: "the server had no network: fix it"},
			"rootfs: the server exited with status 1 before answering: npm error code EAI_AGAIN (the server had no network: fix it)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.x.message(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestServerExitAnswersInitialize: a server that dies with the client's initialize in flight
// (a missing file, a bad flag): the client's initialize gets an error naming the status and
// the server's last line of stderr. Without ServerExit the message says only that it exited.
func TestServerExitAnswersInitialize(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.ServerExit = func() ExitInfo { return ExitInfo{Status: 1, LastStderr: "fatal: cannot open db"} }
	})
	h.startRaw(true, true)
	h.clientSend(rawInit)
	h.serverRecv()
	h.srvW.Close()
	expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"rootfs: the server exited with status 1 before answering: fatal: cannot open db"}}`)
	if err := h.wait(); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Run: %v, want ErrServerClosed", err)
	}
}

// TestServerExitBeforeClientSpoke: the server is gone before the client's initialize arrives
// (it died at once; the client is slow to write). The bridge waits for the initialize and
// answers it with why the server ended, rather than closing the connection unanswered.
// Negative control: the client that sends nothing is waited for (ClientWait) and then let go, and one
// that closes its end is not waited for at all.
//
// The wait is a minute where the test must not depend on it (a loaded machine may take
// seconds between the server's end and the client's write), so "not waited for" means
// returning well before it; the silent client's wait is short and checked from below only.
func TestServerExitBeforeClientSpoke(t *testing.T) {
	const long = time.Minute
	t.Run("initialize after the exit", func(t *testing.T) {
		h := newHarness(t, func(o *Options) {
			o.ServerExit = func() ExitInfo { return ExitInfo{Status: 3, LastStderr: "no such table"} }
			o.ClientWait = long
		})
		h.startRaw(true, true)
		h.srvW.Close()
		if _, ok := <-h.srvLines; ok {
			t.Fatal("the server got a message")
		} // closed: Run has stopped the server's side and waits for the client
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		go func() { // a bridge that stopped reading would block the writes
			io.WriteString(h.cliW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`+"\n"+rawInit+"\n")
		}()
		expect(t, h.clientRecv(), `{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"rootfs: the server exited with status 3 before answering: no such table"}}`)
		if err := h.wait(); !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Run: %v, want ErrServerClosed", err)
		}
		if took := h.ended.Sub(start); took > long/2 {
			t.Errorf("Run returned %v after the answer; it should not wait once initialize is answered", took)
		}
	})
	t.Run("client closes", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.ClientWait = long })
		h.startRaw(true, true)
		h.srvW.Close()
		<-h.srvLines
		start := time.Now()
		h.cliW.Close()
		if err := h.wait(); !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Run: %v, want ErrServerClosed", err)
		}
		if took := h.ended.Sub(start); took > long/2 {
			t.Errorf("Run returned %v after the client closed", took)
		}
	})
	t.Run("client silent", func(t *testing.T) {
		const wait = 300 * time.Millisecond
		h := newHarness(t, func(o *Options) { o.ClientWait = wait })
		h.startRaw(true, true)
		start := time.Now()
		h.srvW.Close()
		if err := h.wait(); !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Run: %v, want ErrServerClosed", err)
		}
		if took := h.ended.Sub(start); took < wait {
			t.Errorf("Run returned %v after the server's end, before its wait of %v", took, wait)
		}
	})
	t.Run("initialized session", func(t *testing.T) {
		// A server that ends after initialize is answered: no wait, as before.
		h := newHarness(t, func(o *Options) { o.ClientWait = long })
		h.startRaw(true, true)
		h.handshake(`{}`)
		start := time.Now()
		h.srvW.Close()
		if err := h.wait(); !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Run: %v, want ErrServerClosed", err)
		}
		if took := h.ended.Sub(start); took > long/2 {
			t.Errorf("Run returned %v after the server's end", took)
		}
	})
}

func TestRefuse(t *testing.T) {
	const reason = "rootfs: cannot start the server: no\nsuch thing"
	const want = `"error":{"code":-32603,"message":"rootfs: cannot start the server: no such thing"}}`
	for _, tt := range []struct {
		name     string
		in       string
		wantOut  []string
		wantInit bool
	}{
		{"initialize", rawInit + "\n", []string{`{"jsonrpc":"2.0","id":0,` + want}, true},
		{"discover first, then initialize", `{"jsonrpc":"2.0","id":"d","method":"server/discover"}` + "\n" + rawInit + "\n",
			[]string{`{"jsonrpc":"2.0","id":"d",` + want, `{"jsonrpc":"2.0","id":0,` + want}, true},
		{"notifications, junk and replies are dropped", "banner\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\n{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n" + rawInit,
			[]string{`{"jsonrpc":"2.0","id":0,` + want}, true},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]` + "\n",
			[]string{`[{"jsonrpc":"2.0","id":1,` + want + `]`}, false},
		{"nothing", "", nil, false},
		{"stops at initialize", rawInit + "\n" + `{"jsonrpc":"2.0","id":9,"method":"ping"}` + "\n", []string{`{"jsonrpc":"2.0","id":0,` + want}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			got := Refuse(strings.NewReader(tt.in), &out, reason, time.Minute, 0)
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				lines = nil
			}
			if got != tt.wantInit || strings.Join(lines, "\n") != strings.Join(tt.wantOut, "\n") {
				t.Errorf("Refuse = %v, wrote\n%s\nwant %v and\n%s", got, out.String(), tt.wantInit, strings.Join(tt.wantOut, "\n"))
			}
		})
	}
}

// TestRefuseBounded: a client that says nothing is waited for at most wait, and a line over
// the limit is dropped, not kept.
func TestRefuseBounded(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	start := time.Now()
	if Refuse(pr, io.Discard, "x", 100*time.Millisecond, 0) {
		t.Fatal("answered an initialize nobody sent")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	var out bytes.Buffer
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`
	if !Refuse(strings.NewReader(big+"\n"+rawInit+"\n"), &out, "x", time.Minute, 1024) || strings.Count(out.String(), "\n") != 1 || !strings.Contains(out.String(), `"id":0`) {
		t.Errorf("wrote %q", out.String())
	}
}
