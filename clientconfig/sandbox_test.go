package clientconfig

import (
	"strings"
	"testing"
)

// TestVSCodeSandboxCarried: a VS Code server with its own sandbox is
// wrapped with the sandbox's network rules as rootfs flags, the sandbox
// turned off with a comment saying why, and unwrap gives back the file
// byte for byte; wrapping again changes nothing.
func TestVSCodeSandboxCarried(t *testing.T) {
	const in = `{
  // my servers
  "servers": {
    "fetch": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-fetch"],
      "sandboxEnabled": true, // VS Code's sandbox
      "sandbox": {
        "network": {"allowedDomains": ["api.github.com", "*.githubusercontent.com"], "deniedDomains": ["evil.example.com"]}
      }
    },
    "offline": {"command": "node", "args": ["s.js"], "sandboxEnabled": true},
    "plain": {"command": "node", "args": ["p.js"]},
    "bad": {"command": "node", "sandboxEnabled": true, "sandbox": {"network": {"allowedDomains": ["a b"]}}}
  }
}
`
	opt := Options{Rootfs: "rootfs"}
	out, changes, err := Rewrite([]byte(in), JSONC, []string{"/servers"}, Wrap, opt)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, want := range []string{
		`"command": "rootfs"`,
		`"args": ["run", "--net-only", "api.github.com,*.githubusercontent.com", "--deny-net", "evil.example.com", "--", "npx", "-y", "@modelcontextprotocol/server-fetch"]`,
		`"sandboxEnabled": false` + sandboxMark + `, // VS Code's sandbox`,
		`"args": ["run", "--no-network", "--", "node", "s.js"]`,
		`"args": ["run", "--", "node", "p.js"]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("wrapped file lacks %s:\n%s", want, got)
		}
	}
	byName := map[string]Change{}
	for _, c := range changes {
		byName[c.Server] = c
	}
	if c := byName["fetch"]; c.Action != Wrapped || !strings.Contains(c.Detail, "VS Code's own sandbox is off") {
		t.Errorf("fetch: %+v", c)
	}
	if c := byName["bad"]; c.Action != Skipped || !strings.Contains(c.Detail, "sandbox.network") {
		t.Errorf("a domain rootfs cannot take: %+v, want skipped with the reason", c)
	}
	again, changes2, err := Rewrite(out, JSONC, []string{"/servers"}, Wrap, opt)
	if err != nil || string(again) != got {
		t.Errorf("wrapping twice changed the file (%v):\n%s", err, again)
	}
	for _, c := range changes2 {
		if c.Server != "bad" && c.Action != AlreadyWrapped {
			t.Errorf("second wrap: %+v", c)
		}
	}
	back, _, err := Rewrite(out, JSONC, []string{"/servers"}, Unwrap, opt)
	if err != nil || string(back) != in {
		t.Errorf("unwrap is not the original (%v):\n%s", err, back)
	}
}
