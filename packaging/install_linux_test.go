//go:build linux

package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rootfs-dev/rootfs/internal/testutil"
)

// debianSuite is the release the fresh root file system is made of.
const debianSuite = "bookworm"

func TestMain(m *testing.M) {
	code := m.Run()
	if debDir != "" {
		os.RemoveAll(debDir)
	}
	os.Exit(code)
}

// skipOrFail skips with reason, or fails under ROOTFS_REQUIRE_FUSE=1: CI
// installs mmdebstrap and can reach Debian's mirror.
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if testutil.Strict() {
		t.Fatal(reason + " (ROOTFS_REQUIRE_FUSE=1: CI must provide it)")
	}
	t.Skip(reason)
}

var (
	debOnce sync.Once
	debDir  string
	debPath string
	debErr  error
)

// buildDeb runs scripts/package once per test binary and returns the .deb.
func buildDeb(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		skipOrFail(t, "no go toolchain to build the package")
	}
	debOnce.Do(func() {
		debDir, debErr = os.MkdirTemp("", "rootfs-deb-")
		if debErr != nil {
			return
		}
		cmd := exec.Command(filepath.Join(top, "scripts", "package"), "--out", debDir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			debErr = fmt.Errorf("scripts/package: %v\n%s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		debPath = lines[len(lines)-1]
	})
	if debErr != nil {
		t.Fatal(debErr)
	}
	return debPath
}

var tarballMu sync.Mutex

// debianTarball returns a minbase Debian root file system as a tarball,
// made by mmdebstrap and kept for a day in the temporary directory.
func debianTarball(t *testing.T) string {
	t.Helper()
	testutil.RequireRoot(t)
	tarballMu.Lock() // the tests run in parallel; one makes it
	defer tarballMu.Unlock()
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		skipOrFail(t, "mmdebstrap is not installed (apt-get install mmdebstrap)")
	}
	dir := filepath.Join(os.TempDir(), "rootfs-packaging-test")
	tarball := filepath.Join(dir, debianSuite+"-minbase.tar")
	if st, err := os.Stat(tarball); err == nil && time.Since(st.ModTime()) < 24*time.Hour {
		return tarball
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := tarball + ".tmp"
	start := time.Now()
	out, err := exec.Command(mm, "--quiet", "--variant=minbase", "--format=tar",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/locale/*",
		debianSuite, tmp, "http://deb.debian.org/debian").CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		skipOrFail(t, fmt.Sprintf("mmdebstrap could not make a Debian root (no mirror?): %v\n%s", err, out))
	}
	if err := os.Rename(tmp, tarball); err != nil {
		t.Fatal(err)
	}
	t.Logf("made %s in %v", tarball, time.Since(start).Round(time.Second))
	return tarball
}

// debianLower returns the Debian root unpacked from debianTarball, kept
// beside it and never written to: each test mounts an overlay over it.
func debianLower(t *testing.T) string {
	t.Helper()
	tarball := debianTarball(t)
	tarballMu.Lock()
	defer tarballMu.Unlock()
	lower := strings.TrimSuffix(tarball, ".tar") + ".d"
	tst, err := os.Stat(tarball)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(lower); err == nil && !st.ModTime().Before(tst.ModTime()) {
		return lower
	}
	os.RemoveAll(lower)
	tmp := lower + ".tmp"
	os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := exec.Command("tar", "-xf", tarball, "-C", tmp).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	// tar gave the top directory the tarball's time; it must be newer.
	now := time.Now()
	if err := os.Chtimes(tmp, now, now); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, lower); err != nil {
		t.Fatal(err)
	}
	t.Logf("unpacked the Debian root in %v", time.Since(start).Round(time.Second))
	return lower
}

// A debianRoot is a fresh Debian root file system: an overlay whose lower
// layer is the shared unpacked root and whose upper layer is the test's.
// Files put under Upper appear in the root.
type debianRoot struct {
	Lower, Upper, work, mnt string
}

func freshRoot(t *testing.T) *debianRoot {
	t.Helper()
	dir := t.TempDir()
	r := &debianRoot{Lower: debianLower(t), Upper: filepath.Join(dir, "upper"), work: filepath.Join(dir, "work"), mnt: filepath.Join(dir, "root")}
	for _, d := range []string{r.Upper, r.work, r.mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// run runs script with /bin/sh in the root, as root, in private mount and
// pid namespaces: the overlay is mounted there, /dev is the host's, /proc
// and /sys are fresh. The namespaces take every mount with them when the
// script ends.
func (r *debianRoot) run(t *testing.T, script string) (string, error) {
	t.Helper()
	const setup = `set -e
R=$1
mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4" "$R"
mount --rbind /dev "$R/dev"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
cp /etc/resolv.conf "$R/etc/resolv.conf"
exec chroot "$R" /bin/sh -c "$5"`
	cmd := exec.Command("unshare", "--mount", "--pid", "--fork", "--propagation", "private", "/bin/sh", "-c", setup, "sh", r.mnt, r.Lower, r.Upper, r.work, script)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "DEBIAN_FRONTEND=noninteractive"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// installed checks, inside root, what the package must have put there, and
// that "rootfs doctor" finds everything "rootfs run" needs.
const installed = `set -e
rootfs --version
command -v fusermount3
test -f /usr/share/man/man1/rootfs.1.gz
test -f /usr/share/zsh/vendor-completions/_rootfs
test -f /usr/share/fish/vendor_completions.d/rootfs.fish
bash -c 'source /usr/share/bash-completion/completions/rootfs && complete -p rootfs'
rootfs doctor
set +e
rootfs run -- /bin/sh -c 'exit 7' </dev/null
echo "run exit $?"
`

// TestPackageVersionAgrees builds the .deb with scripts/package and
// expects the version it carries to be the one its binary's --version and
// its man page name. Building fetches nfpm through the Go module proxy, so
// -short skips it.
func TestPackageVersionAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the package")
	}
	dpkgDeb, err := exec.LookPath("dpkg-deb")
	if err != nil {
		skipOrFail(t, "dpkg-deb is not installed")
	}
	deb := buildDeb(t)
	out, err := exec.Command(dpkgDeb, "-f", deb, "Version").Output()
	if err != nil {
		t.Fatalf("dpkg-deb -f %s Version: %v", deb, err)
	}
	want := strings.TrimSpace(string(out))
	dir := t.TempDir()
	if out, err := exec.Command(dpkgDeb, "-x", deb, dir).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	out, err = exec.Command(filepath.Join(dir, "usr", "bin", "rootfs"), "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "rootfs "+want+" (") {
		t.Errorf("the package is %s; its rootfs --version says %q (%v)", want, out, err)
	}
	out, err = exec.Command("sh", "-c", "gzip -dc "+filepath.Join(dir, "usr", "share", "man", "man1", "rootfs.1.gz")+" | head -1").Output()
	th := `.TH ROOTFS 1 "" "rootfs ` + strings.ReplaceAll(want, "-", `\-`) + `"`
	if err != nil || !strings.HasPrefix(string(out), th) {
		t.Errorf("the package is %s; its man page begins %q (%v), want %q", want, out, err, th)
	}
}

// TestDebInFreshDebian installs the .deb that scripts/package builds into a
// fresh Debian root with apt, which must pull in fuse3 from its dependency,
// and runs "rootfs doctor" there. The control shows the fresh root has
// neither rootfs nor fusermount3 before.
func TestDebInFreshDebian(t *testing.T) {
	t.Parallel()
	root := freshRoot(t)
	deb := buildDeb(t)
	copyFile(t, deb, filepath.Join(root.Upper, "opt", "test", "rootfs.deb"), 0o644)

	if out, err := root.run(t, "command -v rootfs || command -v fusermount3"); err == nil {
		t.Fatalf("control: the fresh root already has rootfs or fusermount3:\n%s", out)
	}
	start := time.Now()
	out, err := root.run(t, "apt-get update -qq && apt-get install -y -qq /opt/test/rootfs.deb >/dev/null 2>&1\n"+installed)
	t.Logf("install and checks took %v", time.Since(start).Round(time.Second))
	checkInstalled(t, out, err)
}

// TestFeatureInstallInFreshDebian runs the Dev Container Feature's
// install.sh the way a dev container tool does (as root, options as
// environment variables) with debPath pointing at the local .deb, so it
// fetches nothing from GitHub; then the same checks as the .deb's.
func TestFeatureInstallInFreshDebian(t *testing.T) {
	t.Parallel()
	root := freshRoot(t)
	deb := buildDeb(t)
	copyFile(t, deb, filepath.Join(root.Upper, "opt", "test", "rootfs.deb"), 0o644)
	for _, f := range []string{"install.sh", "devcontainer-feature.json"} {
		copyFile(t, filepath.Join(top, "features", "src", "rootfs", f), filepath.Join(root.Upper, "opt", "test", "feature", f), 0o755)
	}
	// A debPath that does not exist is refused in one line, before apt runs.
	out, err := root.run(t, "cd /opt/test/feature && VERSION=latest DEBPATH=/opt/test/nope.deb ./install.sh")
	if err == nil || !strings.Contains(out, "no such .deb: /opt/test/nope.deb") {
		t.Fatalf("missing debPath: %v\n%s", err, out)
	}
	start := time.Now()
	out, err = root.run(t, "cd /opt/test/feature && VERSION=latest DEBPATH=/opt/test/rootfs.deb ./install.sh\n"+installed)
	t.Logf("install and checks took %v", time.Since(start).Round(time.Second))
	checkInstalled(t, out, err)
	if !strings.Contains(out, "--device=/dev/fuse") {
		t.Errorf("install.sh does not tell what the container still needs:\n%s", out)
	}
	if st, err := os.Stat(filepath.Join(root.Upper, "var", "lib", "apt", "lists", "deb.debian.org_debian_dists_"+debianSuite+"_InRelease")); err == nil && st.Mode().IsRegular() {
		t.Errorf("install.sh left apt's lists in the image")
	}
}

func checkInstalled(t *testing.T, out string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"rootfs ", "/usr/bin/fusermount3", "complete -o default -F __start_rootfs rootfs", "rootfs run can work here.", "run exit 7"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestFeatureMetadata: the Feature's id names its folder, and each option
// is read by install.sh under the name the spec gives it (upper case).
func TestFeatureMetadata(t *testing.T) {
	dir := filepath.Join(top, "features", "src", "rootfs")
	b, err := os.ReadFile(filepath.Join(dir, "devcontainer-feature.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		ID      string `json:"id"`
		Version string `json:"version"`
		Options map[string]struct {
			Type    string `json:"type"`
			Default any    `json:"default"`
		} `json:"options"`
		CapAdd []string `json:"capAdd"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.ID != filepath.Base(dir) || meta.Version == "" {
		t.Errorf("id %q version %q: the id must be the folder's name and a version is required", meta.ID, meta.Version)
	}
	script, err := os.ReadFile(filepath.Join(dir, "install.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for name := range meta.Options {
		if env := strings.ToUpper(name); !strings.Contains(string(script), "${"+env) {
			t.Errorf("option %s: install.sh never reads $%s", name, env)
		}
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/dev/fuse", "CAP_SYS_ADMIN", "devcontainers/spec#153", "apparmor=unconfined", "systempaths=unconfined"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
}
