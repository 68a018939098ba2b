module github.com/runtimetruth/runtimetruth/services/attestor

go 1.26.0
