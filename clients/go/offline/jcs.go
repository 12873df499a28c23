package offline

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Canonicalize writes a parsed JSON value (see ParseJSON) in the JSON Canonicalization
// Scheme of RFC 8785: no whitespace, object members sorted by their names as UTF-16 code
// units, strings with the minimal escaping of ECMAScript JSON.stringify, numbers in
// ECMAScript's shortest form. It fails for a number JSON cannot hold (NaN, ±Infinity) and
// for a string with a lone surrogate (an escape such as \ud800 without its pair), as
// RFC 8785 requires and the reference's canonicalize package does.
func Canonicalize(value any) ([]byte, error) {
	var b []byte
	return appendCanonical(b, value)
}

func appendCanonical(b []byte, value any) ([]byte, error) {
	switch v := value.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("canonical JSON has no form for the number %v", v)
		}
		return append(b, FormatNumber(v)...), nil
	case int:
		return append(b, strconv.Itoa(v)...), nil
	case int64:
		return appendCanonical(b, float64(v))
	case string:
		if hasLoneSurrogate(v) {
			return nil, fmt.Errorf("the string %s holds a lone surrogate, which canonical JSON does not allow", Quote(v))
		}
		return AppendQuoted(b, v), nil
	case []any:
		b = append(b, '[')
		for i, item := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendCanonical(b, item); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case *Object:
		names := append([]string(nil), v.Names...)
		sort.SliceStable(names, func(i, j int) bool { return compareUTF16(names[i], names[j]) < 0 })
		b = append(b, '{')
		for i, name := range names {
			if i > 0 {
				b = append(b, ',')
			}
			if hasLoneSurrogate(name) {
				return nil, fmt.Errorf("the member name %s holds a lone surrogate, which canonical JSON does not allow", Quote(name))
			}
			b = AppendQuoted(b, name)
			b = append(b, ':')
			var err error
			if b, err = appendCanonical(b, v.Values[name]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("canonical JSON: unsupported value of type %T", value)
}

const lowerHex = "0123456789abcdef"

// AppendQuoted appends s as ECMAScript JSON.stringify writes a string: `"` and `\`
// escaped, \b \t \n \f \r, other controls below U+0020 and lone surrogates as \u00xx /
// \udxxx (lower-case hex), every other character as itself in UTF-8.
func AppendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, n := decodeWTF8(s[i:])
		switch {
		case r == '"':
			b = append(b, '\\', '"')
		case r == '\\':
			b = append(b, '\\', '\\')
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r < 0x20 || (r >= 0xD800 && r <= 0xDFFF):
			b = append(b, '\\', 'u', lowerHex[r>>12&0xF], lowerHex[r>>8&0xF], lowerHex[r>>4&0xF], lowerHex[r&0xF])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// Quote is JSON.stringify of a string.
func Quote(s string) string { return string(AppendQuoted(nil, s)) }

// FormatNumber is ECMAScript's Number::toString(x), the number form of RFC 8785:
// 25, 0 (also for -0), 1.5, 1e+21, 1e-7.
func FormatNumber(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case x == 0:
		return "0"
	case math.IsInf(x, 1):
		return "Infinity"
	case math.IsInf(x, -1):
		return "-Infinity"
	case x < 0:
		return "-" + FormatNumber(-x)
	}
	// The shortest digits that round-trip, and the decimal exponent.
	e := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mantissa, expText, _ := strings.Cut(e, "e")
	digits := strings.Replace(mantissa, ".", "", 1)
	exp, _ := strconv.Atoi(expText)
	k, n := len(digits), exp+1
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	out := digits[:1]
	if k > 1 {
		out += "." + digits[1:]
	}
	if n-1 >= 0 {
		return out + "e+" + strconv.Itoa(n-1)
	}
	return out + "e-" + strconv.Itoa(1-n)
}
