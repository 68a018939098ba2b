package siem_test

import (
	"testing"

	"github.com/runtimetruth/runtimetruth/services/auditor/siem"
)

// BenchmarkRender maps and renders the scenario's links in each format:
// the cost the syslog sink's format adds to a link, beside sealing it
// (link.Prepare, about 30 µs a link in make bench).
func BenchmarkRender(b *testing.B) {
	recs := scenario(b)
	for _, f := range []siem.Format{siem.FormatOCSF, siem.FormatECS, siem.FormatCEF} {
		b.Run(string(f), func(b *testing.B) {
			ep := siem.NewEpisodes()
			b.ReportAllocs()
			for i := range b.N {
				r := recs[i%len(recs)]
				if _, err := siem.Render(f, siem.Map(r, ep), product, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
