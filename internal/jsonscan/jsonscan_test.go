package jsonscan

import "testing"

func TestSkipSpaceAndIsBlank(t *testing.T) {
	for _, c := range []struct {
		s     string
		i     int
		want  int
		blank bool
	}{
		{"", 0, 0, true}, {" \t\r\n", 0, 4, true}, {" x ", 0, 1, false}, {"x  ", 1, 3, false}, {"\u00a0", 0, 0, false}, {"\f", 0, 0, false},
	} {
		if got := SkipSpace(c.s, c.i); got != c.want {
			t.Errorf("SkipSpace(%q, %d) = %d, want %d", c.s, c.i, got, c.want)
		}
		if got := IsBlank(c.s); got != c.blank {
			t.Errorf("IsBlank(%q) = %v, want %v", c.s, got, c.blank)
		}
	}
}

func TestPlainString(t *testing.T) {
	for _, c := range []struct {
		s, want string
		next    int
		ok      bool
	}{
		{`"abc",`, "abc", 5, true},
		{`""`, "", 2, true},
		{`"日本"`, "日本", 8, true},
		{`"a\"b"`, "", 0, false},
		{`"a\u0062"`, "", 0, false},
		{"\"a\x01\"", "", 0, false},
		{"\"a\xff\"", "", 0, false},
		{`"abc`, "", 0, false},
		{`abc"`, "", 0, false},
		{``, "", 0, false},
	} {
		got, next, ok := PlainString(c.s, 0)
		if got != c.want || next != c.next || ok != c.ok {
			t.Errorf("PlainString(%q) = %q, %d, %v; want %q, %d, %v", c.s, got, next, ok, c.want, c.next, c.ok)
		}
	}
}

func TestStringEnd(t *testing.T) {
	for _, c := range []struct {
		s    string
		want int
	}{
		{`"ab"x`, 3}, {`"a\"b"`, 5}, {`"a\\"`, 4}, {`""`, 1}, {`"ab`, 3}, {`"a\`, 4},
	} {
		if got := StringEnd(c.s, 0); got != c.want {
			t.Errorf("StringEnd(%q) = %d, want %d", c.s, got, c.want)
		}
		if got := StringEnd(c.s, 0); got < len(c.s) && c.s[got] != '"' {
			t.Errorf("StringEnd(%q) = %d, which is not a quote", c.s, got)
		}
	}
}
