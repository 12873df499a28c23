package offline

import (
	"math"
	"testing"
)

func TestCanonicalizeStrings(t *testing.T) {
	cases := map[string]string{
		"plain":              `"plain"`,
		"\"\\":               `"\"\\"`,
		"\b\t\n\f\r":         `"\b\t\n\f\r"`,
		"\x00\x01\x1f\x7f":   `"\u0000\u0001\u001f` + "\x7f\"",
		"</script>&'":        `"</script>&'"`,
		"é Ω 🚀 \u2028\u2029": "\"é Ω 🚀 \u2028\u2029\"",
		"\xed\xa0\x80":       `"\ud800"`, // a lone surrogate kept from a \ud800 escape
		"a\xed\xbf\xbfb":     `"a\udfffb"`,
	}
	for in, want := range cases {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestParseThenCanonicalize(t *testing.T) {
	cases := map[string]string{
		`{"b":1,"a":[true,false,null,"x"],"c":{"z":0,"y":-0}}`:                                                  `{"a":[true,false,null,"x"],"b":1,"c":{"y":0,"z":0}}`,
		` { "a" : 25.0 , "b" : 2.5e1 , "c" : 1E21 , "d" : 1e-7 , "e" : 0.000001, "f": 123456789012345680000 } `: `{"a":25,"b":25,"c":1e+21,"d":1e-7,"e":0.000001,"f":123456789012345680000}`,
		`["\u00e9\u0041\/\ud83d\ude80"]`:                                                                        `["éA/🚀"]`,
		// Member names sort by UTF-16 code units: U+1F680 (D83D...) before U+E000, "a" before "aa".
		`{"\ue000":1,"🚀":2,"aa":3,"a":4,"B":5}`: `{"B":5,"a":4,"aa":3,"🚀":2,"` + "\ue000" + `":1}`,
		`{}`: `{}`,
		`[]`: `[]`,
	}
	for in, want := range cases {
		v, _, _, err := ParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got, err := Canonicalize(v)
		if err != nil || string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s (%v)", in, got, want, err)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `{"a":1,}`, `[1,]`, `{"a" 1}`, `{a:1}`, `'a'`, `"a`, "\"a\x01\"", `"\x"`, `"\u12"`,
		`01`, `1.`, `.5`, `+1`, `1e`, `-`, `NaN`, `Infinity`, `tru`, `nul`, `[1] [2]`, `{"a":1}}`,
	} {
		if _, _, _, err := ParseJSON([]byte(in)); err == nil {
			t.Errorf("%q was accepted", in)
		}
	}
	deep := make([]byte, 0, 3000)
	for i := 0; i < 1500; i++ {
		deep = append(deep, '[')
	}
	if _, _, _, err := ParseJSON(deep); err == nil {
		t.Error("unbounded nesting was accepted")
	}
}

func TestRepeatedMembers(t *testing.T) {
	v, name, repeated, err := ParseJSON([]byte(`{"a":1,"b":{"c":1,"c":2},"a":3}`))
	if err != nil || !repeated || name != "c" {
		t.Fatalf("%v %q %v", err, name, repeated)
	}
	// As JSON.parse: the first position, the last value.
	o := v.(*Object)
	if len(o.Names) != 2 || o.Values["a"] != 3.0 || o.Values["b"].(*Object).Values["c"] != 2.0 {
		t.Fatalf("%+v", o)
	}
	if _, _, repeated, _ := ParseJSON([]byte(`[{"a":1},{"a":2}]`)); repeated {
		t.Fatal("the same name in two objects is not a repeat")
	}
}

func TestFormatNumber(t *testing.T) {
	cases := map[float64]string{
		0: "0", math.Copysign(0, -1): "0", 1: "1", -1: "-1", 25: "25", 1.5: "1.5", 0.1: "0.1",
		1e21: "1e+21", 1e20: "100000000000000000000", 1e-7: "1e-7", 1e-6: "0.000001", 123e-20: "1.23e-18",
		9007199254740991: "9007199254740991", 5e-324: "5e-324", 1.7976931348623157e308: "1.7976931348623157e+308",
		math.Inf(1): "Infinity", 0.000001234: "0.000001234", 123.456: "123.456",
	}
	for in, want := range cases {
		if got := FormatNumber(in); got != want {
			t.Errorf("FormatNumber(%v) = %s, want %s", in, got, want)
		}
	}
	if _, err := Canonicalize(math.Inf(1)); err == nil {
		t.Error("Infinity was canonicalised")
	}
}

func TestLoneSurrogates(t *testing.T) {
	// Parsed and kept (JSON.parse keeps them), written back as JSON.stringify would, but
	// refused by the canonical form (RFC 8785; the reference's canonicalize throws).
	for _, in := range []string{`["\ud800x"]`, `["\uDC00"]`, `{"\ud83d":1}`, `["\ude80\ud83d"]`} {
		v, _, _, err := ParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if _, err := Canonicalize(v); err == nil {
			t.Errorf("%s was canonicalised", in)
		}
	}
	v, _, _, _ := ParseJSON([]byte(`"\ud800x\uDC00"`))
	if got := Quote(v.(string)); got != `"\ud800x\udc00"` {
		t.Errorf("Quote: %s", got)
	}
	// A well-formed pair written as escapes is one character.
	v, _, _, _ = ParseJSON([]byte(`"\ud83d\ude80"`))
	if v.(string) != "🚀" {
		t.Errorf("pair: %q", v)
	}
}

func TestStrictBase64(t *testing.T) {
	for in, want := range map[string]bool{
		"": true, "QQ==": true, "QUI=": true, "QUJD": true,
		"QR==": false, "QUJ=": false, "QQ=": false, "QQ": false, "Q===": false, "QQ==QQ==": false,
		"QU\nJD": false, "QU JD": false, "QU-D": false, "QU_D": false, "=QQ=": false,
	} {
		if _, ok := DecodeBase64Strict(in); ok != want {
			t.Errorf("DecodeBase64Strict(%q) = %v", in, ok)
		}
	}
}
