module github.com/runtimetruth/runtimetruth/services/verifier

go 1.26.0
