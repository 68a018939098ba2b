package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
)

// up signs its checkpoints. Its embedded auditor appends to a JSONL log
// beside which it writes a signed checkpoint of every chain that grew,
// every minute and at shutdown, with an Ed25519 key up keeps in the data
// directory (upCheckpointKey, 0600, made on the first start). At start up
// checks the log against every checkpoint, each signed by that key, and
// refuses to run over a log that no longer matches: rewritten (every link
// recomputed), cut (a chain ends before a checkpoint), or whose
// checkpoints were replaced by unsigned ones or another key's.
//
// What this does not catch on its own: someone who can write the data
// directory and deletes the key, the checkpoints and the log together. The
// checkpoints anchored off the host catch that (docs/security.md,
// "Anchoring checkpoints").

// upCheckpointKey is the name of up's checkpoint signing key, in the
// auditor's directory of the data directory.
const upCheckpointKey = "checkpoint.key"

// ErrUpLogChanged is wrapped by the error up refuses to start with when
// its audit log no longer matches its signed checkpoints.
var ErrUpLogChanged = errors.New("the audit log no longer matches its signed checkpoints")

// prepareUpAudit makes up's checkpoint key on the first start and checks
// the audit log at logPath against the checkpoints at cpPath. It returns
// the key's file, for the auditor to sign the checkpoints with.
func prepareUpAudit(ctx context.Context, logPath, cpPath string) (string, error) {
	keyFile := filepath.Join(filepath.Dir(logPath), upCheckpointKey)
	key, err := upKey(keyFile, cpPath)
	if err != nil {
		return "", err
	}
	if err := checkUpLog(ctx, logPath, cpPath, key.Public().(ed25519.PublicKey), keyFile); err != nil {
		return "", err
	}
	return keyFile, nil
}

// upKey loads up's checkpoint key, or makes it when there is none and no
// checkpoint yet signed (a first start, or a data directory from before up
// signed its checkpoints: those checkpoints, unsigned, are moved aside to
// cpPath.unsigned and the log is checked against them once).
func upKey(keyFile, cpPath string) (ed25519.PrivateKey, error) {
	key, err := auditor.LoadCheckpointKey(keyFile)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	cps, err := readCheckpoints(cpPath)
	if err != nil {
		return nil, err
	}
	for _, c := range cps {
		if c.Sig != "" {
			return nil, fmt.Errorf("%w: %s holds checkpoints signed by key %s, but up's checkpoint key %s is missing: "+
				"restore the key, or keep the data directory for investigation and start over with a new one (--data-dir)",
				ErrUpLogChanged, cpPath, c.Key, keyFile)
		}
	}
	if len(cps) > 0 {
		if err := os.Rename(cpPath, cpPath+".unsigned"); err != nil {
			return nil, fmt.Errorf("move the unsigned checkpoints aside: %w", err)
		}
	}
	_, key, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	if err := regfile.WriteAtomic(keyFile, chain.MarshalPrivateKey(key), 0o600); err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	return key, nil
}

// readCheckpoints reads the checkpoints at path, signed or not; none when
// the file does not exist.
func readCheckpoints(path string) ([]chain.Checkpoint, error) {
	cps, _, err := auditor.ReadCheckpoints(path, nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return cps, err
}

// checkUpLog checks the log against every checkpoint in cpPath (and in
// cpPath.unsigned, those of before the key), each of the former signed by
// pub.
func checkUpLog(ctx context.Context, logPath, cpPath string, pub ed25519.PublicKey, keyFile string) error {
	way := fmt.Sprintf("keep %s, %s and %s for investigation, and start over with a new data directory (--data-dir), "+
		"or move them aside to start a new audit log here", logPath, cpPath, keyFile)
	if _, err := os.Stat(cpPath); err == nil {
		if _, _, err := auditor.ReadCheckpoints(cpPath, pub); err != nil {
			return fmt.Errorf("%w: %w (up signs every checkpoint with %s): %s", ErrUpLogChanged, err, keyFile, way)
		}
	}
	var cps []chain.Checkpoint
	for _, p := range []string{cpPath + ".unsigned", cpPath} {
		c, err := readCheckpoints(p)
		if err != nil {
			return err
		}
		cps = append(cps, c...)
	}
	files, err := jsonl.Files(logPath)
	if err != nil {
		return err
	}
	if len(files) == 0 && len(cps) == 0 {
		return nil
	}
	rep, err := chain.Run(ctx, chain.NewHasher(nil), cps, jsonl.Source(files))
	if err != nil {
		return fmt.Errorf("check the audit log %s: %w", logPath, err)
	}
	if b := rep.Broken; b != nil {
		return fmt.Errorf("%w: %s against %s: %s: %s", ErrUpLogChanged, logPath, cpPath, b.Error(), way)
	}
	return nil
}
