//go:build !linux || !(amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package codex

import (
	"errors"
	"os"
)

// openRegularAs is openRegular with the file-system permissions of a (nil:
// this process's). Only Linux can take another account's permissions for
// one thread; elsewhere an instruction source of another account's probe
// is not fingerprinted ("unavailable") rather than read with this
// process's permissions.
func openRegularAs(path string, a *Account) (*os.File, error) {
	if a == nil {
		return openRegular(path)
	}
	return nil, errors.New("reading as another account needs Linux")
}
