package wire

import (
	"io/fs"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The scripts use exactly the special hash fields that fields.go documents.
func TestFieldsMatchScripts(t *testing.T) {
	literal := regexp.MustCompile(`'\\1([a-z])'`)
	used := make(map[string]bool)
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	assert.NoError(t, err)
	for _, f := range files {
		src, err := luaFiles.ReadFile(f)
		assert.NoError(t, err)
		for _, m := range literal.FindAllStringSubmatch(string(src), -1) {
			used["\x01"+m[1]] = true
		}
	}
	var got []string
	for f := range used {
		got = append(got, f)
	}
	sort.Strings(got)
	want := []string{FieldGrant, FieldKind, FieldPermits, FieldUsed, FieldWriter}
	sort.Strings(want)
	assert.Equal(t, want, got)
}
