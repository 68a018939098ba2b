// Package gittest builds real git repositories for tests. Every command runs
// the installed git with system and global configuration disabled and a
// fixed identity, so tests do not depend on the machine's git setup.
package gittest
