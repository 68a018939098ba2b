package console

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Scopes of an API token.
const (
	ScopeViewer   = "viewer"
	ScopeApprover = "approver"
)

// APIToken is an API token the console accepts, for automation: a
// request with "Authorization: Bearer <token>" acts as Name ("token:"
// before it in what it records) with the token's scope. Only the token's
// SHA-256 is kept.
type APIToken struct {
	Name  string
	Scope string
	Hash  [sha256.Size]byte
}

// ErrTokens is the error of a token file that cannot be read.
var ErrTokens = errors.New("invalid API token file")

// NewAPIToken makes a token for name with scope: the token to give the
// automation (shown once) and the line of the token file that accepts it.
func NewAPIToken(name, scope string) (token, line string, err error) {
	if err := checkToken(name, scope); err != nil {
		return "", "", err
	}
	token = "rtc_" + randomText()
	sum := sha256.Sum256([]byte(token))
	return token, fmt.Sprintf("%s %s sha256:%s", name, scope, hex.EncodeToString(sum[:])), nil
}

// ParseAPITokens reads a token file: one token a line, "NAME SCOPE
// sha256:<hex of the token's SHA-256>", blank lines and # comments
// skipped.
func ParseAPITokens(data []byte) ([]APIToken, error) {
	var out []APIToken
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: line %d: want NAME SCOPE sha256:HEX", ErrTokens, n)
		}
		if err := checkToken(f[0], f[1]); err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrTokens, n, err)
		}
		raw, ok := strings.CutPrefix(f[2], "sha256:")
		sum, err := hex.DecodeString(raw)
		if !ok || err != nil || len(sum) != sha256.Size {
			return nil, fmt.Errorf("%w: line %d: the hash is not sha256:<64 hex digits>", ErrTokens, n)
		}
		if seen[f[0]] {
			return nil, fmt.Errorf("%w: line %d: %s is named twice", ErrTokens, n, f[0])
		}
		seen[f[0]] = true
		t := APIToken{Name: f[0], Scope: f[1]}
		copy(t.Hash[:], sum)
		out = append(out, t)
	}
	return out, sc.Err()
}

func checkToken(name, scope string) error {
	if scope != ScopeViewer && scope != ScopeApprover {
		return fmt.Errorf("scope %q: want %s or %s", scope, ScopeViewer, ScopeApprover)
	}
	allowed := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
	}
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return !allowed(r) }) {
		return fmt.Errorf("token name %q: letters, digits, '-', '_' and '.' only", name)
	}
	return nil
}

// bearer is the user of r's API token ("Authorization: Bearer"), if it
// carries one the console accepts; a request naming a token that is not
// accepted is refused (401), never served as anyone else.
func bearer(tokens []APIToken, r *http.Request) (u User, named, ok bool) {
	h := r.Header.Get("Authorization")
	tok, found := strings.CutPrefix(h, "Bearer ")
	if !found {
		return User{}, h != "", false
	}
	sum := sha256.Sum256([]byte(tok))
	for _, t := range tokens {
		if subtle.ConstantTimeCompare(sum[:], t.Hash[:]) == 1 {
			return User{Name: "token:" + t.Name, Approver: t.Scope == ScopeApprover}, true, true
		}
	}
	return User{}, true, false
}

// withTokens lets a request with an accepted API token through to next
// as the token's user, refuses one with any other Authorization (401),
// and sends the rest to door (the session's front door).
func withTokens(tokens []APIToken, door, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, named, ok := bearer(tokens, r)
		switch {
		case ok:
			next.ServeHTTP(w, r.WithContext(withUser(r.Context(), u)))
		case named:
			deny(w, http.StatusUnauthorized, "the API token is not accepted")
		default:
			door.ServeHTTP(w, r)
		}
	})
}
