package linux

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// kernelFS lists the kernel file systems (proc, sys, cgroup, ...) whose
// files are interfaces, not data: their magic links and control files lead
// to whatever the process holds.
var kernelFS = map[int64]bool{
	unix.PROC_SUPER_MAGIC:    true,
	unix.SYSFS_MAGIC:         true,
	unix.SECURITYFS_MAGIC:    true,
	unix.DEBUGFS_MAGIC:       true,
	unix.TRACEFS_MAGIC:       true,
	unix.BPF_FS_MAGIC:        true,
	unix.CGROUP_SUPER_MAGIC:  true,
	unix.CGROUP2_SUPER_MAGIC: true,
	unix.EFIVARFS_MAGIC:      true,
	unix.PSTOREFS_MAGIC:      true,
	unix.SELINUX_MAGIC:       true,
	unix.SMACK_MAGIC:         true,
	unix.NSFS_MAGIC:          true,
	unix.DEVPTS_SUPER_MAGIC:  true,
	unix.BINFMTFS_MAGIC:      true,
	unix.HUGETLBFS_MAGIC:     true,
	unix.ANON_INODE_FS_MAGIC: true,
	unix.SOCKFS_MAGIC:        true,
	unix.PIPEFS_MAGIC:        true,
	unix.BDEVFS_MAGIC:        true,
	unix.DAXFS_MAGIC:         true,
	unix.AAFS_MAGIC:          true,
}

// OnKernelFS reports whether fd lies on a kernel file system (proc, sys,
// cgroup, ...), or cannot be told: a caller that refuses what is on one
// refuses what fstatfs(2) fails on too. The table refuses such a root and
// the view refuses to cross into one below a root.
func OnKernelFS(fd int) bool {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return true
	}
	return kernelFS[int64(sfs.Type)]
}

// WalkUp is the one walk by inode up a directory tree: it calls visit with
// the device and inode numbers of the directory dir, then of each directory
// above it up to "/", until visit returns true, and reports whether it did.
// It walks ".." through descriptors, so no path string decides and a
// symlink or rename cannot fool it.
func WalkUp(dir int, visit func(dev, ino uint64) bool) (bool, error) {
	cur, err := unix.Dup(dir)
	if err != nil {
		return false, err
	}
	defer func() { unix.Close(cur) }()
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil {
		return false, err
	}
	for depth := 0; depth < 4096; depth++ {
		if visit(st.Dev, st.Ino) {
			return true, nil
		}
		parent, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil {
			unix.Close(parent)
			return false, err
		}
		if pst.Dev == st.Dev && pst.Ino == st.Ino { // reached "/"
			unix.Close(parent)
			return false, nil
		}
		unix.Close(cur)
		cur, st = parent, pst
	}
	return false, fmt.Errorf("directory tree deeper than 4096 levels")
}
