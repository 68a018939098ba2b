package integrity

import (
	"crypto/sha256"
	"crypto/sha3"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/blake2s"
)

// Algorithm is a hash algorithm a known-good hash may use.
type Algorithm uint8

// The supported algorithms: the strong members of Python's
// hashlib.algorithms_guaranteed with a fixed digest size (shake_128 and
// shake_256 need a length RECORD cannot carry, so they are unsupported).
// The SHA-3 names follow crypto.SHA3_256.
const (
	AlgoNone Algorithm = iota
	SHA256
	SHA224
	SHA384
	SHA512
	SHA3_224 //nolint:revive // named as crypto.SHA3_224
	SHA3_256 //nolint:revive // named as crypto.SHA3_256
	SHA3_384 //nolint:revive // named as crypto.SHA3_384
	SHA3_512 //nolint:revive // named as crypto.SHA3_512
	BLAKE2b
	BLAKE2s
	numAlgorithms
)

// algorithms holds each algorithm's hashlib name, digest size in bytes
// and constructor, indexed by Algorithm.
var algorithms = [numAlgorithms]struct {
	name    string
	size    int
	newHash func() hash.Hash
}{
	AlgoNone: {},
	SHA256:   {"sha256", 32, sha256.New},
	SHA224:   {"sha224", 28, sha256.New224},
	SHA384:   {"sha384", 48, sha512.New384},
	SHA512:   {"sha512", 64, sha512.New},
	SHA3_224: {"sha3_224", 28, func() hash.Hash { return sha3.New224() }},
	SHA3_256: {"sha3_256", 32, func() hash.Hash { return sha3.New256() }},
	SHA3_384: {"sha3_384", 48, func() hash.Hash { return sha3.New384() }},
	SHA3_512: {"sha3_512", 64, func() hash.Hash { return sha3.New512() }},
	BLAKE2b:  {"blake2b", 64, func() hash.Hash { h, _ := blake2b.New512(nil); return h }},
	BLAKE2s:  {"blake2s", 32, func() hash.Hash { h, _ := blake2s.New256(nil); return h }},
}

// String returns the algorithm's hashlib name.
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algorithms[a].name
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// Size returns the digest size in bytes.
func (a Algorithm) Size() int {
	if a < numAlgorithms {
		return algorithms[a].size
	}
	return 0
}

// Valid reports whether a is a supported algorithm.
func (a Algorithm) Valid() bool { return a > AlgoNone && a < numAlgorithms }

// New returns a new hash of the algorithm.
func (a Algorithm) New() hash.Hash {
	if !a.Valid() {
		return nil
	}
	return algorithms[a].newHash()
}

// ParseAlgorithm returns the algorithm with the given hashlib name (case
// insensitive; "sha3-256" is accepted for "sha3_256"). md5 and sha1 fail
// with ErrWeakAlgorithm, anything else unknown with
// ErrUnsupportedAlgorithm.
func ParseAlgorithm(name string) (Algorithm, error) {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	for a := SHA256; a < numAlgorithms; a++ {
		if algorithms[a].name == n {
			return a, nil
		}
	}
	switch n {
	case "md5", "sha1", "md4", "md2":
		return AlgoNone, fmt.Errorf("%w: %s", ErrWeakAlgorithm, name)
	}
	return AlgoNone, fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, name)
}

// Digest is one hash value. It is comparable with ==; the zero Digest means
// "no hash".
type Digest struct {
	Algo Algorithm
	Len  uint8
	Sum  [64]byte
}

// Bytes returns the digest bytes.
func (d *Digest) Bytes() []byte { return d.Sum[:d.Len] }

// IsZero reports whether d holds no hash.
func (d Digest) IsZero() bool { return d.Algo == AlgoNone }

// Equal reports whether d and o are the same algorithm and value.
func (d *Digest) Equal(o *Digest) bool {
	return d.Algo == o.Algo && d.Len == o.Len && d.Sum == o.Sum
}

// String renders the digest as "<algorithm>:<hex>", or "" for no hash.
func (d Digest) String() string {
	if d.IsZero() {
		return ""
	}
	return d.Algo.String() + ":" + hex.EncodeToString(d.Sum[:d.Len])
}

// SetBytes sets the digest from raw bytes of algorithm a.
func (d *Digest) SetBytes(a Algorithm, b []byte) error {
	if !a.Valid() {
		return fmt.Errorf("%w: %s", ErrUnsupportedAlgorithm, a)
	}
	if len(b) != a.Size() {
		return fmt.Errorf("%w: %s digest of %d bytes, want %d", ErrBadDigest, a, len(b), a.Size())
	}
	d.Algo, d.Len = a, uint8(len(b))
	d.Sum = [64]byte{}
	copy(d.Sum[:], b)
	return nil
}

// ParseRecordHash parses a RECORD hash "<algorithm>=<urlsafe base64>"
// (padding optional). An empty string yields the zero Digest and no error.
func ParseRecordHash(s string) (Digest, error) {
	var d Digest
	if s == "" {
		return d, nil
	}
	name, value, ok := strings.Cut(s, "=")
	if !ok {
		return d, fmt.Errorf("%w: %q has no algorithm", ErrBadDigest, s)
	}
	a, err := ParseAlgorithm(name)
	if err != nil {
		return d, err
	}
	value = strings.TrimRight(value, "=")
	n := len(value) * 6 / 8
	if n != a.Size() {
		return d, fmt.Errorf("%w: %s value of %d characters, want %d bytes", ErrBadDigest, a, len(value), a.Size())
	}
	if !decodeURLBase64(d.Sum[:n], value) {
		return Digest{}, fmt.Errorf("%w: %s value is not urlsafe base64", ErrBadDigest, a)
	}
	d.Algo, d.Len = a, uint8(n)
	return d, nil
}

// b64 maps urlsafe base64 characters to their values; 0xff is invalid.
var b64 = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// decodeURLBase64 decodes unpadded urlsafe base64 s into dst, which must be
// exactly the decoded length, without allocating.
func decodeURLBase64(dst []byte, s string) bool {
	var acc uint32
	bits, j := 0, 0
	for i := 0; i < len(s); i++ {
		v := b64[s[i]]
		if v == 0xff {
			return false
		}
		acc = acc<<6 | uint32(v)
		bits += 6
		if bits >= 8 {
			bits -= 8
			if j >= len(dst) {
				return false
			}
			dst[j] = byte(acc >> bits)
			j++
		}
	}
	return j == len(dst)
}

// ParseHex parses "<algorithm>:<hex>" (as Digest.String writes it) or a
// bare 64-digit hex SHA-256.
func ParseHex(s string) (Digest, error) {
	var d Digest
	name, value, ok := strings.Cut(s, ":")
	if !ok {
		name, value = "sha256", s
	}
	a, err := ParseAlgorithm(name)
	if err != nil {
		return d, err
	}
	b, err := hex.DecodeString(value)
	if err != nil {
		return d, fmt.Errorf("%w: %s value is not hex", ErrBadDigest, a)
	}
	return d, d.SetBytes(a, b)
}
