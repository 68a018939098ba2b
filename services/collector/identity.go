package collector

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// The collector's identity: the Ed25519 key it signs every event with
// (events.WithSigner) and the sequence its signatures count with. The key
// is Config.KeyFile when set (a mounted Secret), else <state_dir>/identity/
// ed25519.key, generated on first start (PEM PKCS #8, 0600, in a 0700
// directory). The sequence survives restarts: <state_dir>/identity/
// sequence holds a number above every one handed out, reserved in blocks
// (written and synced before a number of the block is used), so a restart
// continues above it, with a gap at most a block wide.
const (
	identityDir  = "identity"
	keyFileName  = "ed25519.key"
	seqFileName  = "sequence"
	seqBlock     = 1024
	maxKeyFile   = 64 << 10
	pemBlockType = "PRIVATE KEY"
)

// Identity is a collector's signing key and sequence.
type Identity struct {
	Key ed25519.PrivateKey
	// KeyFile is where the key was read from (or generated).
	KeyFile string
	seq     *sequence
}

// PublicKey is the public half of the key.
func (id *Identity) PublicKey() ed25519.PublicKey { return id.Key.Public().(ed25519.PublicKey) }

// KeyID is events.KeyID of the public key: the key itself, as
// `runtimetruth host approve --key` takes it.
func (id *Identity) KeyID() string { return dsse.KeyID(id.PublicKey()) }

// Signer signs with the key and the sequence.
func (id *Identity) Signer() *dsse.Signer { return dsse.NewSigner(id.Key, id.seq.next) }

// PrintIdentity writes the host name and public key (its key id) of cfg's
// collector, as an operator enrolls it (`runtimetruth host approve HOST
// --key KEY`), generating the key on first use.
func PrintIdentity(cfg Config, w io.Writer) error {
	id, err := LoadIdentity(cfg)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "host     %s\nkey      %s\nkey file %s\n",
		snapshot.Printable(cfg.Host), id.KeyID(), snapshot.Printable(id.KeyFile))
	return err
}

// LoadIdentity reads the collector's key (generating it in the state
// directory on first use, unless cfg.KeyFile names one) and opens its
// sequence.
func LoadIdentity(cfg Config) (*Identity, error) {
	dir := filepath.Join(cfg.StateDir, identityDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	path := cfg.KeyFile
	var key ed25519.PrivateKey
	var err error
	if path == "" {
		path = filepath.Join(dir, keyFileName)
		key, err = loadOrCreateKey(path)
	} else {
		key, err = loadKey(path)
	}
	if err != nil {
		return nil, err
	}
	seq, err := openSequence(filepath.Join(dir, seqFileName))
	if err != nil {
		return nil, err
	}
	return &Identity{Key: key, KeyFile: path, seq: seq}, nil
}

// loadOrCreateKey reads the key at path, generating it first when there
// is none (O_EXCL: of two processes starting at once, one writes it and
// the other reads it).
func loadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	key, err := loadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return loadKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	_, err = f.Write(pem.EncodeToMemory(&pem.Block{Type: pemBlockType, Bytes: der}))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	return priv, regfile.SyncDir(filepath.Dir(path))
}

// loadKey reads a PEM PKCS #8 Ed25519 private key (openssl genpkey
// -algorithm ed25519), a regular file only.
func loadKey(path string) (ed25519.PrivateKey, error) {
	b, err := regfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != pemBlockType {
		return nil, fmt.Errorf("identity key %s: want a PEM %s block", path, pemBlockType)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("identity key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("identity key %s: a %T, want Ed25519", path, k)
	}
	return priv, nil
}

// sequence hands out increasing numbers that stay increasing across
// restarts: the file holds the ceiling of the block being handed out.
type sequence struct {
	path    string
	mu      sync.Mutex
	last    uint64 // the last number handed out
	ceiling uint64 // the file's value: no number above it was handed out
}

func openSequence(path string) (*sequence, error) {
	s := &sequence{path: path}
	b, err := regfile.Read(path, 64)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("identity sequence: %w", err)
	default:
		n, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("identity sequence %s: %w", path, perr)
		}
		s.last, s.ceiling = n, n
	}
	return s, nil
}

// next is the next number, reserving (writing and syncing) a new block
// first when the current one is used up.
func (s *sequence) next() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last >= s.ceiling {
		c := s.last + seqBlock
		if err := regfile.WriteAtomic(s.path, []byte(strconv.FormatUint(c, 10)+"\n"), 0o600); err != nil {
			return 0, fmt.Errorf("identity sequence: %w", err)
		}
		s.ceiling = c
	}
	s.last++
	return s.last, nil
}
