// Package console serves runtimetruth's web console: the fleet's hosts and
// targets with their latest verdicts, read from the verifier's buckets
// through the same code the CLI's status uses (verifier.Status), and each
// one's page: its drift report as `verify --json` writes it (the verdict
// carries the report the verifier made with the same diff and report
// code) and the host's latest evidence.
//
// Server-rendered pages (html/template, net/http method patterns, the
// templates and the style sheet embedded): every page works without
// JavaScript.
//
// On loopback (runtimetruth up) the console is reached by the URL up
// prints, which carries a one-time launch token (Guard): the first request
// with it gets a session cookie (HttpOnly, SameSite=Strict) and is sent on
// without the token; the token works once, and a request without the
// session is refused (401). Only loopback Host names with the console's
// port are answered (421 otherwise, which stops DNS rebinding), unsafe
// methods from another origin are refused (403,
// net/http.CrossOriginProtection), and every response carries a content
// security policy of "default-src 'self'; frame-ancestors 'none'".
//
// A Server is a lifecycle.Component: Start listens and serves, Shutdown
// drains the requests in flight.
package console
