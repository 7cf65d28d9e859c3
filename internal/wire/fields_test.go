package wire

import (
	"io/fs"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lib.lua spells the special hash fields once, as fields.go has them, and no other script
// spells one.
func TestFieldsMatchScripts(t *testing.T) {
	lib, err := luaFiles.ReadFile("lua/lib.lua")
	require.NoError(t, err)
	line := regexp.MustCompile(`(?m)^local FIELD_KIND, FIELD_GRANT, FIELD_WRITER, FIELD_PERMITS, FIELD_USED = ` +
		`'\\1(.)', '\\1(.)', '\\1(.)', '\\1(.)', '\\1(.)'$`).FindStringSubmatch(string(lib))
	require.NotNil(t, line, "lib.lua has no line defining the FIELD_ names")
	for i, f := range []string{FieldKind, FieldGrant, FieldWriter, FieldPermits, FieldUsed} {
		assert.Equal(t, f, "\x01"+line[i+1])
	}
	line = regexp.MustCompile(`(?m)^local FIELD_VALUE, FIELD_TERM = '\\1(.)', '\\1(.)'`).FindStringSubmatch(string(lib))
	require.NotNil(t, line, "lib.lua has no line defining the election's FIELD_ names")
	for i, f := range []string{FieldValue, FieldTerm} {
		assert.Equal(t, f, "\x01"+line[i+1])
	}
	line = regexp.MustCompile(`(?m)^local FIELD_LONE = '\\1(.)'`).FindStringSubmatch(string(lib))
	require.NotNil(t, line, "lib.lua has no line defining FIELD_LONE")
	assert.Equal(t, FieldLone, "\x01"+line[1])
	line = regexp.MustCompile(`(?m)^local FIELD_LABEL, FIELD_SINCE = '\\1(.)', '\\1(.)'`).FindStringSubmatch(string(lib))
	require.NotNil(t, line, "lib.lua has no line defining the label's FIELD_ names")
	assert.Equal(t, FieldLabel, "\x01"+line[1])
	assert.Equal(t, FieldSince, "\x01"+line[2])
	literal := regexp.MustCompile(`'\\1[a-z]'`)
	files, err := fs.Glob(luaFiles, "lua/*.lua")
	require.NoError(t, err)
	for _, f := range files {
		src, err := luaFiles.ReadFile(f)
		require.NoError(t, err)
		n := len(literal.FindAllString(string(src), -1))
		if f == "lua/lib.lua" {
			n -= 10
		}
		assert.Zero(t, n, "%s spells a special field itself: use lib.lua's FIELD_ names", f)
	}
}
