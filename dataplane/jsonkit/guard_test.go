package jsonkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The import paths only this package may use: unsafe views of JSON text, and the token level of the JSON
// library (other packages decode and encode with its json package, or through this one).
var guardedImports = []string{"unsafe", "github.com/go-json-experiment/json/jsontext"}

// pending are the files outside this package that still read or inspect JSON by hand, each with why it is
// not folded in yet. The list only shrinks: a listed file that no longer trips the guard fails the test.
var pending = map[string]string{}

// notJSON are the files whose structural-byte tests are about something else than JSON; they are not
// checked.
var notJSON = map[string]string{
	"dataplane/admission/shards.go": "Redis hash-tag braces in a key",
}

// jsonStructural are the bytes whose comparison gives hand-written JSON scanning away.
const jsonStructural = `{}[]"\`

// TestOnlyJSONKitReadsJSONByHand parses every non-test Go file of the module outside this package and the
// generated code, and fails when one imports a guarded package or compares a byte or rune with a JSON
// structural character ('{', '}', '[', ']', '"', '\\') in ==, != or a switch case, or passes one to a
// bytes/strings search: hand-written JSON reading, writing or validating belongs here.
func TestOnlyJSONKitReadsJSONByHand(t *testing.T) {
	root := moduleRoot(t)
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	var files int
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			if path == self || rel == filepath.Join("shared", "gen") || d.Name() == "testdata" || d.Name() == "node_modules" ||
				(strings.HasPrefix(d.Name(), ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if _, ok := notJSON[rel]; ok {
			seen[rel] = true
			return nil
		}
		found := handJSON(t, path)
		if _, ok := pending[rel]; ok {
			if len(found) == 0 {
				t.Errorf("%s no longer reads JSON by hand: remove it from pending", rel)
			}
			seen[rel] = true
			return nil
		}
		for _, v := range found {
			t.Errorf("%s:%s", rel, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for f := range pending {
		if !seen[f] {
			t.Errorf("pending file %s does not exist: remove it from pending", f)
		}
	}
	for f := range notJSON {
		if !seen[f] {
			t.Errorf("file %s does not exist: remove it from notJSON", f)
		}
	}
	if files < 100 {
		t.Fatalf("only %d files checked under %s", files, root)
	}
}

// handJSON lists the guarded imports and structural-byte tests of one file ("line: what").
func handJSON(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	var out []string
	at := func(n ast.Node, what string) { out = append(out, strconv.Itoa(fset.Position(n.Pos()).Line)+": "+what) }
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); slices.Contains(guardedImports, p) {
			at(im, "imports "+p)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if n.Op == token.EQL || n.Op == token.NEQ {
				if c, ok := structural(n.X); ok {
					at(n, "compares with "+c)
				} else if c, ok := structural(n.Y); ok {
					at(n, "compares with "+c)
				}
			}
		case *ast.CaseClause:
			for _, e := range n.List {
				if c, ok := structural(e); ok {
					at(e, "switch case "+c)
				}
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "bytes" || pkg.Name == "strings") {
					for _, a := range n.Args {
						if c, ok := structural(a); ok {
							at(n, pkg.Name+"."+sel.Sel.Name+" of "+c)
						}
					}
				}
			}
		}
		return true
	})
	return out
}

// structural reports whether e is a character literal of a JSON structural byte.
func structural(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.CHAR {
		return "", false
	}
	v, _, _, err := strconv.UnquoteChar(strings.Trim(lit.Value, "'"), '\'')
	if err != nil || v > 0x7f || !strings.ContainsRune(jsonStructural, v) {
		return "", false
	}
	return lit.Value, true
}

// moduleRoot is the directory of the go.mod above the working directory.
func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}
