package link

import "hash/fnv"

// Partition is the partition, in [0, n), that owns chain when the auditor
// is split n ways: FNV-1a (32-bit) of the chain name, modulo n. Every
// chain hashes the same way, "BASELINES" and "DLQ" included, so a chain
// has one writer whatever stream it is in. n below 2 is one partition, 0.
func Partition(chain string, n int) int {
	if n < 2 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(chain))
	return int(h.Sum32() % uint32(n))
}
