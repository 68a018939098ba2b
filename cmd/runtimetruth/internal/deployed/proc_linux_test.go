package deployed_test

import "syscall"

// procAttr makes a process the test starts die with the test (SIGKILL
// when the test binary ends without its cleanups: a timeout's panic, a
// kill), so that no nats-server or service outlives it.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
