package python

import (
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// Evidence provenance of the python.distributions record.
const (
	// Kind is the evidence kind Evidence returns.
	Kind = "python.distributions"
	// CollectorName is the record's source.collector.
	CollectorName = "python"
	// Method is the record's source.method.
	Method = "RECORD sha256"
)

// Evidence returns the live python.distributions record of a Verify
// report: the report-level keys integrity.Data documents plus, per
// distribution under "dist:<normalized name>:", version, source, baseline,
// status, files, unchecked, changed, changed_count, expected,
// expected_count, change_digest and reason.
func Evidence(rep *integrity.Report) snapshot.Record {
	return snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   Kind,
		Source: snapshot.Source{Collector: CollectorName, Method: Method},
		Data:   integrity.Data(rep, "dist", func(r *integrity.Result) string { return normalizeName(r.Name) }),
	}
}
