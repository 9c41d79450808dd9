//go:build !unix

package clientconfig

import (
	"io/fs"
	"os"
)

func keepOwner(*os.File, fs.FileInfo) error { return nil }

func checkLinkOwners(string, fs.FileInfo) error { return nil }
