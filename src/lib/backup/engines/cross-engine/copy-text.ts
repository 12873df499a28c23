/**
 * PostgreSQL's COPY text format, one field at a time (PostgreSQL 15 docs, COPY, "Text
 * Format"): fields are separated by a tab, rows end with a newline, `\N` is NULL, and a
 * backslash starts an escape. Writing, only what must be escaped is: the backslash itself,
 * newline, carriage return and tab. Reading accepts every escape the format defines.
 */

export const COPY_NULL = '\\N';

const MUST_ESCAPE = /[\\\n\r\t]/;
const ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** A string as one COPY text field. */
export function encodeCopyField(value: string): string {
  return MUST_ESCAPE.test(value) ? value.replace(/[\\\n\r\t]/g, (char) => ESCAPES[char]!) : value;
}

const SIMPLE: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * One COPY text field as a string, or null for `\N`. The octal and hex escapes stand for
 * bytes, so a field holding them is decoded from bytes as UTF-8, and refused when those
 * bytes are not UTF-8 (PostgreSQL itself would refuse them in a UTF8 database).
 */
export function decodeCopyField(field: string): string | null {
  if (field === COPY_NULL) return null;
  if (!field.includes('\\')) return field;
  const bytes: number[] = [];
  let text = '';
  let byteEscapes = false;
  const flush = () => {
    if (text) bytes.push(...Buffer.from(text, 'utf8'));
    text = '';
  };
  for (let i = 0; i < field.length; i += 1) {
    const char = field[i]!;
    if (char !== '\\' || i + 1 === field.length) {
      text += char;
      continue;
    }
    const next = field[i + 1]!;
    i += 1;
    if (SIMPLE[next] !== undefined) {
      text += SIMPLE[next];
    } else if (next >= '0' && next <= '7') {
      const digits = /^[0-7]{1,3}/.exec(field.slice(i, i + 3))![0];
      flush();
      bytes.push(Number.parseInt(digits, 8) & 0xff);
      byteEscapes = true;
      i += digits.length - 1;
    } else if (next === 'x' && /[0-9A-Fa-f]/.test(field[i + 1] ?? '')) {
      const digits = /^[0-9A-Fa-f]{1,2}/.exec(field.slice(i + 1, i + 3))![0];
      flush();
      bytes.push(Number.parseInt(digits, 16));
      byteEscapes = true;
      i += digits.length;
    } else {
      text += next;
    }
  }
  if (!byteEscapes) return text;
  flush();
  return strictUtf8.decode(Uint8Array.from(bytes));
}
