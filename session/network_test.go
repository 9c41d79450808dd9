package session

import (
	"errors"
	"strings"
	"testing"
)

// TestNetPolicyRefusals: flags that cannot work together, or a bad
// pattern or resolver, are refused before anything starts, in one line
// naming the flag.
func TestNetPolicyRefusals(t *testing.T) {
	for _, tt := range []struct {
		name      string
		noNetwork bool
		o         NetOptions
		want      string // "" accepted
		filtered  bool
	}{
		{name: "default", filtered: true},
		{name: "host", o: NetOptions{Host: true}},
		{name: "none", noNetwork: true},
		{name: "host and none", noNetwork: true, o: NetOptions{Host: true}, want: "exclude each other"},
		{name: "rules with host", o: NetOptions{Host: true, Allow: []string{"example.com"}}, want: "--host-network leaves nothing"},
		{name: "rules with none", noNetwork: true, o: NetOptions{Only: []string{"example.com"}}, want: "--no-network leaves nothing"},
		{name: "dns with host", o: NetOptions{Host: true, DNS: "10.0.0.53:53"}, want: "--net-dns"},
		{name: "bad dns", o: NetOptions{DNS: "resolver"}, want: "--net-dns \"resolver\""},
		{name: "dns", o: NetOptions{DNS: "10.0.0.53:53"}, filtered: true},
		{name: "bad pattern", o: NetOptions{Allow: []string{"example.com:99999"}}, want: "99999"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NetPolicy(tt.noNetwork, tt.o, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("err %v, want one usage line with %q", err, tt.want)
			case tt.want == "" && (p != nil) != tt.filtered:
				t.Fatalf("policy %v, want filtered %v", p, tt.filtered)
			}
		})
	}
}
