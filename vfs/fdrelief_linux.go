//go:build linux

package vfs

import (
	"errors"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"go.uber.org/zap"

	"github.com/rootfs-dev/rootfs/internal/control"
)

// The view holds one O_PATH descriptor per inode the kernel remembers, so a
// walk of more files than RLIMIT_NOFILE allows would fail with EMFILE
// although most of those inodes are no longer in use. When an open fails with EMFILE or ENFILE the
// view asks the kernel to forget the inodes it does not use
// (FUSE_NOTIFY_PRUNE, Linux 6.16+), lets the runtime close the descriptors
// of the nodes go-fuse then drops, and retries.

// pruneBatch is how many node ids go in one FUSE_NOTIFY_PRUNE message.
const pruneBatch = 512

func tooManyFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// withFDs runs open and, when it fails for lack of descriptors, relieves
// the pressure and runs it again a few times.
func (v *View) withFDs(open func() (int, error)) (int, error) {
	fd, err := open()
	if !tooManyFiles(err) || !v.mounted.Load() || control.On(control.NoFDRelief) {
		return fd, err
	}
	for wait := time.Millisecond; wait <= 64*time.Millisecond; wait *= 2 {
		v.relieveFDs()
		time.Sleep(wait) // the kernel's FORGETs are queued, not answered
		runtime.GC()     // closes the descriptors of forgotten nodes
		if fd, err = open(); !tooManyFiles(err) {
			return fd, err
		}
	}
	return fd, err
}

// reliefState is the one descriptor relief that may be running.
type reliefState struct {
	// mu guards the field that follows.
	mu      sync.Mutex
	running chan struct{} // non-nil while a relief runs; closed when it ends
}

// relieveFDs asks the kernel to forget every inode of the view that it is
// not using; one relief runs at a time, on its own goroutine (never inside
// the kernel's request the handler is serving), and concurrent callers
// share it.
func (v *View) relieveFDs() {
	r := &v.relief
	r.mu.Lock()
	if r.running == nil {
		done := make(chan struct{})
		r.running = done
		go func() {
			n := v.prune()
			v.log.Debug("descriptors exhausted: asked the kernel to forget unused inodes", zap.Int("inodes", n))
			r.mu.Lock()
			r.running = nil
			r.mu.Unlock()
			close(done)
		}()
	}
	done := r.running
	r.mu.Unlock()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}

// prune sends FUSE_NOTIFY_PRUNE for every node below the top level: the
// kernel forgets only those no dentry in use or open file holds.
func (v *View) prune() int {
	r := v.root.EmbeddedInode()
	var ids []*fs.Inode
	seen := map[*fs.Inode]bool{}
	var walk func(n *fs.Inode)
	walk = func(n *fs.Inode) {
		for _, ch := range n.Children() {
			if seen[ch] {
				continue
			}
			seen[ch] = true
			if _, ok := ch.Operations().(*node); !ok {
				if _, synth := ch.Operations().(*rootDir); synth {
					walk(ch) // host layout: entries lie below
				}
				continue
			}
			walk(ch)
			ids = append(ids, ch) // children before their parents
		}
	}
	walk(r)
	for i := 0; i < len(ids); i += pruneBatch {
		if errno := r.NotifyPrune(ids[i:min(i+pruneBatch, len(ids))]); errno != 0 {
			v.log.Debug("prune notify failed", zap.Error(errno))
			break
		}
	}
	return len(ids)
}
