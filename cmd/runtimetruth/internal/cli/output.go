package cli

import (
	"encoding/json"
	"io"
	"text/tabwriter"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// printable is s safe to print in human output: snapshot.Printable, every
// character that is not graphic escaped as Go writes it in a rune literal
// (\x1b, \n, \u2028; an invalid byte \xff), anything else unchanged.
func printable(s string) string { return snapshot.Printable(s) }

// writeIndentedJSON writes v to w as JSON indented by two spaces, the form
// of the versioned --json reports.
func writeIndentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable is a writer of the human tables of the bus commands: columns
// separated by at least two spaces; the caller flushes it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
}
