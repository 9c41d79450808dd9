package resolve

// Launchers' caches (see autobind.go's section comment).

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/rootfs-dev/rootfs/mountmgr/internal/spec"
)

// launcherCaches adds the cache of a launcher that fetches packages
// (npx/npm exec, uvx/uv, pipx), so that it starts from the user's cache.
//
// A cache is never shared read-write: npx installs into <cache>/_npx as
// plain files that the user later runs outside any sandbox, so a server
// that could write there could plant code in every other npx package.
// Launchers must write, though (npx takes a lock file and records what it
// installed), and so do servers that keep their data beside their code
// (server-memory), so the cache is the read-only lower layer of an
// overlay whose writable layer is kept per server below opts.Layers (see
// internal/spec/layer.go), or, with no Layers, lives in the sandbox's /tmp and vanishes
// with it. A warm cache starts without a download; a cold one downloads
// into the server's layer (or into memory, each time).
func (r *resolver) launcherCaches(exe string) {
	names := map[string]bool{filepath.Base(r.opts.Name): true, filepath.Base(exe): true}
	for v := range r.visited {
		names[filepath.Base(v)] = true
	}
	get := func(k string) string {
		v, _ := r.opts.Lookup(k)
		return v
	}
	dataHome := get("XDG_DATA_HOME")
	if dataHome == "" && r.home != "" {
		dataHome = filepath.Join(r.home, ".local", "share")
	}
	cacheHome := get("XDG_CACHE_HOME")
	if cacheHome == "" && r.home != "" {
		cacheHome = filepath.Join(r.home, ".cache")
	}
	first := func(vals ...string) string {
		for _, v := range vals {
			if v != "" {
				return v
			}
		}
		return ""
	}
	cache := func(dir, reason, envName string, overlay bool, extraEnv ...string) {
		if dir == "" || !filepath.IsAbs(dir) {
			return
		}
		r.out.Env = append(r.out.Env, extraEnv...)
		missing := false
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		} else if real, ok := realMissing(dir); ok && overlay && r.opts.Layers != "" {
			// No cache yet, and the server's writes are kept: the cache
			// is made empty at start (PrepareLayers, owned as the
			// directory it is made in), so that what the launcher
			// downloads, and what the server writes beside it, is in the
			// server's layer at its next start instead of lost with /tmp.
			dir, missing = real, true
		} else {
			return // no cache yet: the launcher downloads into the sandbox's /tmp
		}
		if fi, err := os.Stat(dir); !missing && (err != nil || !fi.IsDir()) {
			return
		}
		if r.home != "" && (dir == r.home || strings.HasPrefix(r.home, dir+"/")) || hasCredentialElem(dir) || strings.Count(dir, "/") < 2 {
			r.out.Refused = append(r.out.Refused, dir+" (cache in an unsafe place)")
			return
		}
		if !r.underRuntime(dir) {
			b := spec.Bind{Source: dir, Dest: dir, ReadOnly: true, Overlay: overlay, Reason: reason}
			if overlay && r.opts.Layers != "" {
				b.Layer = spec.LayerDir(r.opts.Layers, spec.HostUID(), append([]string{r.opts.Name}, r.opts.Args...), reason, dir)
			}
			r.out.Binds = append(r.out.Binds, b)
		}
		if envName != "" {
			r.out.Env = append(r.out.Env, envName+"="+dir)
		}
	}
	switch {
	case names["npx"] || names["npm"] || names["npx-cli.js"] || names["npm-cli.js"]:
		npmCache := first(get("npm_config_cache"), get("NPM_CONFIG_CACHE"))
		if npmCache == "" && r.home != "" {
			npmCache = filepath.Join(r.home, ".npm")
		}
		// prefer-offline: take what the cache has without asking the
		// registry first (npx revalidates every start otherwise, which
		// is seconds online and a hang with --no-network).
		cache(npmCache, "npm cache", "npm_config_cache", true, "npm_config_prefer_offline=true", "npm_config_update_notifier=false")
	case names["uvx"] || names["uv"]:
		cache(first(get("UV_CACHE_DIR"), filepath.Join(cacheHome, "uv")), "uv cache", "UV_CACHE_DIR", true)
		// uv takes locks in its Python and tool directories too.
		cache(first(get("UV_PYTHON_INSTALL_DIR"), filepath.Join(dataHome, "uv", "python")), "uv python", "UV_PYTHON_INSTALL_DIR", true)
		cache(first(get("UV_TOOL_DIR"), filepath.Join(dataHome, "uv", "tools")), "uv tools", "UV_TOOL_DIR", true)
	case names["pipx"]:
		cache(first(get("PIPX_HOME"), filepath.Join(dataHome, "pipx")), "pipx home", "PIPX_HOME", true)
	}
}

// realMissing gives the real path of dir, which does not exist, when its
// parent does (only the last element is missing, as for ~/.npm on a
// machine where npm never ran).
func realMissing(dir string) (string, bool) {
	parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
	if err != nil {
		return "", false
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", false // a dangling symlink: leave it alone
	}
	return filepath.Join(parent, filepath.Base(dir)), true
}
