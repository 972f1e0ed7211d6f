package resultscan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sample4K is 4 KiB of ordinary Go source: the common case of a file a
// tool read.
func sample4K(b *testing.B) string {
	src, err := os.ReadFile(filepath.Join(goroot(b), "src", "net", "http", "server.go"))
	if err != nil {
		b.Fatal(err)
	}
	return string(src[20000 : 20000+4096])
}

func benchScan(b *testing.B, cfg Config, text string) {
	s := mustNew(b, cfg)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.Scan(ctx, text); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkScan4KSource(b *testing.B) {
	benchScan(b, Config{Detectors: []string{SetSecrets}}, sample4K(b))
}

// A 4 KiB result holding secrets: the redacting path.
func BenchmarkScan4KWithSecrets(b *testing.B) {
	text := sample4K(b)[:3000] + "\n" + awsKeyID + " " + githubPAT + "\npostgres://u:" + dbPassword + "@h/db\n" + jwt + "\n"
	text += strings.Repeat("x", 4096-len(text))
	benchScan(b, Config{Detectors: []string{SetSecrets}}, text)
}

// Every built-in rule and a custom pattern and removal.
func BenchmarkScan4KAllRules(b *testing.B) {
	benchScan(b, Config{
		Detectors:   []string{SetSecrets, SetPersonalData},
		Patterns:    []Pattern{{Name: "ticket", Regex: `TICKET-\d+`}},
		RemoveLines: []Pattern{{Name: "cookie", Regex: `^Set-Cookie:`}},
	}, sample4K(b))
}

func BenchmarkScan1MSource(b *testing.B) {
	s := sample4K(b)
	benchScan(b, Config{Detectors: []string{SetSecrets}}, strings.Repeat(s, 256))
}

// BenchmarkScan4KJSONPaths removes two paths from a 4 KB JSON document.
func BenchmarkScan4KJSONPaths(b *testing.B) {
	var doc strings.Builder
	doc.WriteString(`{"items":[`)
	for i := 0; doc.Len() < 4<<10; i++ {
		if i > 0 {
			doc.WriteString(",")
		}
		fmt.Fprintf(&doc, `{"id":%d,"name":"item %d","owner":{"email":"u%d@example.com","password":"pw%d"}}`, i, i, i, i)
	}
	doc.WriteString(`]}`)
	s := mustNew(b, Config{RemovePaths: []PathRule{{Name: "pw", Path: "$..password"}, {Name: "email", Path: "$.items[*].owner.email"}}})
	text := doc.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if o, err := s.Scan(context.Background(), text); err != nil || o.Withheld {
			b.Fatal(err, o.Withheld)
		}
	}
}
