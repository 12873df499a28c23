import assert from 'node:assert/strict';
import { cellText, csvField, csvRecord, defuseFormula, parseCsv, restoreFormula } from '../../src/lib/csv.js';
import { LicenseServerError } from '../../src/lib/errors.js';
import { prng } from '../support/prng.js';

const malformed = (line: number) => (error: unknown) => error instanceof LicenseServerError && error.code === 'CSV_MALFORMED' && error.message.startsWith(`line ${line}:`);

describe('CSV (RFC 4180) writer and reader', () => {
  it('writes records with CRLF, quoting only fields with a comma, quote, CR or LF, quotes doubled', () => {
    assert.equal(csvRecord(['aaa', 'bbb', 'ccc']), 'aaa,bbb,ccc\r\n');
    assert.equal(csvRecord(['a,b', 'say "hi"', 'two\r\nlines', 'lf\nonly', 'cr\ronly', '']), '"a,b","say ""hi""","two\r\nlines","lf\nonly","cr\ronly",\r\n');
    assert.equal(csvRecord(['']), '\r\n');
    assert.equal(csvRecord(['Müller GmbH', '東京', 'x y']), 'Müller GmbH,東京,x y\r\n', 'UTF-8 text and spaces as they are');
    assert.equal(csvField('"'), '""""');
  });

  it('defuses formulas: a field starting with = + - @ tab or CR (after any quotes) gets one leading quote, and the reader takes it off again', () => {
    const cases: Array<[string, string]> = [
      ['=HYPERLINK("http://x","y")', '"\'=HYPERLINK(""http://x"",""y"")"'],
      ['=1+1', "'=1+1"],
      ['+41 44 000', "'+41 44 000"],
      ['-5', "'-5"],
      ['@SUM(A1)', "'@SUM(A1)"],
      ['\tcmd', "'\tcmd"],
      ['\rcmd', '"\'\rcmd"'],
      ["'=x", "''=x"],
      ["''-x", "'''-x"],
      ["'", "'"],
      ["'a", "'a"],
      ['a=b', 'a=b'],
      ['2027-01-31', '2027-01-31'],
      [' =x', ' =x'],
    ];
    for (const [value, written] of cases) {
      assert.equal(csvField(value), written, JSON.stringify(value));
      assert.deepEqual(parseCsv(`${written}\r\n`).map((record) => record.fields), [[value]], `read back ${JSON.stringify(written)}`);
      assert.equal(restoreFormula(defuseFormula(value)), value);
    }
  });

  it('reads the examples of RFC 4180 section 2', () => {
    assert.deepEqual(parseCsv('aaa,bbb,ccc\r\nzzz,yyy,xxx\r\n'), [{ line: 1, fields: ['aaa', 'bbb', 'ccc'] }, { line: 2, fields: ['zzz', 'yyy', 'xxx'] }]);
    assert.deepEqual(parseCsv('aaa,bbb,ccc\r\nzzz,yyy,xxx').map((r) => r.fields), [['aaa', 'bbb', 'ccc'], ['zzz', 'yyy', 'xxx']], 'the last line end is optional');
    assert.deepEqual(parseCsv('"aaa","bbb","ccc"\r\n').map((r) => r.fields), [['aaa', 'bbb', 'ccc']]);
    assert.deepEqual(parseCsv('"aaa","b\r\nbb","ccc"\r\nzzz,yyy,xxx\r\n'), [{ line: 1, fields: ['aaa', 'b\r\nbb', 'ccc'] }, { line: 3, fields: ['zzz', 'yyy', 'xxx'] }]);
    assert.deepEqual(parseCsv('"aaa","b""bb","ccc"\r\n').map((r) => r.fields), [['aaa', 'b"bb', 'ccc']]);
  });

  it('takes LF and lone CR line ends, a leading BOM, empty fields and blank lines, and counts physical lines', () => {
    assert.deepEqual(parseCsv('a,b\nc,d\n'), [{ line: 1, fields: ['a', 'b'] }, { line: 2, fields: ['c', 'd'] }]);
    assert.deepEqual(parseCsv('a,b\rc,d'), [{ line: 1, fields: ['a', 'b'] }, { line: 2, fields: ['c', 'd'] }]);
    assert.deepEqual(parseCsv('\uFEFFname\r\nx\r\n').map((r) => r.fields), [['name'], ['x']]);
    assert.deepEqual(parseCsv('a,,\r\n,,\r\n').map((r) => r.fields), [['a', '', ''], ['', '', '']]);
    assert.deepEqual(parseCsv('h\r\n\r\nx\r\n'), [{ line: 1, fields: ['h'] }, { line: 2, fields: [''] }, { line: 3, fields: ['x'] }]);
    assert.deepEqual(parseCsv('h\n"one\ntwo\r\nthree\rfour"\nnext\n').map((r) => r.line), [1, 2, 6], 'a quoted field over LF, CRLF and CR line ends');
    assert.deepEqual(parseCsv(''), []);
    assert.deepEqual(parseCsv('\uFEFF'), []);
  });

  it('refuses what RFC 4180 does not allow, naming the line', () => {
    assert.throws(() => parseCsv('a,b\r\nc"d,e\r\n'), malformed(2));
    assert.throws(() => parseCsv('a\r\nb\r\n"open\r\nstill open'), malformed(3));
    assert.throws(() => parseCsv('a\r\n"x\r\ny"z\r\n'), malformed(3));
  });

  it('reads back every record it writes (10,000 random records of awkward characters)', () => {
    const random = prng(0xc5f);
    const alphabet = ['a', 'Z', '0', ' ', ',', '"', "'", '\r', '\n', '\r\n', '=', '+', '-', '@', '\t', 'é', '😀', ';'];
    for (let n = 0; n < 10_000; n += 1) {
      const fields = Array.from({ length: 1 + Math.floor(random() * 4) }, () => Array.from({ length: Math.floor(random() * 6) }, () => alphabet[Math.floor(random() * alphabet.length)]).join(''));
      // A record of one empty field is a blank line, which the reader gives as [''] too.
      const text = csvRecord(fields) + csvRecord(['end']);
      const records = parseCsv(text);
      assert.deepEqual(records.map((record) => record.fields), [fields, ['end']], JSON.stringify(fields));
      assert.equal(records[1]!.line, 1 + (text.slice(0, text.length - 5).match(/\r\n|\r|\n/g)?.length ?? 0), JSON.stringify(fields));
    }
  });

  it('gives JSON values their cell text: null empty, numbers and booleans as JSON, nested values as compact JSON', () => {
    assert.equal(cellText(null), '');
    assert.equal(cellText(undefined), '');
    assert.equal(cellText('x'), 'x');
    assert.equal(cellText(0), '0');
    assert.equal(cellText(false), 'false');
    assert.equal(cellText({ crm: 'ACME-7' }), '{"crm":"ACME-7"}');
    assert.equal(cellText([{ code: 'seats', usage_limit: null }]), '[{"code":"seats","usage_limit":null}]');
  });
});
