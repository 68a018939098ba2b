module github.com/runtimetruth/runtimetruth/services/verifier

go 1.26.0

require (
	github.com/runtimetruth/runtimetruth/pkg/events v0.0.0
	github.com/runtimetruth/runtimetruth/pkg/evidence v0.0.0
	github.com/runtimetruth/runtimetruth/pkg/platform v0.0.0
)

replace github.com/runtimetruth/runtimetruth/pkg/platform => ../../pkg/platform

replace github.com/runtimetruth/runtimetruth/pkg/events => ../../pkg/events

replace github.com/runtimetruth/runtimetruth/pkg/evidence => ../../pkg/evidence
