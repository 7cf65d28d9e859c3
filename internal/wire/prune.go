package wire

import (
	"regexp"
	"strings"
)

// A helper function in a helper file: the comment lines right above "local function <name>(",
// that line, and the lines up to the first "end" at the start of a line.
var helperStart = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)

// helper is one helper function's lines in a helper file.
type helper struct {
	name       string
	file       int // index in the parts given to prune
	from, upto int // its lines (comments above it included): [from, upto)
}

// prune drops from the helper files, parts[:len(parts)-1], the helper functions that the
// script (the last part) does not call, directly or through a helper it keeps. Every helper
// is created anew on each run of a script, so one that a script never calls is work Redis
// does for nothing. Comment lines do not count; a name in a comment at the end of a line of
// code keeps its helper: keeping one too many costs a little, dropping one used would break
// the script.
func prune(parts []string) {
	lines := make([][]string, len(parts))
	var helpers []helper
	for i := range parts[:len(parts)-1] {
		lines[i] = strings.Split(parts[i], "\n")
		for j := 0; j < len(lines[i]); j++ {
			m := helperStart.FindStringSubmatch(lines[i][j])
			if m == nil {
				continue
			}
			h := helper{name: m[1], file: i, from: j}
			for h.from > 0 && strings.HasPrefix(lines[i][h.from-1], "--") {
				h.from--
			}
			for j < len(lines[i]) && lines[i][j] != "end" {
				j++
			}
			if j == len(lines[i]) {
				panic("wire: helper " + m[1] + " has no end")
			}
			h.upto = j + 1
			helpers = append(helpers, h)
		}
	}
	body := func(h helper) string { return code(lines[h.file][h.from:h.upto]) }
	keep := make([]bool, len(helpers))
	used := []string{code(strings.Split(parts[len(parts)-1], "\n"))}
	for len(used) > 0 {
		text := used[len(used)-1]
		used = used[:len(used)-1]
		for k, h := range helpers {
			if !keep[k] && mentions(text, h.name) {
				keep[k] = true
				used = append(used, body(h))
			}
		}
	}
	for k := len(helpers) - 1; k >= 0; k-- {
		if h := helpers[k]; !keep[k] {
			f := lines[h.file]
			lines[h.file] = append(f[:h.from:h.from], f[h.upto:]...)
		}
	}
	for i := range parts[:len(parts)-1] {
		parts[i] = strings.Join(lines[i], "\n")
	}
}

// code returns Lua lines without their comment lines.
func code(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// mentions reports whether Lua text has name as a whole word.
func mentions(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(name)
		if (j == 0 || !isWordByte(text[j-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		i = end
	}
}

func isWordByte(b byte) bool {
	return b == '_' || '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}
