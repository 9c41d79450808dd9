package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// ManPage returns rootfs(1) in roff (man macros): one page for every
// command, built from the same usage texts and flag definitions as --help,
// so that it cannot say something --help does not.
//
// It is written by hand rather than with cobra/doc: cobra/doc makes one
// page per command from a fixed template and pulls in a Markdown renderer;
// rootfs has a few commands whose help is already laid out in sections, and
// one page holding them all is what "man rootfs" should show.
func ManPage() string {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH ROOTFS 1 \"\" %s \"User Commands\"\n", roffQuote("rootfs "+versionWord()))
	b.WriteString(".SH NAME\nrootfs \\- " + roffText(shortOf(topUsage)) + "\n")
	b.WriteString(".SH SYNOPSIS\n.nf\n")
	for _, name := range commandNames() {
		c := commands()[name]
		if syn := synopsisOf(c.usage); syn != "" {
			b.WriteString(".B " + roffText(syn) + "\n")
		} else {
			b.WriteString(".B rootfs " + roffText(name) + "\n")
		}
	}
	b.WriteString(".B rootfs version\n.B rootfs completion bash|zsh|fish\n.fi\n")
	b.WriteString(`.SH DESCRIPTION
.B rootfs
speaks MCP to a client on its standard input and output, asks it for its
roots, and starts a stdio MCP server in private namespaces whose
.I /
is a FUSE view holding exactly those roots, with no privileges.
.B rootfs mount
mounts the same view for a person to inspect.
.B rootfs doctor
says what this machine lacks for either.
.SH COMMANDS
`)
	for _, name := range commandNames() {
		c := commands()[name]
		fmt.Fprintf(&b, ".SS %s\n", roffQuote("rootfs "+name))
		usageRoff(&b, c.usage)
		flagsRoff(&b, flagSet(c))
	}
	b.WriteString(`.SS "rootfs version"
Print the module version, the VCS revision it was built from and the Go
version (the same as
.BR "rootfs \-\-version" ).
.SS "rootfs completion bash|zsh|fish"
Print a completion script for the shell, which asks
.B rootfs
itself for completions, so it always matches the flags.
For example, in
.IR ~/.bashrc :
.RS
.nf
source <(rootfs completion bash)
.fi
.RE
The packages install the scripts where bash, zsh and fish look for them.
.SH "EXIT STATUS"
.TP
.B 0
success
.TP
.B 1\-124
.BR "rootfs run" :
the wrapped server's own status (0 too),
also when the client closes standard input or dies
and when rootfs gets SIGINT or SIGTERM,
which it passes on to the server after closing the server's standard input;
.BR "rootfs mount" ", " "rootfs doctor" :
1 on error
.TP
.B 2
usage error (mount, doctor)
.TP
.B 125
.BR "rootfs run" :
rootfs itself failed (one line on standard error says why)
.TP
.B 126
.BR "rootfs run" :
COMMAND exists but cannot be executed
.TP
.B 127
.BR "rootfs run" :
COMMAND was not found
.TP
.B 128+N
the wrapped server (or rootfs) was killed by signal N
.SH "SEE ALSO"
.BR fusermount3 (1),
.BR mount.fuse3 (8),
.BR namespaces (7)
`)
	return b.String()
}

// versionWord is the module version alone, for the page's footer.
func versionWord() string {
	v, _, _ := strings.Cut(Version(), " ")
	return v
}

// synopsisOf returns the first line under "Synopsis:" in a usage text.
func synopsisOf(usage string) string {
	_, after, ok := strings.Cut(usage, "\nSynopsis:\n")
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(after, "\n")
	return strings.TrimSpace(line)
}

// usageRoff renders a usage text (see usage.go) in roff: its first line's
// summary as a paragraph, each "Heading:" as a bold heading, indented
// lines verbatim, other lines as filled text. The trailing "Flags:" is
// left to flagsRoff.
func usageRoff(b *strings.Builder, usage string) {
	lines := strings.Split(strings.TrimRight(usage, "\n"), "\n")
	b.WriteString(".PP\n" + roffText(upperFirst(shortOf(lines[0]))) + ".\n")
	verbatim, para := false, true
	for _, line := range lines[1:] {
		indented := strings.HasPrefix(line, "  ")
		if verbatim && !indented {
			b.WriteString(".fi\n.RE\n")
			verbatim = false
		}
		switch {
		case line == "":
			para = true
		case line == "Flags:":
		case !indented && strings.HasSuffix(line, ":") && len(strings.Fields(line)) <= 2:
			// A heading: one or two words and a colon.
			b.WriteString(".PP\n.B " + roffText(strings.TrimSuffix(line, ":")) + "\n.br\n")
			para = false
		case indented:
			if !verbatim {
				b.WriteString(".RS\n.nf\n")
				verbatim = true
			}
			para = false
			b.WriteString(roffLine(strings.TrimPrefix(line, "  ")) + "\n")
		default:
			if para {
				b.WriteString(".PP\n")
				para = false
			}
			b.WriteString(roffLine(line) + "\n")
		}
	}
	if verbatim {
		b.WriteString(".fi\n.RE\n")
	}
}

// flagsRoff renders f's flags as a tagged list, the way --help lists them.
func flagsRoff(b *strings.Builder, f *pflag.FlagSet) {
	first := true
	f.VisitAll(func(fl *pflag.Flag) {
		if fl.Hidden || fl.Deprecated != "" {
			return
		}
		if first {
			b.WriteString(".PP\n.B Flags\n")
			first = false
		}
		name, usage := pflag.UnquoteUsage(fl)
		tag := `\fB\-\-` + roffText(fl.Name) + `\fR`
		if fl.Shorthand != "" {
			tag = `\fB\-` + roffText(fl.Shorthand) + `\fR, ` + tag
		}
		if name != "" && fl.NoOptDefVal == "" {
			tag += ` \fI` + roffText(name) + `\fR`
		}
		if def := fl.DefValue; def != "" && def != "false" && def != "[]" && def != "0" {
			usage += fmt.Sprintf(" (default %s)", def)
		}
		b.WriteString(".TP\n" + tag + "\n" + roffLine(usage) + "\n")
	})
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// roffText escapes s for use inside a roff line: backslashes and hyphens
// (so that flags stay ASCII hyphens, which man pages are searched for).
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffLine escapes s as a whole text line: it may not begin with a control
// character (a dot or an apostrophe).
func roffLine(s string) string {
	s = roffText(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffQuote makes s one macro argument.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `""`) + `"`
}
