package mcpbridge

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeLog records each Write call separately.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (w *writeLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

func (w *writeLog) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.writes...)
}

func TestLineReaderLinesAndNewlines(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // over bufio's buffer: read in chunks
	in := "a\n" + long + "\n" + strings.Repeat("y", 300) + "\nb\r\nlast"
	lr := newLineReader(strings.NewReader(in), 200<<10)
	lr2 := newLineReader(strings.NewReader(strings.Repeat("z", 300)+"\nc\n"), 200)
	for _, tt := range []struct {
		lr      *lineReader
		want    string
		wantErr error
		newline bool // the line's '\n' follows it within its capacity
	}{
		{lr: lr, want: "a", newline: true},
		{lr: lr, want: long, newline: true},
		{lr: lr, want: strings.Repeat("y", 300), newline: true},
		{lr: lr, want: "b\r", newline: true},
		{lr: lr, want: "last"},
		{lr: lr, wantErr: io.EOF},
		{lr: lr2, wantErr: errLineTooLong},
		{lr: lr2, want: "c", newline: true},
	} {
		line, err := tt.lr.next()
		if !errors.Is(err, tt.wantErr) || string(line) != tt.want {
			t.Fatalf("next: %.20q, %v; want %.20q, %v", line, err, tt.want, tt.wantErr)
		}
		if err != nil {
			continue
		}
		n := len(line)
		if got := n < cap(line) && line[:n+1][n] == '\n'; got != tt.newline {
			t.Errorf("%.20q: newline after it %v, want %v", line, got, tt.newline)
		}
	}
}

// TestPeerWriterOneWritePerFrame: a forwarded message and its newline go out in one Write,
// whether or not the line buffer held the newline, and own messages queued before a forward
// are written before it.
func TestPeerWriterOneWritePerFrame(t *testing.T) {
	var w writeLog
	q := newPeerWriter(&w, nil)
	lr := newLineReader(strings.NewReader(`{"a":1}`+"\n"), DefaultMaxLine)
	line, err := lr.next()
	if err != nil {
		t.Fatal(err)
	}
	if err := q.forward(line); err != nil {
		t.Fatal(err)
	}
	if err := q.forward([]byte(`{"b":2}`)); err != nil { // no newline after it: copied
		t.Fatal(err)
	}
	q.wmu.Lock() // hold the writer so that the own message stays queued
	if err := q.send([]byte(`{"own":1}` + "\n")); err != nil {
		t.Fatal(err)
	}
	q.wmu.Unlock()
	if err := q.forward([]byte(`{"c":3}`)); err != nil {
		t.Fatal(err)
	}
	if !q.closeAfterDrain(hang) {
		t.Fatal("did not drain")
	}
	want := []string{`{"a":1}` + "\n", `{"b":2}` + "\n", `{"own":1}` + "\n", `{"c":3}` + "\n"}
	if got := w.get(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("writes %q, want %q", got, want)
	}
	if err := q.forward([]byte(`{}`)); !errors.Is(err, errQueueStopped) {
		t.Errorf("forward after close: %v", err)
	}
	if err := q.send([]byte("{}\n")); !errors.Is(err, errQueueStopped) {
		t.Errorf("send after close: %v", err)
	}
}

// stuckWriter blocks every Write until Close; entered is closed when the first Write starts.
type stuckWriter struct {
	entered, closed chan struct{}
	once, cOnce     sync.Once
}

func newStuckWriter() *stuckWriter {
	return &stuckWriter{entered: make(chan struct{}), closed: make(chan struct{})}
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.closed
	return 0, io.ErrClosedPipe
}

func (w *stuckWriter) Close() error {
	w.cOnce.Do(func() { close(w.closed) })
	return nil
}

// TestRunReturnsWhileAForwardIsStuck: a reader blocked forwarding to a peer that does not read
// does not keep Run from returning once its context is cancelled, in either direction. (Run
// closes the server's stdin, which unblocks a forward to the server; it never closes the
// client's stdout, so the server loop forwards outside the handler lock.)
func TestRunReturnsWhileAForwardIsStuck(t *testing.T) {
	for _, tt := range []struct {
		name     string
		toServer bool
	}{
		{name: "to the client", toServer: false},
		{name: "to the server", toServer: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stuck := newStuckWriter()
			t.Cleanup(func() { stuck.Close() })
			cinR, cinW := io.Pipe()
			soutR, soutW := io.Pipe()
			t.Cleanup(func() { cinW.Close(); soutW.Close() })
			opts := Options{ClientIn: cinR, ClientOut: &writeLog{}, ServerIn: nopCloser{&writeLog{}}, ServerOut: soutR,
				Installer: newTestView(nil)}
			if tt.toServer {
				opts.ServerIn = stuck
			} else {
				opts.ClientOut = stuck
			}
			b, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- b.Run(ctx) }()
			go func() {
				if tt.toServer {
					io.WriteString(cinW, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n")
				} else {
					io.WriteString(soutW, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n")
				}
			}()
			select {
			case <-stuck.entered:
			case <-time.After(hang):
				t.Fatal("nothing was forwarded")
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(hang):
				t.Fatal("Run did not return")
			}
		})
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
