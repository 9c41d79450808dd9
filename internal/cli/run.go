package cli

import (
	"context"
	"errors"
	"io"
)

// runCommand is "rootfs run". It is wired once the sandbox lands.
func runCommand(ctx context.Context, args []string, stderr io.Writer) error {
	return &ExitError{Code: 125, Err: errors.New("run is not available in this build yet")}
}
