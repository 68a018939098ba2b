package events_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

func TestToken(t *testing.T) {
	cases := map[string]string{
		"web-01":                   "web-01",
		"web-01.example.com":       "web-01=2Eexample=2Ecom",
		"agent worker.service":     "agent=20worker=2Eservice",
		"/home/agent/proj":         "=2Fhome=2Fagent=2Fproj",
		"a*b>c":                    "a=2Ab=3Ec",
		"x=y":                      "x=3Dy",
		"snake_case":               "snake_case",
		"café":                     "caf=C3=A9",
		"":                         "=",
		"EVIDENCE":                 "EVIDENCE",
		"systemd.unit":             "systemd=2Eunit",
		"$SYS":                     "=24SYS",
		"tab\there":                "tab=09here",
		"Nats-Msg-Id":              "Nats-Msg-Id",
		"100%":                     "100=25",
		"rt.evidence.>":            "rt=2Eevidence=2E=3E",
		"C:\\Program Files\\x":     "C=3A=5CProgram=20Files=5Cx",
		"pkg:npm/%40scope/a@1.0.0": "pkg=3Anpm=2F=2540scope=2Fa=401=2E0=2E0",
	}
	for in, want := range cases {
		assert.Equal(t, want, events.Token(in), "Token(%q)", in)
		got, err := events.ParseToken(want)
		require.NoError(t, err)
		assert.Equal(t, in, got)
	}
}

func TestTokenShortensLongValues(t *testing.T) {
	long := strings.Repeat("/very/long/path", 20)
	tok := events.Token(long)
	assert.LessOrEqual(t, len(tok), events.MaxTokenLength)
	assert.Contains(t, tok, "==")
	assert.NotEqual(t, tok, events.Token(long+"x"), "different values, different tokens")
	assert.True(t, strings.HasPrefix(tok, "=2Fvery=2Flong"))
	_, err := events.ParseToken(tok)
	require.ErrorIs(t, err, events.ErrHashedToken)
	// A value whose encoding is exactly at the limit stays reversible.
	atLimit := strings.Repeat("a", events.MaxTokenLength)
	assert.Equal(t, atLimit, events.Token(atLimit))
}

func TestParseTokenRejects(t *testing.T) {
	for _, tok := range []string{"", "a.b", "a b", "=2e", "=2", "=", "a=41", "a*", "==", strings.Repeat("a", events.MaxTokenLength+1)} {
		if tok == "=" {
			got, err := events.ParseToken(tok)
			require.NoError(t, err)
			assert.Empty(t, got)
			continue
		}
		_, err := events.ParseToken(tok)
		assert.ErrorIs(t, err, events.ErrToken, "%q", tok)
	}
}

func TestSubjects(t *testing.T) {
	target := events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}
	cases := map[string]string{
		events.EvidenceSubject("web-01.example.com", "systemd.unit"):   "rt.evidence.web-01=2Eexample=2Ecom.systemd=2Eunit",
		events.IntegritySubject("web-01"):                              "rt.integrity.web-01",
		events.CollectFailedSubject("web-01"):                          "rt.collect.failed.web-01",
		events.VerdictSubject("web-01", events.StatusDrift):            "rt.verdict.web-01.drift",
		events.BaselineSubject(target):                                 "rt.baseline.systemd=2Eunit.agent=20worker=2Eservice",
		events.AttestationSubject(target):                              "rt.attestation.systemd=2Eunit.agent=20worker=2Eservice",
		events.HostKeySubject("web-01.example.com"):                    "rt.hostkey.web-01=2Eexample=2Ecom",
		events.DeadLetterSubject("EVIDENCE", "rt.evidence.web-01.git"): "rt.dlq.EVIDENCE.web-01",
		events.DeadLetterSubject("EVIDENCE", "rt.collect.failed.db"):   "rt.dlq.EVIDENCE.db",
		events.DeadLetterSubject("EVIDENCE", "rt.integrity.db"):        "rt.dlq.EVIDENCE.db",
		events.DeadLetterSubject("VERDICTS", "rt.verdict.db.pass"):     "rt.dlq.VERDICTS.db",
		events.DeadLetterSubject("EVIDENCE", "rt.evidence.web-01"):     "rt.dlq.EVIDENCE.=",
		events.DeadLetterSubject("EVIDENCE", "elsewhere.x.y"):          "rt.dlq.EVIDENCE.=",
	}
	for got, want := range cases {
		assert.Equal(t, want, got)
		assert.True(t, events.ValidSubject(got), got)
	}
	assert.Equal(t, "rt.dlq.EVIDENCE.*", events.DeadLetterFilter("EVIDENCE"))
	for _, bad := range []string{"", "rt..x", "rt.*", "rt.>", "rt.a b", ".rt", "rt.", "rt.\x7f"} {
		assert.False(t, events.ValidSubject(bad), "%q", bad)
	}
}

func TestSubjectsMatchTheStreamFilters(t *testing.T) {
	filters := map[string]string{
		events.TypeEvidenceCollected:  events.FilterEvidence,
		events.TypeRunnableModified:   events.FilterIntegrity,
		events.TypeCollectionFailed:   events.FilterCollect,
		events.TypeVerdictPass:        events.FilterVerdict,
		events.TypeVerdictDrift:       events.FilterVerdict,
		events.TypeVerdictError:       events.FilterVerdict,
		events.TypeVerdictStale:       events.FilterVerdict,
		events.TypeBaselineChanged:    events.FilterBaseline,
		events.TypeAttestationCreated: events.FilterAttestation,
		events.TypeHostKeyChanged:     events.FilterHostKey,
		events.TypeEventRejected:      events.FilterDeadLetter,
	}
	for _, p := range fixtures(t) {
		f := filters[p.Type()]
		require.NotEmpty(t, f, p.Type())
		assert.True(t, strings.HasPrefix(p.NATSSubject(), strings.TrimSuffix(f, ">")), "%s on %s", p.Type(), p.NATSSubject())
	}
}

func TestSourceAndPackageURL(t *testing.T) {
	assert.Equal(t, "/collector/web-01.example.com", events.Source("collector", "web-01.example.com"))
	assert.Equal(t, "/verifier/pod%20a%2Fb", events.Source("verifier", "pod a/b"))
	assert.Equal(t, "pkg:pypi/runspec-linux@0.20.0", events.PackageURL(events.Python, "Runspec_Linux", "0.20.0"))
	assert.Equal(t, "pkg:pypi/zope-interface@5.0%2Blocal", events.PackageURL(events.Python, "zope.interface", "5.0+local"))
	assert.Equal(t, "pkg:npm/%40scope/name@1.0.0", events.PackageURL(events.Node, "@scope/name", "1.0.0"))
	assert.Equal(t, "pkg:npm/mytools@1.0.0", events.PackageURL(events.Node, "mytools", "1.0.0"))
}

func TestAttestSubjectIsOutsideEveryStream(t *testing.T) {
	assert.Equal(t, "rt.ctl.attest", events.AttestSubject)
	assert.True(t, events.ValidSubject(events.AttestSubject))
	for _, f := range []string{
		events.FilterEvidence, events.FilterIntegrity, events.FilterCollect, events.FilterVerdict,
		events.FilterBaseline, events.FilterAttestation, events.FilterHostKey, events.FilterDeadLetter,
	} {
		subject, prefix := events.AttestSubject, strings.TrimSuffix(f, ">")
		assert.False(t, strings.HasPrefix(subject, prefix), "%s captures the sign requests", f)
	}
}

func TestAttestationKey(t *testing.T) {
	target := events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}
	baseline := events.TargetTokens(target)
	key := events.AttestationKey(target)
	assert.Equal(t, "systemd=2Eunit.agent=20worker=2Eservice.attestation", key)
	assert.True(t, events.IsAttestationKey(key))
	assert.False(t, events.IsAttestationKey(baseline))
	// A target whose identifier is "attestation" still has a baseline key
	// of two tokens.
	odd := events.TargetTokens(events.Target{Kind: "x", Identifier: "attestation"})
	assert.Equal(t, "x.attestation", odd)
	assert.False(t, events.IsAttestationKey(odd))
	// The filter of baselines: two tokens match, three do not ('*' is one
	// token, so a filter of wildcards only matches keys of as many tokens).
	require.Equal(t, "*.*", events.BaselineKeysFilter)
	match := func(filter, key string) bool {
		return len(strings.Split(filter, ".")) == len(strings.Split(key, "."))
	}
	assert.True(t, match(events.BaselineKeysFilter, baseline))
	assert.False(t, match(events.BaselineKeysFilter, key))
	for _, c := range key {
		assert.True(t, c == '.' || c == '=' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z',
			"%q is not a key-value key character", c)
	}
}
