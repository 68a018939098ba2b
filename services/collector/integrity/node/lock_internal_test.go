package node

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

func TestClassifyResolved(t *testing.T) {
	for in, want := range map[string]integrity.Source{
		"": integrity.SourceIndex,
		"https://registry.npmjs.org/lodash/-/lodash-4.17.21.tgz":    integrity.SourceIndex,
		"https://npm.example.com/repository/npm/@s/x/-/x-1.0.0.tgz": integrity.SourceIndex,
		"file:../pkgs/a-1.0.0.tgz":                                  integrity.SourceLocalBuild,
		"file:../lib":                                               integrity.SourceLocalBuild,
		"git+ssh://git@github.com/a/b.git#0123abc":                  integrity.SourceLocalBuild,
		"git+https://github.com/a/b.git#0123abc":                    integrity.SourceLocalBuild,
		"github:a/b#main":                                           integrity.SourceLocalBuild,
		"https://example.com/downloads/x-1.0.tgz":                   integrity.SourceLocalBuild,
	} {
		assert.Equal(t, want, classifyResolved(in), in)
	}
}
