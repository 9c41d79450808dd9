package cli

import (
	"context"
	"io"
)

func doctorCommand(ctx context.Context, args []string, stderr io.Writer) error { return nil }
