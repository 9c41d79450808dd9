package mountmgr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/rootfs-dev/rootfs/internal/control"
	"github.com/rootfs-dev/rootfs/internal/linux"
)

// StartServer runs in P1. It validates spec, starts P2 (this binary, the
// hidden init stage) in new mount, PID, IPC and UTS namespaces (and a new
// network namespace with NoNetwork), with cwd "/" and /proc/self/exe as
// its binary, so that nothing of the fork touches the FUSE mount; sends it
// the spec over a pipe, and waits for its report (stagesync_linux.go). It returns once
// the server runs, or the error: *ExecError (126/127), or ErrSetup with
// P2's message. ctx bounds the setup only; cancelling it later does nothing.
//
// Never call it from a goroutine whose thread has its cwd on the view.
func StartServer(ctx context.Context, spec *Spec, opts ServerOptions) (*Server, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	logUnixSockets(log, spec, linux.LandlockABI())
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	payload, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSpec, err)
	}
	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File) {
		r, w, perr := os.Pipe()
		if perr != nil && err == nil {
			err = perr
		}
		closers = append(closers, r, w)
		return r, w
	}
	specR, specW := pipe()
	syncR, syncW := pipe()
	stdinR, stdinW := pipe()
	stdoutR, stdoutW := pipe()
	// The server's stderr is a pipe that P1 copies out, never P1's own stderr:
	// handed the client's file, the server could reopen it through
	// /proc/self/fd/2 and read or truncate a log (or read a terminal).
	stderrR, stderrW := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	flags := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS)
	if spec.NoNetwork || spec.Net != nil {
		flags |= unix.CLONE_NEWNET
	}
	// P2's environment is its own; a control build's knobs go with it (P2
	// applies some of them: see package control).
	env := append([]string{envStage + "=" + stageInit, envSpecFD + "=3", envSyncFD + "=4", envParentPID + "=" + strconv.Itoa(os.Getpid())}, control.Environ()...)
	extra := []*os.File{specR, syncW}
	// Issue 23: the network hand-over socket, fd 5 (net_linux.go).
	var netParent, netChild *os.File
	if spec.Net != nil {
		if netParent, netChild, err = handoverPair("net"); err != nil {
			closeAll()
			return nil, fmt.Errorf("%w: %v", ErrSetup, err)
		}
		closers = append(closers, netParent, netChild)
		extra = append(extra, netChild)
		env = append(env, envNetFD+"=5")
	}
	// The audit events: the group is read by P2, which passes them on
	// through a pipe (audit.Forward).
	var auditR, auditW *os.File
	if opts.AuditGroup != nil {
		if auditR, auditW, err = os.Pipe(); err != nil {
			closeAll()
			return nil, fmt.Errorf("%w: %v", ErrSetup, err)
		}
		closers = append(closers, auditR, auditW)
		env = append(env, fmt.Sprintf("%s=%d,%d", envAuditFD, 3+len(extra), 4+len(extra)))
		extra = append(extra, opts.AuditGroup, auditW)
	}
	// The seccomp listener, when refused calls are reported
	// (seccompnotify_linux.go).
	var seccompParent, seccompChild *os.File
	var notify []string
	if opts.SyscallRefused != nil {
		notify = append(notify, "refusals")
	}
	if opts.Connect != nil && spec.Net != nil {
		notify = append(notify, "connect")
	}
	if len(notify) > 0 {
		if seccompParent, seccompChild, err = handoverPair("seccomp"); err != nil {
			closeAll()
			return nil, fmt.Errorf("%w: %v", ErrSetup, err)
		}
		closers = append(closers, seccompParent, seccompChild)
		env = append(env, fmt.Sprintf("%s=%d", envSeccompFD, 3+len(extra)), envSeccompNotify+"="+strings.Join(notify, ","))
		extra = append(extra, seccompChild)
	}
	cmd := &exec.Cmd{
		Path:  "/proc/self/exe",
		Args:  []string{"rootfs-init"},
		Env:   env,
		Dir:   "/",
		Stdin: stdinR, Stdout: stdoutW, Stderr: stderrW,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Cloneflags: flags, Setsid: true, Pdeathsig: syscall.SIGKILL},
	}
	s := &Server{Stdin: stdinW, Stdout: stdoutR, cmd: cmd, log: log, done: make(chan struct{})}
	copied := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Locked for P2's whole life: Pdeathsig follows the forking thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		// Let the last lines of stderr out before reporting the exit; a
		// descendant that keeps the pipe open cannot hold us up for long.
		select {
		case <-copied:
		case <-time.After(500 * time.Millisecond):
		}
		s.code = exitCode(cmd.ProcessState)
		close(s.done)
	}()
	if err := <-started; err != nil {
		closeAll()
		return nil, fmt.Errorf("%w: start sandbox init: %v", ErrSetup, err)
	}
	for _, f := range []*os.File{specR, syncW, stdinR, stdoutW, stderrW} {
		f.Close()
	}
	if netChild != nil {
		netChild.Close()
		defer netParent.Close()
	}
	if seccompChild != nil {
		seccompChild.Close()
		defer seccompParent.Close()
	}
	if auditW != nil {
		auditW.Close()
		s.AuditEvents = auditR
	}
	go func() {
		_, _ = io.Copy(teeWriter{&s.tail, stderr}, stderrR)
		stderrR.Close()
		close(copied)
	}()
	go func() {
		_, _ = specW.Write(payload)
		specW.Close()
	}()
	type reply struct {
		rep stageReport
		err error
	}
	got := make(chan reply, 1)
	go func() {
		rep, err := readStageReport(syncR)
		syncR.Close()
		got <- reply{rep, err}
	}()
	var r reply
	select {
	case r = <-got:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-s.done
		stdinW.Close()
		stdoutR.Close()
		return nil, fmt.Errorf("%w: %v", ErrSetup, ctx.Err())
	}
	if r.err == nil && r.rep.Kind == stageOK && netParent != nil {
		if s.Net, r.err = recvNetFiles(netParent); r.err != nil { // issue 23
			_ = cmd.Process.Kill()
		}
	}
	if r.err == nil && r.rep.Kind == stageOK && seccompParent != nil {
		// Answered from now on; until here a refused call waited.
		var lf *os.File
		var why string
		var connect bool
		if lf, why, connect, r.err = recvSeccomp(seccompParent); r.err == nil && lf != nil {
			r.err = listenSeccomp(lf, opts, s.done)
		}
		if s.Net != nil {
			s.Net.FastPath = connect && opts.Connect != nil
		}
		if opts.SyscallRefused != nil {
			s.SyscallsUnreported = why
		} else if why != "" {
			log.Debug("network: no fast path", zap.String("why", why))
		}
		if r.err != nil {
			_ = cmd.Process.Kill()
		}
	}
	if r.err == nil && r.rep.Kind == stageOK {
		s.serverPid = r.rep.Pid
		log.Debug("server started", zap.Int("init_pid", cmd.Process.Pid), zap.Int("server_pid", s.serverPid))
		return s, nil
	}
	<-s.done
	stdinW.Close()
	stdoutR.Close()
	switch {
	case errors.Is(r.err, errNoStageReport):
		return nil, fmt.Errorf("%w: sandbox init exited with status %d before reporting", ErrSetup, s.code)
	case r.err != nil:
		return nil, fmt.Errorf("%w: read init report: %v", ErrSetup, r.err)
	case r.rep.Kind == stageExec:
		return nil, &ExecError{Code: r.rep.Code, Msg: r.rep.Msg}
	}
	return nil, fmt.Errorf("%w: %s", ErrSetup, r.rep.Msg) // stageError
}

// teeWriter writes to the tail, which never fails, then to w, whose error
// it returns: a stderr that breaks ends the copy as before.
type teeWriter struct {
	tail *stderrTail
	w    io.Writer
}

func (t teeWriter) Write(p []byte) (int, error) {
	_, _ = t.tail.Write(p)
	return t.w.Write(p)
}
