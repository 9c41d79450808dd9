package mcpbridge

// This file is the transport: newline-delimited frames read with a bounded buffer, and written
// one write(2) per message. It knows nothing of JSON (see wire.go).

import (
	"bufio"
	"errors"
	"io"
	"sync"
	"time"
)

// DefaultMaxLine is the default limit on one newline-delimited message, in bytes (newline excluded).
// It matches go-sdk's DefaultMaxLineLength; the TypeScript SDK caps at 10 MiB.
const DefaultMaxLine = 16 << 20

// errLineTooLong is returned by lineReader.next for a line over the limit. The line has been
// consumed (up to its newline or EOF) without being buffered, so the next call reads the next line.
var errLineTooLong = errors.New("line too long")

// lineReader splits a stream into lines with a bounded buffer.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its '\n'. The slice is valid until the next call. Within
// the slice's capacity the line's '\n' follows it, so it can be written as a frame without a copy
// (see peerWriter.forward). A final line without a newline is returned before io.EOF. A line over
// max bytes is discarded and reported as errLineTooLong; reading can go on.
func (lr *lineReader) next() ([]byte, error) {
	chunk, err := lr.r.ReadSlice('\n')
	if err == nil && len(chunk) <= lr.max+1 {
		return chunk[:len(chunk)-1], nil // the common case: the whole line is in the buffer
	}
	if cap(lr.buf) > 1<<20 {
		lr.buf = nil // do not keep a huge buffer after one big message
	}
	lr.buf = lr.buf[:0]
	tooLong := false
	for {
		if !tooLong {
			n := len(chunk)
			if n > 0 && chunk[n-1] == '\n' {
				n--
			}
			if len(lr.buf)+n > lr.max {
				tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, chunk...)
			}
		}
		switch {
		case err == nil: // chunk ends in '\n'
			if tooLong {
				return nil, errLineTooLong
			}
			return lr.buf[:len(lr.buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			if tooLong {
				return nil, errLineTooLong
			}
			if len(lr.buf) > 0 {
				return lr.buf, nil
			}
			return nil, io.EOF
		default:
			return nil, err
		}
		chunk, err = lr.r.ReadSlice('\n')
	}
}

// peerWriter serializes writes to one peer, one write(2) per message (frame and '\n' together).
//
// A message rootfs forwards is written by the goroutine that read it (forward), while it holds
// wmu: handing it to a writer goroutine would cost a thread wakeup per message, which on a small
// machine is most of what the bridge adds to a round trip. forward blocks while the peer does not
// read (backpressure toward the sender).
//
// Messages rootfs makes itself (send) never block, so that a reader never waits on the other
// direction's writer (which could deadlock: see the package doc). They are queued and written,
// in order, by whichever gets wmu first: the next forward to that peer (before its own message)
// or a goroutine started for them.
type peerWriter struct {
	w     io.Writer
	onErr func(error) // called once, on the first write error; nil: none

	// wmu is held across each Write to w, so messages never interleave. Lock order: wmu, then mu.
	wmu sync.Mutex
	buf []byte // a forwarded message and its '\n', when they are not contiguous already (wmu)

	// mu guards the fields that follow.
	mu       sync.Mutex
	own      [][]byte // rootfs's own messages not yet written (each ends in '\n'), oldest first
	ownBytes int      // their total size (bounded by ownBytesLimit)
	flushing bool     // a goroutine is writing own
	closed   bool     // closeAfterDrain or stopNow was called: new messages are refused
	err      error    // first write error, or errQueueStopped
}

var (
	errQueueStopped = errors.New("queue stopped")
	errOwnFull      = errors.New("too many messages queued for a peer that does not read")
)

// ownLimit bounds rootfs's own pending messages toward one peer (they are small and few:
// replies, roots/list requests, notifications), and ownBytesLimit their bytes; beyond either
// they are dropped and logged. They pile up only while that peer does not read.
const ownLimit = 4096

// keepBuf is the largest copy buffer a peerWriter keeps between messages.
const keepBuf = 64 << 10

func newPeerWriter(w io.Writer, onErr func(error)) *peerWriter {
	return &peerWriter{w: w, onErr: onErr}
}

// send queues msg, a message rootfs made (it must end in '\n' and must not be modified
// afterwards). It never blocks.
func (q *peerWriter) send(msg []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.err != nil:
		return q.err
	case q.closed:
		return errQueueStopped
	case len(q.own) >= ownLimit || q.ownBytes+len(msg) > ownBytesLimit:
		return errOwnFull
	}
	q.own = append(q.own, msg)
	q.ownBytes += len(msg)
	if !q.flushing {
		q.flushing = true
		go q.flush()
	}
	return nil
}

func (q *peerWriter) flush() {
	q.wmu.Lock()
	defer q.wmu.Unlock()
	for {
		q.mu.Lock()
		if len(q.own) == 0 || q.err != nil {
			q.flushing = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		q.writeOwnLocked()
	}
}

// writeOwnLocked writes the queued own messages; q.wmu is held.
func (q *peerWriter) writeOwnLocked() error {
	q.mu.Lock()
	own, err := q.own, q.err
	q.own, q.ownBytes = nil, 0
	q.mu.Unlock()
	if err != nil {
		return err
	}
	for _, m := range own {
		if err := q.write(m); err != nil {
			return err
		}
	}
	return nil
}

// forward writes msg (without its '\n') to the peer, after any own messages queued before it.
// It blocks until the peer has taken it. msg is not retained.
func (q *peerWriter) forward(msg []byte) error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return errQueueStopped
	}
	q.wmu.Lock()
	defer q.wmu.Unlock()
	if err := q.writeOwnLocked(); err != nil {
		return err
	}
	var frame []byte
	if n := len(msg); n < cap(msg) && msg[:n+1][n] == '\n' {
		frame = msg[:n+1] // as lineReader returns a line: its '\n' follows it
	} else {
		q.buf = append(append(q.buf[:0], msg...), '\n')
		frame = q.buf
		if cap(q.buf) > keepBuf {
			q.buf = nil
		}
	}
	return q.write(frame)
}

// write writes one frame; q.wmu is held.
func (q *peerWriter) write(frame []byte) error {
	_, err := q.w.Write(frame)
	if err == nil {
		return nil
	}
	q.mu.Lock()
	first := q.err == nil
	if first {
		q.err = err
	}
	q.mu.Unlock()
	if first && q.onErr != nil {
		q.onErr(err)
	}
	return err
}

// closeAfterDrain refuses new messages, then waits at most d for what is queued or being written
// to reach the peer, and reports whether it did.
func (q *peerWriter) closeAfterDrain(d time.Duration) bool {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	done := make(chan struct{})
	go func() {
		// Stays blocked behind a Write the peer never takes, until the caller closes the file.
		q.wmu.Lock()
		defer q.wmu.Unlock()
		_ = q.writeOwnLocked()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// stopNow refuses new messages and drops queued ones. A Write in progress is not interrupted
// (the caller closes the underlying file for that).
func (q *peerWriter) stopNow() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.err == nil {
		q.err = errQueueStopped
	}
	q.own, q.ownBytes = nil, 0
}
