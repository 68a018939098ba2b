package attestationtest

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/go-openapi/runtime"
	"github.com/go-openapi/strfmt"
	"github.com/sigstore/rekor/pkg/generated/models"
	"github.com/sigstore/rekor/pkg/types"
	"github.com/sigstore/rekor/pkg/util"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/stretchr/testify/require"

	// The entry kinds sigstore-go's signer proposes: dsse for a DSSE
	// envelope, hashedrekord for a message signature.
	_ "github.com/sigstore/rekor/pkg/types/dsse/v0.0.1"
	_ "github.com/sigstore/rekor/pkg/types/hashedrekord/v0.0.1"
)

// entriesPath is the Rekor v1 API path of log entries.
const entriesPath = "/api/v1/log/entries"

// rekorOrigin names the fake log in its checkpoints ("<origin> - <tree
// id>", the shape of a Rekor v1 signed tree head).
const rekorOrigin = "rekor.runtimetruth.test"

// Rekor is a Rekor v1 transparency log on an httptest server: what
// sigstore-go's sign.Rekor client calls (POST /api/v1/log/entries; GET
// /api/v1/log/entries/{uuid} after a 409 for an entry already logged).
// Each proposed dsse or hashedrekord entry is validated (its signature
// must verify under the certificate or key it names) and canonicalized by
// Rekor's own types, appended to one in-memory RFC 6962 Merkle tree, and
// answered with a signed entry timestamp and an inclusion proof against a
// checkpoint, both signed by the log's key. Log (or
// Servers.TrustedRoot(tb, WithRekor())) puts that key in a trusted root.
type Rekor struct {
	// URL is the log's base URL (give it as the Rekor URL).
	URL string
	// Requests counts the requests served.
	Requests atomic.Int64

	key    *ecdsa.PrivateKey
	logID  []byte // sha256 of the key's PKIX DER, as Rekor names logs
	treeID int64
	start  time.Time

	mu      sync.Mutex
	leaves  [][]byte // leaf hashes, in log order
	entries map[string]models.LogEntryAnon
}

// NewRekor starts a fake Rekor with a new key; it stops when the test
// ends.
func NewRekor(tb testing.TB) *Rekor {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	require.NoError(tb, err)
	id := sha256.Sum256(der)
	r := &Rekor{
		key: key, logID: id[:], treeID: time.Now().UnixNano() & 0x7fffffff,
		start: time.Now().Add(-5 * time.Hour), entries: map[string]models.LogEntryAnon{},
	}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Log returns the log as a trusted root lists it: its key, its id and its
// validity (from five hours ago, open-ended).
func (r *Rekor) Log() *root.TransparencyLog {
	return &root.TransparencyLog{
		BaseURL: r.URL, ID: r.logID, ValidityPeriodStart: r.start,
		HashFunc: crypto.SHA256, PublicKey: r.key.Public(), SignatureHashFunc: crypto.SHA256,
	}
}

// Logs returns the log keyed as root.TrustedMaterial.RekorLogs keys it
// (the hex of its id).
func (r *Rekor) Logs() map[string]*root.TransparencyLog {
	return map[string]*root.TransparencyLog{hex.EncodeToString(r.logID): r.Log()}
}

// Size returns the number of entries logged.
func (r *Rekor) Size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.leaves)
}

func (r *Rekor) serve(w http.ResponseWriter, req *http.Request) {
	r.Requests.Add(1)
	switch {
	case req.Method == http.MethodPost && req.URL.Path == entriesPath:
		r.create(w, req)
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, entriesPath+"/"):
		uuid := strings.TrimPrefix(req.URL.Path, entriesPath+"/")
		r.mu.Lock()
		e, ok := r.entries[uuid]
		r.mu.Unlock()
		if !ok {
			rekorError(w, http.StatusNotFound, "entry not found")
			return
		}
		writeJSON(w, http.StatusOK, models.LogEntry{uuid: e})
	default:
		rekorError(w, http.StatusNotFound, "not found")
	}
}

// create logs a proposed entry, as Rekor's createLogEntry does.
func (r *Rekor) create(w http.ResponseWriter, req *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		rekorError(w, http.StatusBadRequest, "read entry")
		return
	}
	pe, err := models.UnmarshalProposedEntry(bytes.NewReader(raw), runtime.JSONConsumer())
	if err != nil {
		rekorError(w, http.StatusBadRequest, "proposed entry: "+err.Error())
		return
	}
	ctx := req.Context()
	impl, err := types.CreateVersionedEntry(pe)
	if err != nil {
		rekorError(w, http.StatusBadRequest, "invalid entry: "+err.Error())
		return
	}
	body, err := types.CanonicalizeEntry(ctx, impl)
	if err != nil {
		rekorError(w, http.StatusBadRequest, "canonicalize entry: "+err.Error())
		return
	}
	leaf := leafHash(body)
	uuid := hex.EncodeToString(leaf)
	location := entriesPath + "/" + uuid

	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.entries[uuid]; dup {
		w.Header().Set("Location", location)
		rekorError(w, http.StatusConflict, "an equivalent entry already exists in the transparency log")
		return
	}
	r.leaves = append(r.leaves, leaf)
	entry, err := r.logEntry(ctx, body, int64(len(r.leaves)-1), time.Now().Unix())
	if err != nil {
		r.leaves = r.leaves[:len(r.leaves)-1]
		rekorError(w, http.StatusInternalServerError, err.Error())
		return
	}
	r.entries[uuid] = entry
	w.Header().Set("ETag", uuid)
	w.Header().Set("Location", location)
	writeJSON(w, http.StatusCreated, models.LogEntry{uuid: entry})
}

// logEntry makes the log's answer for the entry at index of the tree
// r.leaves: its signed entry timestamp, and its inclusion proof against a
// signed checkpoint of the tree as it now is. r.mu is held.
func (r *Rekor) logEntry(ctx context.Context, body []byte, index, integrated int64) (models.LogEntryAnon, error) {
	logID := hex.EncodeToString(r.logID)
	encBody := base64.StdEncoding.EncodeToString(body)
	signer, err := signature.LoadECDSASignerVerifier(r.key, crypto.SHA256)
	if err != nil {
		return models.LogEntryAnon{}, err
	}

	// The signed entry timestamp signs the RFC 8785 JSON of body,
	// integrated time, log index and log id.
	payload, err := json.Marshal(map[string]any{
		"body": encBody, "integratedTime": integrated, "logIndex": index, "logID": logID,
	})
	if err != nil {
		return models.LogEntryAnon{}, err
	}
	canon, err := jsoncanonicalizer.Transform(payload)
	if err != nil {
		return models.LogEntryAnon{}, err
	}
	set, err := signer.SignMessage(bytes.NewReader(canon))
	if err != nil {
		return models.LogEntryAnon{}, err
	}

	size := int64(len(r.leaves))
	rootHash := treeHash(r.leaves)
	checkpoint, err := util.CreateAndSignCheckpoint(ctx, rekorOrigin, r.treeID, uint64(size), rootHash, signer)
	if err != nil {
		return models.LogEntryAnon{}, err
	}
	var hashes []string
	for _, h := range inclusionPath(int(index), r.leaves) {
		hashes = append(hashes, hex.EncodeToString(h))
	}
	rootHex, cp := hex.EncodeToString(rootHash), string(checkpoint)
	return models.LogEntryAnon{
		Body: encBody, IntegratedTime: &integrated, LogID: &logID, LogIndex: &index,
		Verification: &models.LogEntryAnonVerification{
			SignedEntryTimestamp: strfmt.Base64(set),
			InclusionProof: &models.InclusionProof{
				Checkpoint: &cp, Hashes: hashes, LogIndex: &index, RootHash: &rootHex, TreeSize: &size,
			},
		},
	}, nil
}

// RFC 6962 §2.1: leaf and node hashes, the tree hash (MTH) and the audit
// path (PATH) of a leaf.

func leafHash(data []byte) []byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(data)
	return h.Sum(nil)
}

func nodeHash(left, right []byte) []byte {
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(left)
	h.Write(right)
	return h.Sum(nil)
}

// split is the largest power of two below n (n > 1).
func split(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// treeHash is the root hash of a tree of leaf hashes (at least one).
func treeHash(leaves [][]byte) []byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := split(len(leaves))
	return nodeHash(treeHash(leaves[:k]), treeHash(leaves[k:]))
}

// inclusionPath is the audit path of leaf m, from the leaf up.
func inclusionPath(m int, leaves [][]byte) [][]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := split(len(leaves))
	if m < k {
		return append(inclusionPath(m, leaves[:k]), treeHash(leaves[k:]))
	}
	return append(inclusionPath(m-k, leaves[k:]), treeHash(leaves[:k]))
}

func rekorError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, &models.Error{Code: int64(code), Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
