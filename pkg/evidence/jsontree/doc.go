// Package jsontree parses untrusted JSON strictly into an ordered tree.
//
// Unlike encoding/json it rejects duplicate object keys, invalid UTF-8,
// lone surrogates, non-standard literals (NaN, Infinity) and trailing data,
// keeps object members in document order, keeps number literals verbatim
// (so integers and floats stay distinguishable), and bounds nesting depth.
// Errors name the byte offset, line and column of the problem.
package jsontree
