package python

import "testing"

// FuzzSplitPlainRow checks the fast path for rows without quotes against
// the general CSV row splitter.
func FuzzSplitPlainRow(f *testing.F) {
	for _, s := range []string{"a,b,c\n", "a,,\r\nb", "", "\n", "a\rb\n", "a,\"b\"\n", "x,y,z,w,v", "a,b\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for i := 0; i < len(text); {
			var a, b [4]string
			n, next, _, err := splitPlainRow(text, i, &a)
			m, next2, _, err2 := splitRow(text, i, &b)
			if n == 0 {
				if err2 != nil {
					return
				}
				i = next2
				continue
			}
			if err != nil || err2 != nil || n != m || next != next2 || a != b {
				t.Fatalf("%q at %d: plain %d %q next %d; general %d %q next %d (%v)", text, i, n, a, next, m, b, next2, err2)
			}
			i = next
		}
	})
}
