package node

import (
	"context"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// cacheScope is the stat-cache scope of the checks of the project at
// abs.
func cacheScope(abs string) string { return "node, beneath package folders: " + abs }

// check hashes every target's files in place, each beneath its own package
// folder (integrity.CheckOptions.BeneathDir: a file's Dir is its package
// folder), with store's stat cache for scope. A file whose path leads out
// of its package folder through a symbolic link on the way (lib -> /etc
// with lib/shadow listed) is then FileError with integrity.ErrOutsideRoot
// and is never opened; a link from one package into another is such an
// escape too.
func check(ctx context.Context, store *integrity.Store, scope string, files []integrity.File, opts Options) (integrity.CheckStats, error) {
	return integrity.Check(ctx, store, scope, files, integrity.CheckOptions{Workers: opts.Workers, NoCache: opts.NoCache, BeneathDir: true})
}
