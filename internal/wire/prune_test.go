package wire

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Each script defines only the helpers it calls (see prune): every top-level helper of a
// composed script is named in its code outside its own definition.
func TestScriptsDefineOnlyUsedHelpers(t *testing.T) {
	def := regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)
	for file, src := range sources {
		var lines []string
		for _, l := range strings.Split(src, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				lines = append(lines, l)
			}
		}
		text := strings.Join(lines, "\n")
		for _, m := range def.FindAllStringSubmatch(text, -1) {
			rest := strings.Replace(text, m[0], "", 1)
			used := regexp.MustCompile(`\b` + m[1] + `\b`).MatchString(rest)
			assert.True(t, used, "%s defines %s and never calls it", file, m[1])
		}
	}
	assert.NotContains(t, sources["release.lua"], "local function now(", "release.lua reads no clock")
	assert.Contains(t, sources["release.lua"], classicPublish)
}
