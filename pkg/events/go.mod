module github.com/runtimetruth/runtimetruth/pkg/events

go 1.26.0
