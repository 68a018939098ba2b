// Package events will hold the CloudEvents catalog of runtimetruth (event
// types such as runnable.modified and the verification verdicts, their NATS
// subjects, JSON Schemas, golden examples and a strict codec). The module
// exists so the workspace has its final shape; the catalog arrives with the
// event pipeline (see docs/architecture.md, "Status").
package events
