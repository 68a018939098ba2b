module github.com/runtimetruth/runtimetruth/services/auditor

go 1.26.0
