package offline

import (
	"errors"
	"strconv"
	"strings"
)

// Object is a parsed JSON object: its member names in document order and their values.
// Values are nil (null), bool, float64 (every JSON number, as JavaScript reads it),
// string, []any and *Object.
type Object struct {
	Names  []string
	Values map[string]any
}

// Get returns the member's value and whether the object has it.
func (o *Object) Get(name string) (any, bool) {
	v, ok := o.Values[name]
	return v, ok
}

// Has reports whether the object has the member.
func (o *Object) Has(name string) bool {
	_, ok := o.Values[name]
	return ok
}

// Without returns a copy of the object without one member (a shallow copy).
func (o *Object) Without(name string) *Object {
	out := &Object{Values: make(map[string]any, len(o.Values))}
	for _, n := range o.Names {
		if n == name {
			continue
		}
		out.Names = append(out.Names, n)
		out.Values[n] = o.Values[n]
	}
	return out
}

// CaseVariantMembers returns the first two member names of the object that differ only in
// the case of ASCII letters ("x" and "X"), and whether it has such. A reader that matches
// names without case, as encoding/json does, takes one of them where an exact reader takes
// the other, so documents that several readers must read alike refuse them.
func CaseVariantMembers(o *Object) (first, second string, found bool) {
	seen := make(map[string]string, len(o.Names))
	for _, name := range o.Names {
		folded := strings.Map(func(r rune) rune {
			if r >= 'A' && r <= 'Z' {
				return r + ('a' - 'A')
			}
			return r
		}, name)
		if earlier, twice := seen[folded]; twice {
			return earlier, name, true
		}
		seen[folded] = name
	}
	return "", "", false
}

var errNotJSON = errors.New("not JSON")

// ParseJSON parses JSON text (RFC 8259) as JavaScript's JSON.parse does: numbers become
// float64, escapes of lone surrogates are kept (see text.go), and a member repeated in
// one object keeps its first position and its last value. It also returns the first
// member name repeated in any object, in text order, or "" and false when none is; a
// signed format refuses such text, since parsers disagree on which copy counts.
func ParseJSON(text []byte) (value any, repeated string, hasRepeated bool, err error) {
	p := &parser{s: text}
	p.space()
	value, err = p.value(0)
	if err != nil {
		return nil, "", false, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, "", false, errNotJSON
	}
	return value, p.repeated, p.hasRepeated, nil
}

type parser struct {
	s           []byte
	i           int
	repeated    string
	hasRepeated bool
}

// maxDepth keeps a hostile file from exhausting the stack; JSON.parse has a limit too.
const maxDepth = 1000

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) literal(word string, v any) (any, error) {
	if len(p.s)-p.i < len(word) || string(p.s[p.i:p.i+len(word)]) != word {
		return nil, errNotJSON
	}
	p.i += len(word)
	return v, nil
}

func (p *parser) value(depth int) (any, error) {
	if p.i >= len(p.s) {
		return nil, errNotJSON
	}
	switch c := p.s[p.i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, errNotJSON
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= maxDepth {
			return nil, errNotJSON
		}
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == 't':
		return p.literal("true", true)
	case c == 'f':
		return p.literal("false", false)
	case c == 'n':
		return p.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, errNotJSON
}

func (p *parser) object(depth int) (any, error) {
	p.i++ // {
	obj := &Object{Values: map[string]any{}}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return obj, nil
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, errNotJSON
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, errNotJSON
		}
		p.i++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		key := name.(string)
		if _, seen := obj.Values[key]; seen {
			if !p.hasRepeated {
				p.repeated, p.hasRepeated = key, true
			}
		} else {
			obj.Names = append(obj.Names, key)
		}
		obj.Values[key] = v
		if closed, err := p.afterMember('}'); err != nil {
			return nil, err
		} else if closed {
			return obj, nil
		}
	}
}

func (p *parser) array(depth int) (any, error) {
	p.i++ // [
	out := []any{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return out, nil
	}
	for {
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if closed, err := p.afterMember(']'); err != nil {
			return nil, err
		} else if closed {
			return out, nil
		}
	}
}

// afterMember reads what follows an object member or array element: a comma (more to come)
// or the closing bracket.
func (p *parser) afterMember(closer byte) (closed bool, err error) {
	p.space()
	if p.i >= len(p.s) {
		return false, errNotJSON
	}
	switch p.s[p.i] {
	case ',':
		p.i++
		return false, nil
	case closer:
		p.i++
		return true, nil
	default:
		return false, errNotJSON
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

func (p *parser) string() (any, error) {
	p.i++ // "
	var out []byte
	for {
		if p.i >= len(p.s) {
			return nil, errNotJSON
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return nil, errNotJSON
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		// An escape.
		if p.i+1 >= len(p.s) {
			return nil, errNotJSON
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.s[p.i:])
			if !ok {
				return nil, errNotJSON
			}
			p.i += 4
			if r >= 0xD800 && r <= 0xDBFF && p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
				if lo, ok := hex4(p.s[p.i+2:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					p.i += 6
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				}
			}
			out = appendWTF8(out, r)
		default:
			return nil, errNotJSON
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.s) {
		return nil, errNotJSON
	}
	if p.s[p.i] == '0' {
		p.i++
	} else if isDigit(p.s[p.i]) {
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
	} else {
		return nil, errNotJSON
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.i >= len(p.s) || !isDigit(p.s[p.i]) {
			return nil, errNotJSON
		}
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.s) || !isDigit(p.s[p.i]) {
			return nil, errNotJSON
		}
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
	}
	// Correctly rounded, as JavaScript's; out of range is ±Infinity there too.
	f, err := strconv.ParseFloat(string(p.s[start:p.i]), 64)
	if err != nil {
		var numErr *strconv.NumError
		if !errors.As(err, &numErr) || numErr.Err != strconv.ErrRange {
			return nil, errNotJSON
		}
	}
	return f, nil
}
