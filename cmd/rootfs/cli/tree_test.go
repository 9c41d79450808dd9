package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rootfs-dev/rootfs/clientconfig"
	"github.com/rootfs-dev/rootfs/rootset"
)

// mainOut runs Main in this process and returns stdout, stderr and status.
func mainOut(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestTopLevelExitCodes: the command tree keeps the exit codes and the
// streams of the hand-written dispatcher it replaced.
func TestTopLevelExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name               string
		args               []string
		wantCode           int
		wantOut, wantErr   string
		unwantOut, unwantE string
	}{
		{"no arguments", nil, 2, "", "Usage:", "", ""},
		{"--help", []string{"--help"}, 0, "", "rootfs run [flags] -- COMMAND", "", ""},
		{"-h", []string{"-h"}, 0, "", "Usage:", "", ""},
		{"help", []string{"help"}, 0, "", "Usage:", "", ""},
		{"help run", []string{"help", "run"}, 0, "", "Exit status:", "", ""},
		{"help run lists run's flags", []string{"help", "run"}, 0, "", "--ro-bind SRC[:DST]", "", ""},
		{"run --help is help run", []string{"run", "--help"}, 0, "", "--ro-bind SRC[:DST]", "", ""},
		{"help of an unknown topic", []string{"help", "nosuch"}, 0, "", "Usage:", "", ""},
		{"unknown command", []string{"nosuch"}, 2, "", `unknown command "nosuch"`, "", ""},
		{"unknown top-level flag", []string{"--nosuch"}, 2, "", "unknown flag: --nosuch", "", ""},
		{"doctor takes no arguments", []string{"doctor", "x"}, 2, "", "rootfs doctor: usage: doctor takes no arguments", "", ""},
		{"mount needs a mountpoint", []string{"mount", "--root", "/tmp"}, 2, "", "give exactly one MOUNTPOINT", "", ""},
		{"run needs a command", []string{"run", "--root", "/tmp"}, 125, "", "no COMMAND", "", ""},
		{"run: unknown flag", []string{"run", "--nosuch", "--", "true"}, 125, "", "unknown flag: --nosuch", "", ""},
		{"run: --version is not one of run's flags", []string{"run", "--version", "--", "true"}, 125, "", "unknown flag: --version", "rootfs (", ""},
		{"--version", []string{"--version"}, 0, "rootfs ", "", "", "Usage"},
		{"version", []string{"version"}, 0, "rootfs ", "", "", "Usage"},
		{"completion writes to stdout", []string{"completion", "bash"}, 0, "__start_rootfs", "", "", ""},
		{"man writes to stdout", []string{"man"}, 0, ".TH ROOTFS 1", "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := mainOut(tt.args...)
			if code != tt.wantCode || !strings.Contains(out, tt.wantOut) || !strings.Contains(errs, tt.wantErr) ||
				(tt.unwantOut != "" && strings.Contains(out, tt.unwantOut)) || (tt.unwantE != "" && strings.Contains(errs, tt.unwantE)) {
				t.Fatalf("rootfs %q: exit %d\nstdout %q\nstderr %q\nwant exit %d, stdout with %q, stderr with %q", tt.args, code, out, errs, tt.wantCode, tt.wantOut, tt.wantErr)
			}
			if tt.wantOut == "" && out != "" {
				t.Errorf("stdout must stay empty (it is the protocol's in run), got %q", out)
			}
		})
	}
}

// TestHelpListsEveryFlag: "rootfs help NAME" and the man page show each
// flag the command's own parser accepts, because both read the flags
// function the parser uses.
func TestHelpListsEveryFlag(t *testing.T) {
	page := ManPage()
	for _, name := range commandNames() {
		c := commands()[name]
		_, help, _ := mainOut("help", name)
		flagSet(c).VisitAll(func(fl *pflag.Flag) {
			if fl.Hidden || fl.Deprecated != "" {
				return
			}
			if !strings.Contains(help, "--"+fl.Name) {
				t.Errorf("rootfs help %s lacks --%s", name, fl.Name)
			}
			if !strings.Contains(page, `\-\-`+roffText(fl.Name)) {
				t.Errorf("the man page lacks %s's --%s", name, fl.Name)
			}
		})
	}
}

// TestComplete asks the command tree what it completes, the way the shell
// scripts do ("rootfs __complete ARGS... PARTIAL").
func TestComplete(t *testing.T) {
	for _, tt := range []struct {
		name      string
		args      []string
		want      []string // lines that must be offered
		unwant    []string // lines that must not
		directive string   // ":N" cobra prints last
	}{
		{"commands", []string{""}, []string{"run\t", "mount\t", "doctor\t", "version\t", "completion\t"}, []string{"man\t"}, ":4"},
		{"run's flags", []string{"run", "--ro"}, []string{"--ro-bind\t", "--root\t", "--roots-file\t"}, []string{"--help", "--allow"}, ":4"},
		{"a flag after another flag's value", []string{"run", "--root", "/x", "--no-n"}, []string{"--no-network\t"}, nil, ":4"},
		{"a LEVEL flag's values", []string{"run", "--log-level", "w"}, []string{"warn"}, []string{"info"}, ":4"},
		{"a DIR flag's value is a directory", []string{"run", "--allow", ""}, nil, nil, ":16"},
		{"a PATH flag's value is a file name", []string{"run", "--root", ""}, nil, nil, ":0"},
		{"after --, the server's arguments are not rootfs's", []string{"run", "--", "node", "--r"}, nil, []string{"--root", "--ro-bind"}, ":0"},
		{"after run's COMMAND, its arguments are not rootfs's", []string{"run", "--read-only", "node", "--r"}, nil, []string{"--root", "--ro-bind"}, ":0"},
		{"mount's operand is a directory", []string{"mount", "--root", "/x", ""}, nil, nil, ":16"},
		{"mount takes flags after the mountpoint", []string{"mount", "/mnt", "--allow-o"}, []string{"--allow-other\t"}, nil, ":4"},
		{"doctor has no operands", []string{"doctor", ""}, nil, nil, ":4"},
		{"help completes command names", []string{"help", "r"}, []string{"run"}, nil, ":4"},
		{"run --layout's values", []string{"run", "--layout", ""}, []string{"host", "flat"}, nil, ":4"},
		{"mount --layout's values", []string{"mount", "--layout", "f"}, []string{"flat"}, []string{"host"}, ":4"},
		{"--layout=", []string{"run", "--layout="}, []string{"--layout=host", "--layout=flat"}, nil, ":4"},
		{"wrap --client's values", []string{"wrap", "--client", "c"}, []string{"claude-code", "claude-desktop", "cursor", "codex"}, []string{"vscode", "gemini"}, ":4"},
		{"unwrap --client's values", []string{"unwrap", "--client", ""}, []string{"vscode", "gemini"}, nil, ":4"},
		{"--client's next item in a list", []string{"wrap", "--client", "vscode,c"}, []string{"vscode,cursor", "vscode,codex"}, []string{"vscode,vscode", "\ncursor"}, ":4"},
		{"--client=", []string{"wrap", "--client=g"}, []string{"--client=gemini"}, nil, ":4"},
		{"after run's COMMAND, --layout= is the server's", []string{"run", "node", "--layout="}, nil, []string{"host"}, ":0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errs, code := mainOut(append([]string{"__complete"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if got := lines[len(lines)-1]; got != tt.directive {
				t.Errorf("directive %s, want %s\n%s", got, tt.directive, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, "\n"+w) && !strings.HasPrefix(out, w) {
					t.Errorf("not offered: %q\n%s", w, out)
				}
			}
			for _, u := range tt.unwant {
				if strings.Contains(out, u) {
					t.Errorf("offered %q, which does not belong here\n%s", u, out)
				}
			}
		})
	}
}

func TestDescribeVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}
	if got, want := describe(bi, ""), "v1.2.0 (revision unknown, go1.26.8)"; got != want {
		t.Errorf("without VCS: %q, want %q", got, want)
	}
	bi.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-12-03T05:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	if got, want := describe(bi, ""), "v1.2.0 (revision 0123abc of 2026-12-03T05:00:00Z, modified, go1.26.8)"; got != want {
		t.Errorf("with VCS: %q, want %q", got, want)
	}
	if got, want := describe(bi, "1.2.0~rc1"), "1.2.0~rc1 (revision 0123abc of 2026-12-03T05:00:00Z, modified, go1.26.8)"; got != want {
		t.Errorf("linked with a version: %q, want %q", got, want)
	}
}

// TestLinkedVersionEverywhere builds rootfs the way the packages do, with
// its version linked in, and expects --version, "rootfs version" and the
// man page to say that version, the one the package carries.
func TestLinkedVersionEverywhere(t *testing.T) {
	const v = "1.2.3~git20261204.0123abcdef01"
	bin := buildBinary(t, "-ldflags=-X github.com/rootfs-dev/rootfs/cmd/rootfs/cli.version="+v)
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil || !strings.HasPrefix(string(out), "rootfs "+v+" (") {
			t.Errorf("rootfs %v = %q (%v), want rootfs %s (...)", args, out, err, v)
		}
	}
	out, err := exec.Command(bin, "man").Output()
	if want := `.TH ROOTFS 1 "" "rootfs ` + strings.ReplaceAll(v, "-", `\-`) + `"`; err != nil || !strings.HasPrefix(string(out), want) {
		first, _, _ := strings.Cut(string(out), "\n")
		t.Errorf("rootfs man begins %q (%v), want %q", first, err, want)
	}
}

// buildBinary builds cmd/rootfs with extra go build flags, or skips when
// there is no go toolchain.
func buildBinary(t *testing.T, flags ...string) string {
	t.Helper()
	return buildBinaryIn(t, "", flags...)
}

// buildBinaryIn builds ./cmd/rootfs of the module checked out in dir ("":
// this one). GOFLAGS from the environment is ignored: flags decide.
func buildBinaryIn(t *testing.T, dir string, flags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go toolchain not available to build cmd/rootfs")
	}
	p := filepath.Join(t.TempDir(), "rootfs")
	cmd := exec.Command(goTool, append(append([]string{"build"}, flags...), "-o", p, "github.com/rootfs-dev/rootfs/cmd/rootfs")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", flags, err, out)
	}
	return p
}

// TestVersionNamesTheRevision builds rootfs from this checkout with VCS
// stamping and expects --version to name the commit checked out; the
// control build, without stamping, must not (so the test can fail).
func TestVersionNamesTheRevision(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (or no git): %v", err)
	}
	rev := strings.TrimSpace(string(head))
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(string(top))
	if st, err := os.Stat(filepath.Join(dir, ".git")); err != nil || !st.IsDir() {
		// go build stamps VCS information only where .git is a directory,
		// not in a "git worktree" (.git is a file there): build a shared
		// clone of HEAD instead.
		clone := filepath.Join(t.TempDir(), "src")
		if out, err := exec.Command("git", "clone", "-q", "--shared", "--no-checkout", dir, clone).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		if out, err := exec.Command("git", "-C", clone, "checkout", "-q", rev).CombinedOutput(); err != nil {
			t.Fatalf("git checkout: %v\n%s", err, out)
		}
		t.Logf("%s is a git worktree; building a clone of %s", dir, rev)
		dir = clone
	}
	bin := buildBinaryIn(t, dir, "-buildvcs=true")
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("rootfs %v: %v", args, err)
		}
		if !strings.HasPrefix(string(out), "rootfs ") || !strings.Contains(string(out), "revision "+rev) {
			t.Errorf("rootfs %v = %q, want the revision %s", args, out, rev)
		}
	}
	control := buildBinary(t, "-buildvcs=false")
	out, _ := exec.Command(control, "--version").Output()
	if strings.Contains(string(out), rev) || !strings.Contains(string(out), "revision unknown") {
		t.Errorf("control built with -buildvcs=false: %q", out)
	}
}

// TestCompletionScriptsLoad loads each completion script in its shell and
// asks the shell what it registered, then (bash, fish) has the shell
// complete "rootfs run --ro" through the script and the binary, and
// "rootfs run -- node --ro", where nothing of rootfs's may be offered. zsh
// cannot complete without a terminal; its check is the registration. A
// shell that is not installed skips (scripts/setup.sh and .ci/run install
// bash-completion, zsh and fish).
func TestCompletionScriptsLoad(t *testing.T) {
	bin := buildBinary(t)
	dir := filepath.Dir(bin)
	const bashComplete = `source /usr/share/bash-completion/bash_completion && source <(rootfs completion bash) &&
COMP_LINE="$LINE"; read -ra COMP_WORDS <<<"$LINE"; COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMP_POINT=${#COMP_LINE}
__start_rootfs 2>/dev/null; printf '%s\n' "${COMPREPLY[@]}"`
	for _, tt := range []struct {
		shell, script, want string
		complete            string // a script completing $LINE, or ""
		needs               string // a file the completion needs
	}{
		{"bash", `source <(rootfs completion bash) && complete -p rootfs`, "complete -o default -F __start_rootfs rootfs", bashComplete, "/usr/share/bash-completion/bash_completion"},
		{"zsh", `autoload -U compinit && compinit -u && source <(rootfs completion zsh) && print -r -- $_comps[rootfs]`, "_rootfs", "", ""},
		{"fish", `rootfs completion fish | source; and complete -c rootfs`, "__rootfs_prepare_completions", `rootfs completion fish | source; and complete -C "$LINE"`, ""},
	} {
		t.Run(tt.shell, func(t *testing.T) {
			sh, err := exec.LookPath(tt.shell)
			if err != nil {
				skipOrFail(t, tt.shell+" is not installed (apt-get install "+tt.shell+")")
			}
			run := func(script string, env ...string) string {
				cmd := exec.Command(sh, "-c", script)
				cmd.Env = append(append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "HOME="+t.TempDir()), env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s -c %q: %v\n%s", tt.shell, script, err, out)
				}
				return string(out)
			}
			if out := run(tt.script); !strings.Contains(out, tt.want) {
				t.Fatalf("%s -c %q:\n%s\nwant %q", tt.shell, tt.script, out, tt.want)
			}
			// The control: without the script, the shell knows no
			// completion for rootfs.
			ctl := strings.Replace(strings.Replace(tt.script, "source <(rootfs completion "+tt.shell+") && ", "", 1), "rootfs completion fish | source; and ", "", 1)
			cmd := exec.Command(sh, "-c", ctl)
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
			if out, _ := cmd.CombinedOutput(); strings.Contains(string(out), tt.want) {
				t.Fatalf("control %q already shows %q", ctl, out)
			}
			if tt.complete == "" {
				return
			}
			if _, err := os.Stat(tt.needs); tt.needs != "" && err != nil {
				skipOrFail(t, tt.needs+" is missing (apt-get install bash-completion)")
			}
			if out := run(tt.complete, "LINE=rootfs run --ro"); !strings.Contains(out, "--root") || !strings.Contains(out, "--ro-bind") {
				t.Errorf("%s completes \"rootfs run --ro\" as %q", tt.shell, out)
			}
			if out := run(tt.complete, "LINE=rootfs run -- node --ro"); strings.Contains(out, "--root") {
				t.Errorf("%s offers rootfs's flags to the server: %q", tt.shell, out)
			}
			if out := run(tt.complete, "LINE=rootfs wrap --client cl"); !strings.Contains(out, "claude-code") || !strings.Contains(out, "claude-desktop") || strings.Contains(out, "cursor") {
				t.Errorf("%s completes \"rootfs wrap --client cl\" as %q", tt.shell, out)
			}
			if out := run(tt.complete, "LINE=rootfs run --layout f"); !strings.Contains(out, "flat") || strings.Contains(out, "host") {
				t.Errorf("%s completes \"rootfs run --layout f\" as %q", tt.shell, out)
			}
		})
	}
}

// TestManPageRenders renders the page with man(1) and groff's warnings on.
func TestManPageRenders(t *testing.T) {
	manTool, err := exec.LookPath("man")
	if err != nil {
		skipOrFail(t, "man is not installed (apt-get install man-db groff-base)")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	if out, err := exec.Command(bin, "man", dir).CombinedOutput(); err != nil {
		t.Fatalf("rootfs man %s: %v\n%s", dir, err, out)
	}
	page := filepath.Join(dir, "rootfs.1")
	cmd := exec.Command(manTool, "-l", page)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MAN_KEEP_FORMATTING=0", "MANPAGER=cat", "PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("man -l rootfs.1: %v\n%s", err, stderr.String())
	}
	text := stripOverstrike(string(out))
	for _, want := range []string{"ROOTFS(1)", "rootfs run", "--ro-bind SRC[:DST]", "--allow DIR", "--no-network", "--allow-other", "EXIT STATUS", "completion bash|zsh|fish"} {
		if !strings.Contains(text, want) {
			t.Errorf("man rootfs.1 lacks %q", want)
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		out, err := exec.Command(groff, "-man", "-ww", "-z", page).CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("groff -man -ww: %v\n%s", err, out)
		}
	}
}

// stripOverstrike removes the backspace bold/underline a pager-less man may
// still emit.
func stripOverstrike(s string) string {
	var b strings.Builder
	r := []rune(s)
	for i := 0; i < len(r); i++ {
		if i+1 < len(r) && r[i+1] == '\b' {
			i++
			continue
		}
		b.WriteRune(r[i])
	}
	return b.String()
}

// skipOrFail skips for a missing tool, or fails under ROOTFS_REQUIRE_FUSE=1
// (CI installs every tool these tests use).
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("ROOTFS_REQUIRE_FUSE") == "1" {
		t.Fatal(reason + " (ROOTFS_REQUIRE_FUSE=1: CI must install it)")
	}
	t.Skip(reason)
}

// TestFlagValuesAccepted: every value completion offers for a flag
// (setValues) is one its command accepts, and back.
func TestFlagValuesAccepted(t *testing.T) {
	accepts := map[string]func(string) error{
		"layout":    func(v string) error { _, err := rootset.ParseLayout(v); return err },
		"log-level": func(v string) error { _, err := newLogger(v, io.Discard); return err },
		"cache-writes": func(v string) error {
			_, err := parseRunFlags([]string{"--cache-writes", v, "--", "true"}, io.Discard)
			return err
		},
		"client": func(v string) error {
			if _, ok := clientconfig.LookupClient(v); !ok {
				return fmt.Errorf("unknown client %q", v)
			}
			return nil
		},
	}
	all := map[string][]string{"client": clientconfig.ClientNames()}
	for _, name := range commandNames() {
		flagSet(commands()[name]).VisitAll(func(fl *pflag.Flag) {
			values, ok := fl.Annotations[valuesAnnotation]
			if !ok {
				return
			}
			check, ok := accepts[fl.Name]
			if !ok {
				t.Errorf("%s --%s lists values this test does not check", name, fl.Name)
				return
			}
			for _, v := range values {
				if err := check(v); err != nil {
					t.Errorf("%s --%s %s is offered but refused: %v", name, fl.Name, v, err)
				}
			}
			if want, ok := all[fl.Name]; ok && !slices.Equal(values, want) {
				t.Errorf("%s --%s offers %q, want %q", name, fl.Name, values, want)
			}
		})
	}
}

// TestHelpDescribesLayout: "rootfs run --help" and the man page describe
// the default host layout (each root at its own path, the client's URIs
// unchanged in roots/list), not the flat layout's file:///NAME alone, and
// every example that names a root by its flat path /NAME asks for
// --layout flat.
func TestHelpDescribesLayout(t *testing.T) {
	_, help, _ := mainOut("run", "--help")
	page := ManPage()
	for _, want := range []string{"its own host path", "client's URIs unchanged", "--layout flat"} {
		if !strings.Contains(help, want) {
			t.Errorf("rootfs run --help lacks %q", want)
		}
		if !strings.Contains(page, roffText(want)) {
			t.Errorf("the man page lacks %q", want)
		}
	}
	for _, text := range []string{help, page} {
		if strings.Contains(text, "<entry>") || strings.Contains(text, "file:///<") {
			t.Errorf("still describes roots/list with file:///<entry>")
		}
	}
	_, examples, _ := strings.Cut(help, "\nExamples:\n")
	examples, _, _ = strings.Cut(examples, "\n\n")
	for _, line := range strings.Split(examples, "\n") {
		if strings.Contains(line, " /app") && !strings.Contains(line, "--layout flat") {
			t.Errorf("example names the flat path /app in host layout: %s", strings.TrimSpace(line))
		}
	}
}
