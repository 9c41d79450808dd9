package mcpbridge

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

const benchRequest = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"/proj/src/main.go","head":40}}}` + "\n"
const benchReply = `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"package main\n\nfunc main() {}\n"}],"isError":false}}` + "\n"

// echoServer answers every line read from r with benchReply on w.
func echoServer(r io.Reader, w io.Writer) {
	s := bufio.NewReader(r)
	for {
		if _, err := s.ReadSlice('\n'); err != nil {
			return
		}
		if _, err := io.WriteString(w, benchReply); err != nil {
			return
		}
	}
}

func mustPipe(b *testing.B) (*os.File, *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// roundTrips sends a request on w and reads the reply from r, b.N times.
func roundTrips(b *testing.B, w io.Writer, r io.Reader) {
	br := bufio.NewReader(r)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := io.WriteString(w, benchRequest); err != nil {
			b.Fatal(err)
		}
		if _, err := br.ReadSlice('\n'); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForward measures a forwarded request round trip over OS pipes: Direct is client ⇄
// server; Bridge is client ⇄ bridge ⇄ server (two more pipe hops and the router, each way).
func BenchmarkForward(b *testing.B) {
	b.Run("Direct", func(b *testing.B) {
		reqR, reqW := mustPipe(b)
		repR, repW := mustPipe(b)
		go echoServer(reqR, repW)
		roundTrips(b, reqW, repR)
	})
	b.Run("Bridge", func(b *testing.B) {
		cinR, cinW := mustPipe(b)
		coutR, coutW := mustPipe(b)
		sinR, sinW := mustPipe(b)
		soutR, soutW := mustPipe(b)
		go echoServer(sinR, soutW)
		br, err := New(Options{
			ClientIn: cinR, ClientOut: coutW, ServerIn: sinW, ServerOut: soutR,
			Installer: newEmptyTestView(),
			Logger:    zap.NewNop(),
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- br.Run(ctx) }()
		roundTrips(b, cinW, coutR)
		b.StopTimer()
		cancel()
		<-done
	})
}

type nopWC struct{ io.Writer }

func (nopWC) Close() error { return nil }

// BenchmarkRoute measures the router alone for one round trip (a client request forwarded, the
// server's reply forwarded), with both peers writing to io.Discard: no pipes, no scheduler.
func BenchmarkRoute(b *testing.B) {
	br, err := New(Options{
		ClientIn: strings.NewReader(""), ClientOut: io.Discard,
		ServerIn: nopWC{io.Discard}, ServerOut: strings.NewReader(""),
		Installer:    newEmptyTestView(),
		RootsTimeout: time.Hour, Logger: zap.NewNop(),
	})
	if err != nil {
		b.Fatal(err)
	}
	br.toClient = newPeerWriter(io.Discard, nil)
	br.toServer = newPeerWriter(io.Discard, nil)
	req := []byte(benchRequest[:len(benchRequest)-1])
	rep := []byte(benchReply[:len(benchReply)-1])
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		br.fromClient(req)
		br.fromServer(rep)
	}
}
