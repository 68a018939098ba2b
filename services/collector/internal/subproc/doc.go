// Package subproc runs the external programs the evidence sources depend on
// (git, systemctl) the one way the collector allows: directly with an argv,
// never through a shell, under a timeout, with stdout captured up to a bound
// and only the tail of stderr kept for the error message.
//
// A program that exits non-zero yields an *ExitError carrying the exit status
// and the last non-empty stderr line, so callers can classify failures
// ("exit status 1" from git symbolic-ref means a detached HEAD) and users see
// why the program failed ("systemctl show: exit status 4: Unit
// agent.service not loaded.").
package subproc
