package clientconfig

import "testing"

// TestEdgeCases wraps small files in forms the fixtures do not have, checks
// the exact output, that a second wrap changes nothing and that unwrap gives
// back the input byte for byte.
func TestEdgeCases(t *testing.T) {
	const R = `"/usr/local/bin/rootfs"`
	for _, tc := range []struct {
		name   string
		format Format
		in     string
		want   string
		back   string // what unwrap gives, when not in
	}{
		{"toml dotted keys", TOML,
			"mcp_servers.a.command = \"x\"\nmcp_servers.a.args = [\"y\"]\n",
			"mcp_servers.a.command = " + R + "\nmcp_servers.a.args = [\"run\", \"--\", \"x\", \"y\"]\n", ""},
		{"toml args before command", TOML,
			"[mcp_servers.a]\nargs = [\"y\"]\ncommand = \"x\"\n",
			"[mcp_servers.a]\nargs = [\"run\", \"--\", \"x\", \"y\"]\ncommand = " + R + "\n", ""},
		{"toml no args, comment after command", TOML,
			"[mcp_servers.a]\ncommand = \"x\"  # the server\nenabled = true\n",
			"[mcp_servers.a]\ncommand = " + R + "\nargs = [\"run\", \"--\",\n  \"x\",  # the server\n] # added by rootfs wrap\nenabled = true\n", ""},
		{"toml comments above and after command and args", TOML,
			"[mcp_servers.a]\n# from npm\ncommand = \"npx\" # c\n# the args\nargs = [\"-y\", \"p\"] # a\n",
			"[mcp_servers.a]\ncommand = " + R + "\n# the args\nargs = [\"run\", \"--\",\n  # from npm\n  \"npx\", # c\n  \"-y\", \"p\"] # a\n", ""},
		{"toml comments, CRLF", TOML,
			"[mcp_servers.a]\r\n# from npm\r\ncommand = \"npx\" # c\r\n",
			"[mcp_servers.a]\r\ncommand = " + R + "\r\nargs = [\"run\", \"--\",\r\n  # from npm\r\n  \"npx\", # c\r\n] # added by rootfs wrap\r\n", ""},
		{"toml comment on a dotted key's line", TOML,
			"mcp_servers.a.command = \"x\" # c\nmcp_servers.a.args = [\"y\"]\n",
			"mcp_servers.a.command = " + R + "\nmcp_servers.a.args = [\"run\", \"--\",\n  \"x\", # c\n  \"y\"]\n", ""},
		{"toml multi-line empty args", TOML,
			"[mcp_servers.a]\ncommand = \"x\" # c\nargs = [\n]\n",
			"[mcp_servers.a]\ncommand = " + R + "\nargs = [\n\"run\", \"--\",\n\"x\", # c\n]\n", ""},
		{"toml a # line inside a multi-line string is not a comment", TOML,
			"[mcp_servers.a]\ndescription = '''\n# not a comment'''\ncommand = \"x\"\n",
			"[mcp_servers.a]\ndescription = '''\n# not a comment'''\ncommand = " + R + "\nargs = [\"run\", \"--\", \"x\"] # added by rootfs wrap\n", ""},
		{"toml a comment less indented than the command stays", TOML,
			"[mcp_servers.a]\n# the server\n  # from npm\n  command = \"x\"\n",
			"[mcp_servers.a]\n# the server\n  command = " + R + "\nargs = [\"run\", \"--\",\n  # from npm\n  \"x\",\n] # added by rootfs wrap\n", ""},
		{"toml inline table: the line's comment stays", TOML,
			"[mcp_servers]\n# from npm\na = { command = \"x\" } # c\n",
			"[mcp_servers]\n# from npm\na = { command = " + R + ", args = [\"run\", \"--\", \"x\"] } # c\n", ""},
		{"toml explicit empty args", TOML,
			"[mcp_servers.a]\ncommand = \"x\"\nargs = []\n",
			"[mcp_servers.a]\ncommand = " + R + "\nargs = [\"run\", \"--\", \"x\"]\n", ""},
		{"toml CRLF", TOML,
			"[mcp_servers.a]\r\ncommand = \"x\"\r\nargs = [\r\n  \"y\",\r\n]\r\n",
			"[mcp_servers.a]\r\ncommand = " + R + "\r\nargs = [\r\n  \"run\", \"--\", \"x\", \"y\",\r\n]\r\n", ""},
		{"toml multi-line string arg and escapes", TOML,
			"[mcp_servers.a]\ncommand = \"x\\u0079\"\nargs = ['''a\nb''']\n",
			"[mcp_servers.a]\ncommand = " + R + "\nargs = [\"run\", \"--\", \"x\\u0079\", '''a\nb''']\n", ""},
		{"toml wrapped by hand with a trailing comma", TOML,
			"[mcp_servers.a]\ncommand = \"x\"\nargs = [\"y\",]\n",
			"[mcp_servers.a]\ncommand = " + R + "\nargs = [\"run\", \"--\", \"x\", \"y\",]\n", ""},
		{"json one line, no args", JSONC,
			`{"mcpServers": {"a": {"command": "x"}}}`,
			`{"mcpServers": {"a": {"command": ` + R + `, "args": ["run", "--", "x"]}}}`, ""},
		{"json no args, trailing comma", JSONC,
			"{\"mcpServers\": {\"a\": {\n  \"command\": \"x\",\n}}}",
			"{\"mcpServers\": {\"a\": {\n  \"command\": " + R + ", \"args\": [\"run\", \"--\", \"x\"],\n}}}", ""},
		{"json explicit empty args on one line", JSONC,
			`{"mcpServers": {"a": {"command": "x", "args": []}}}`,
			`{"mcpServers": {"a": {"command": ` + R + `, "args": ["run", "--", "x"]}}}`,
			// The one ambiguous form (see the package doc): the same meaning.
			`{"mcpServers": {"a": {"command": "x"}}}`},
		{"json escaped command moved as written", JSONC,
			`{"mcpServers": {"a": {"command": "n\u0070x", "args": ["-y"]}}}`,
			`{"mcpServers": {"a": {"command": ` + R + `, "args": ["run", "--", "n\u0070x", "-y"]}}}`, ""},
		{"json env names with odd characters", JSONC,
			`{"mcpServers": {"a": {"command": "x", "env": {"B": "", "A-1": "v", "B": "dup"}}}}`,
			`{"mcpServers": {"a": {"command": ` + R + `, "args": ["run", "--setenv", "A-1", "--setenv", "B", "--", "x"], "env": {"B": "", "A-1": "v", "B": "dup"}}}}`, ""},
		{"json args not an array", JSONC,
			`{"mcpServers": {"a": {"command": "x", "args": "y"}}}`,
			`{"mcpServers": {"a": {"command": "x", "args": "y"}}}`, ""},
		{"json env name with =", JSONC,
			`{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}`,
			`{"mcpServers": {"a": {"command": "x", "env": {"A=B": "1"}}}}`, ""},
		{"json no servers", JSONC, `{"theme": "dark"}`, `{"theme": "dark"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ptr := []string{"/mcpServers"}
			out, _, err := Rewrite([]byte(tc.in), tc.format, ptr, Wrap, Options{Rootfs: testRootfs})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("wrap:\n%s\nwant\n%s", out, tc.want)
			}
			again, _, _ := Rewrite(out, tc.format, ptr, Wrap, Options{Rootfs: testRootfs})
			if string(again) != string(out) {
				t.Errorf("second wrap:\n%s", again)
			}
			back, _, err := Rewrite(out, tc.format, ptr, Unwrap, Options{Rootfs: testRootfs})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.in
			if tc.back != "" {
				want = tc.back
			}
			if string(back) != want {
				t.Errorf("unwrap:\n%q\nwant\n%q", back, want)
			}
		})
	}
}

// TestUnwrapByHand unwraps entries a person wrote in the wrapped shape,
// laid out as wrap never does: the result is valid and means the original
// command line.
func TestUnwrapByHand(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"trailing comma after the command",
			"[mcp_servers.a]\ncommand = \"rootfs\"\nargs = [\"run\", \"--\", \"npx\",]\n",
			"[mcp_servers.a]\ncommand = \"npx\"\nargs = []\n"},
		{"one element a line, trailing comma",
			"[mcp_servers.a]\ncommand = \"rootfs\"\nargs = [\n  \"run\", \"--\",\n  \"npx\",\n]\n",
			"[mcp_servers.a]\ncommand = \"npx\"\nargs = [\n  ]\n"},
		{"one element a line, more args",
			"[mcp_servers.a]\ncommand = \"rootfs\"\nargs = [\n  \"run\", \"--\",\n  \"npx\",\n  \"-y\",\n]\n",
			"[mcp_servers.a]\ncommand = \"npx\"\nargs = [\n  \"-y\",\n]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Rewrite([]byte(tc.in), TOML, nil, Unwrap, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("unwrap:\n%q\nwant\n%q", out, tc.want)
			}
			if _, _, err := Rewrite(out, TOML, nil, Unwrap, Options{}); err != nil {
				t.Errorf("the result does not parse: %v", err)
			}
		})
	}
}
