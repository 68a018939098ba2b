package integrity

import (
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// MaxEvidencePaths bounds the paths listed in one ":changed" or
// ":expected" evidence value; ":changed_count" and ":expected_count" give
// the full counts.
const MaxEvidencePaths = 50

// Data flattens a report into evidence data. Report-level keys:
//
//	root, package_count, modified_count, error_count, skipped_count,
//	files_checked, and skipped (only when the whole check was skipped)
//
// and for each result, under "<prefix>:<key(result)>:":
//
//	version, source, baseline, status, files, unchecked,
//	changed        compact JSON list of unexpectedly changed paths
//	               (sorted, at most MaxEvidencePaths)
//	changed_count  number of unexpected changes
//	expected       compact JSON list of expected changed paths
//	expected_count number of expected changes
//	change_digest  Result.ChangeDigest, or null
//	reason         the skip or error reason (only when set)
//
// Only values that stay the same between checks of an unchanged install
// are included (no timings, no cache statistics).
func Data(rep *Report, prefix string, key func(*Result) string) snapshot.Data {
	d := snapshot.Data{"root": snapshot.String(rep.Root)}
	if rep.Skipped != "" {
		d["skipped"] = snapshot.String(rep.Skipped)
	}
	var modified, errs, skipped, files int
	for i := range rep.Results {
		r := &rep.Results[i]
		switch r.Status {
		case StatusModified:
			modified++
		case StatusError:
			errs++
		case StatusSkipped:
			skipped++
		}
		files += r.Files
		p := prefix + ":" + key(r) + ":"
		d[p+"version"] = snapshot.String(r.Version)
		d[p+"source"] = snapshot.String(string(r.Source))
		d[p+"baseline"] = snapshot.String(string(r.Baseline))
		d[p+"status"] = snapshot.String(string(r.Status))
		d[p+"files"] = snapshot.Int(int64(r.Files))
		d[p+"unchecked"] = snapshot.Int(int64(r.Unchecked))
		var changed, expected []string
		for _, c := range r.Changes {
			if c.Kind == ChangeExpected {
				expected = append(expected, c.Path)
			} else {
				changed = append(changed, c.Path)
			}
		}
		d[p+"changed"] = snapshot.String(jsonList(changed))
		d[p+"changed_count"] = snapshot.Int(int64(len(changed)))
		d[p+"expected"] = snapshot.String(jsonList(expected))
		d[p+"expected_count"] = snapshot.Int(int64(len(expected)))
		d[p+"change_digest"] = snapshot.OptString(r.ChangeDigest, r.ChangeDigest != "")
		if r.Reason != "" {
			d[p+"reason"] = snapshot.String(r.Reason)
		}
	}
	d["package_count"] = snapshot.Int(int64(len(rep.Results)))
	d["modified_count"] = snapshot.Int(int64(modified))
	d["error_count"] = snapshot.Int(int64(errs))
	d["skipped_count"] = snapshot.Int(int64(skipped))
	d["files_checked"] = snapshot.Int(int64(files))
	return d
}

// jsonList renders up to MaxEvidencePaths strings as a compact JSON array,
// escaped the way Python's json.dumps does.
func jsonList(items []string) string {
	if len(items) > MaxEvidencePaths {
		items = items[:MaxEvidencePaths]
	}
	b := []byte{'['}
	for i, s := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = pyjson.AppendString(b, s)
	}
	return string(append(b, ']'))
}
