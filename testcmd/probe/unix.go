//go:build linux

package main

// "probe unix": pathname unix sockets made, dialled and served from inside.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// unixResult is one line of "probe unix": Err is "ok" or the errno name.
type unixResult struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	Err  string `json:"err"`
	Line string `json:"line,omitempty"`
}

// unixOp runs "probe unix OP PATH", printing one unixResult per step:
//
//	dial   connect to PATH and read one line
//	serve  bind PATH ("bind"); when that works, accept one connection
//	       within wait and answer it "hello-from-sandbox" ("accept")
//	self   bind PATH, then connect to it from this process ("self")
//
// serve and self remove the socket file they made.
func unixOp(op, path string, wait time.Duration) {
	out := json.NewEncoder(os.Stdout)
	switch op {
	case "dial":
		c, err := net.DialTimeout("unix", path, 3*time.Second)
		if err != nil {
			out.Encode(unixResult{Op: op, Path: path, Err: errs(err)})
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		out.Encode(unixResult{Op: op, Path: path, Err: errs(err), Line: strings.TrimSpace(line)})
	case "serve", "self":
		l, err := net.Listen("unix", path)
		if op == "serve" || err != nil {
			out.Encode(unixResult{Op: "bind", Path: path, Err: errs(err)})
		}
		if err != nil {
			return
		}
		defer l.Close() // removes the file
		if op == "self" {
			c, err := net.DialTimeout("unix", path, 3*time.Second)
			if err == nil {
				c.Close()
			}
			out.Encode(unixResult{Op: op, Path: path, Err: errs(err)})
			return
		}
		l.(*net.UnixListener).SetDeadline(time.Now().Add(wait))
		c, err := l.Accept()
		if err == nil {
			_, err = fmt.Fprintln(c, "hello-from-sandbox")
			c.Close()
		}
		out.Encode(unixResult{Op: "accept", Path: path, Err: errs(err)})
	default:
		os.Exit(2)
	}
}
