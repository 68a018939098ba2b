// Package cli implements the runtimetruth command tree. Run returns the
// process exit code: 0 pass, 2 drift, 1 error (usage errors included, never
// 2); errors go to stderr as "runtimetruth: error: ...".
package cli
