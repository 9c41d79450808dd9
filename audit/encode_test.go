package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// encodingJSON is what the writer wrote before appendJSON: the reference.
func encodingJSON(t testing.TB, r Record) []byte {
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestAppendJSONMatchesEncodingJSON: every field, set and unset, and
// strings that need escaping, come out byte for byte as encoding/json
// writes them.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	now := time.Date(2026, 12, 5, 5, 50, 1, 123456789, time.UTC)
	odd := []string{"", "plain/path.txt", `quote" and \ back`, "<html>&amp;", "tab\there\nnewline\r\x01\x1f", "ünïcode ✓",
		"bad utf8 \xff\xfe", "line sep \u2028 \u2029", "\x7f del"}
	recs := []Record{
		{},
		{Time: now, Op: OpRead, Result: ResultOK},
		{Time: now.In(time.FixedZone("x", 3600)), Instance: "i1", Op: OpRename, Path: "/p/a", Host: "/h/a", Dest: "/p/b", Syscall: "mount", Result: ResultOK,
			PID: 42, Comm: "sh", Count: 7, Allow: "--root /x", Reason: "why", Old: []string{"/a", "/b"}, New: []string{}, Source: "client"},
		{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Op: OpRoots, Result: ResultRefused, PID: -3, Count: -1, New: []string{"/c"}},
		{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Op: OpRead},
		// Folded seccomp refusals: the count after the command.
		{Time: now, Instance: "5ecc0b1d", Op: OpSeccomp, Syscall: "unshare", Result: ResultRefused, PID: 2, Comm: "node", Count: 23255, Reason: ReasonSeccomp},
	}
	for _, s := range odd {
		recs = append(recs, Record{Time: now, Instance: s, Op: s, Path: s, Host: s, Dest: s, Syscall: s, Result: s, Comm: s, Allow: s, Reason: s,
			Old: []string{s, s}, New: []string{s}, Source: s})
	}
	for i, r := range recs {
		if r.Time.Year() > 9999 {
			// encoding/json refuses it; appendJSON writes a valid line.
			if got := r.appendJSON(nil); !json.Valid(got) {
				t.Errorf("record %d: not JSON: %s", i, got)
			}
			continue
		}
		want := encodingJSON(t, r)
		if got := r.appendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("record %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// FuzzAppendJSON: any strings, the same bytes as encoding/json.
func FuzzAppendJSON(f *testing.F) {
	f.Add("/p/a.txt", "/h/a.txt", "sh", int64(3))
	f.Add("<\xff>", "\u2028", "\x00", int64(-1))
	f.Fuzz(func(t *testing.T, path, host, comm string, n int64) {
		r := Record{Time: time.Unix(0, n).UTC(), Op: OpRead, Path: path, Host: host, Comm: comm, Count: n, Result: ResultOK, Old: []string{path}}
		if r.Time.Year() < 0 || r.Time.Year() > 9999 {
			return
		}
		if got, want := r.appendJSON(nil), encodingJSON(t, r); !bytes.Equal(got, want) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	})
}

// TestAppendJSONEveryField: a record with every exported field set, by
// reflection, so that a field added to Record and not to appendJSON
// fails here.
func TestAppendJSONEveryField(t *testing.T) {
	var r Record
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Slice:
			f.Set(reflect.ValueOf([]string{v.Type().Field(i).Name}))
		case reflect.Struct: // the time
			f.Set(reflect.ValueOf(time.Date(2026, 12, 5, 6, 0, 0, 1, time.UTC)))
		default:
			t.Fatalf("field %s of kind %s: teach this test and appendJSON", v.Type().Field(i).Name, f.Kind())
		}
	}
	if got, want := r.appendJSON(nil), encodingJSON(t, r); !bytes.Equal(got, want) {
		t.Errorf("got %s\nwant %s", got, want)
	}
}
