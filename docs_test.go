package rlock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// docFiles are the repository's Markdown files that a reader follows links through.
func docFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md", "bench/*.md", "otel/*.md", "cmd/rlock/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	return files
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	mdFence   = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```$")
)

// slug is the anchor GitHub gives a heading: lower case, punctuation dropped but for '-' and
// '_', spaces made '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of the headings of a Markdown file (outside code blocks).
func anchors(text string) map[string]bool {
	text = mdFence.ReplaceAllString(text, "")
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(text, -1) {
		out[slug(m[1])] = true
	}
	return out
}

// TestDocs_links: every relative link in the Markdown files names a file or directory that
// exists, and every #anchor a heading of its file.
func TestDocs_links(t *testing.T) {
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := mdFence.ReplaceAllString(string(b), "")
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := file
			if path != "" {
				target = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s: link %q: %v", file, link, err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			tb, err := os.ReadFile(target)
			if err != nil {
				t.Errorf("%s: link %q: %v", file, link, err)
				continue
			}
			if !anchors(string(tb))[anchor] {
				t.Errorf("%s: link %q: no heading #%s in %s", file, link, anchor, target)
			}
		}
	}
}

// exampleBodies returns the bodies of the Example functions of a Go file (their "// Output:"
// comment aside, one tab of indentation removed), each mapped to its function's name.
func exampleBodies(t *testing.T, path string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		if i := strings.Index(body, "\t// Output:"); i >= 0 {
			body = body[:i]
		}
		lines := strings.Split(strings.Trim(body, "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, "\t")
		}
		bodies[strings.TrimSpace(strings.Join(lines, "\n"))] = fn.Name.Name
	}
	return bodies
}

// TestDocs_goBlocksAreExamples: every Go code block of the README, docs/ and the otel README
// is the body of an Example function (example_test.go beside it; docs/: the root's), so the
// tests run it.
func TestDocs_goBlocksAreExamples(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for examples, files := range map[string][]string{
		"example_test.go":      append([]string{"README.md"}, docs...),
		"otel/example_test.go": {"otel/README.md"},
	} {
		bodies := exampleBodies(t, examples)
		blocks := 0
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mdFence.FindAllStringSubmatch(string(b), -1) {
				if m[1] != "go" {
					continue
				}
				blocks++
				if _, ok := bodies[strings.TrimSpace(m[2])]; !ok {
					t.Errorf("%s: a Go block is not the body of an Example in %s:\n%s", file, examples, m[2])
				}
			}
		}
		if blocks == 0 {
			t.Errorf("no Go block found in %v", files)
		}
	}
}
