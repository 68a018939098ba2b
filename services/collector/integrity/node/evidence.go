package node

import (
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// Evidence provenance of the node.packages record.
const (
	// Kind is the evidence kind Evidence returns.
	Kind = "node.packages"
	// CollectorName is the record's source.collector.
	CollectorName = "node"
	// Method is the record's source.method.
	Method = "manifest sha256"
)

// Evidence returns the live node.packages record of a Verify report: the
// report-level keys integrity.Data documents plus, per package under
// "pkg:<install path>:" ("." for the project folder, "lodash",
// "@scope/x", "a/node_modules/b" for nested packages), version, source,
// baseline (manifest, snapshot or none), status, files, unchecked,
// changed, changed_count, expected, expected_count, change_digest and
// reason; and "project" with the project's name.
func Evidence(rep *integrity.Report) snapshot.Record {
	d := integrity.Data(rep, "pkg", func(r *integrity.Result) string { return installKey(rep.Root, r) })
	for i := range rep.Results {
		if rep.Results[i].Source == integrity.SourceProject {
			d["project"] = snapshot.String(rep.Results[i].Name)
		}
	}
	return snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   Kind,
		Source: snapshot.Source{Collector: CollectorName, Method: Method},
		Data:   d,
	}
}

// installKey names a result by its install path relative to the
// project's node_modules.
func installKey(root string, r *integrity.Result) string {
	if r.Source == integrity.SourceProject {
		return "."
	}
	loc := r.Location
	prefix := root + "/node_modules/"
	if len(loc) > len(prefix) && loc[:len(prefix)] == prefix {
		return loc[len(prefix):]
	}
	return r.Name
}
