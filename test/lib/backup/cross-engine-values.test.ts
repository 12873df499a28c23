import assert from 'node:assert/strict';
import { decodeCopyField, encodeCopyField } from '../../../src/lib/backup/engines/cross-engine/copy-text.js';
import { postgresToSqlite, sqliteToCopyField, ValueRefused } from '../../../src/lib/backup/engines/cross-engine/portable-values.js';

describe('COPY text fields', () => {
  it('escape exactly backslash, newline, carriage return and tab, and read back what they wrote', () => {
    const hostile = 'a\tb\nc\rd\\e \\N \\. \u2028 ✓ 😀 \u0301';
    const field = encodeCopyField(hostile);
    assert.equal(field, 'a\\tb\\nc\\rd\\\\e \\\\N \\\\. \u2028 ✓ 😀 \u0301');
    assert.ok(!/[\t\n\r]/.test(field));
    assert.equal(decodeCopyField(field), hostile);
    assert.equal(decodeCopyField('\\N'), null);
    assert.equal(decodeCopyField('\\\\N'), '\\N');
  });

  it('read every escape PostgreSQL defines, octal and hex ones as UTF-8 bytes', () => {
    assert.equal(decodeCopyField('\\b\\f\\n\\r\\t\\v'), '\b\f\n\r\t\v');
    assert.equal(decodeCopyField('\\101\\x42\\q'), 'ABq', 'octal, hex, and a backslash before any other character');
    assert.equal(decodeCopyField('\\303\\274'), 'ü', 'two octal bytes of one character');
    assert.equal(decodeCopyField('\\xc3\\xbc!'), 'ü!');
    assert.throws(() => decodeCopyField('\\xff'), TypeError, 'bytes that are not UTF-8');
  });
});

describe('values moved between engines', () => {
  const refused = (work: () => unknown, reason: RegExp) => assert.throws(work, (error: unknown) => error instanceof ValueRefused && reason.test(error.message));

  it('go from SQLite to COPY fields by kind', () => {
    assert.equal(sqliteToCopyField('text', null), '\\N');
    assert.equal(sqliteToCopyField('text', Buffer.from('tab\there')), 'tab\\there');
    assert.equal(sqliteToCopyField('boolean', 1n), 't');
    assert.equal(sqliteToCopyField('boolean', 0n), 'f');
    assert.equal(sqliteToCopyField('integer', 9223372036854775807n), '9223372036854775807');
    assert.equal(sqliteToCopyField('bytes', Buffer.from([0, 0x5c, 0x0a, 0xff])), '\\\\x005c0aff');
    assert.equal(sqliteToCopyField('timestamp', '2026-11-23T10:15:00.123Z'), '2026-11-23 10:15:00.123+00');
    assert.equal(sqliteToCopyField('timestamp', Buffer.from('2026-11-23 12:15:00+02:00')), '2026-11-23 10:15:00.000+00');
    assert.equal(sqliteToCopyField('text', 'a real \uFFFD stays'), 'a real \uFFFD stays');
    assert.equal(sqliteToCopyField('json', Buffer.from('{"a":"\\u00e9\\n"}')), '{"a":"\\\\u00e9\\\\n"}');
    assert.equal(sqliteToCopyField('uuid', Buffer.from('0B6C4F8E-3A1D-4E8E-9C2B-5F0D7A1E2C3B')), '0B6C4F8E-3A1D-4E8E-9C2B-5F0D7A1E2C3B');
  });

  it('refuse from SQLite what PostgreSQL cannot store, saying why without quoting the value', () => {
    refused(() => sqliteToCopyField('text', Buffer.from('secret\0tail')), /NUL character at position 7/);
    refused(() => sqliteToCopyField('text', Buffer.from([0x61, 0x62, 0xc3, 0x28])), /not valid UTF-8 \(byte 3\)/);
    refused(() => sqliteToCopyField('text', Buffer.from([0x61, 0xe2, 0x82])), /not valid UTF-8 \(it ends inside a character\)/);
    refused(() => sqliteToCopyField('text', Buffer.from([0xed, 0xa0, 0x80])), /not valid UTF-8 \(byte 1\)/); // an encoded surrogate
    refused(() => sqliteToCopyField('text', Buffer.from('ok \xc0\xaf', 'latin1')), /not valid UTF-8 \(byte 4\)/); // an overlong form
    refused(() => sqliteToCopyField('uuid', Buffer.from('not-a-uuid')), /not a UUID/);
    refused(() => sqliteToCopyField('timestamp', Buffer.from('2026-11-23 10:15:00')), /time zone/);
    refused(() => sqliteToCopyField('timestamp', Buffer.from('+275760-09-13T00:00:00.000Z')), /time zone|outside/);
    refused(() => sqliteToCopyField('boolean', 2n), /neither 0 nor 1/);
    refused(() => sqliteToCopyField('integer', 1.5), /not an integer/);
    refused(() => sqliteToCopyField('json', Buffer.from('{"a":')), /not JSON/);
    refused(() => sqliteToCopyField('json', Buffer.from('{"a":"\\u0000"}')), /\\u0000/);
    refused(() => sqliteToCopyField('json', Buffer.from('{"\\ud800":1}')), /lone surrogate/);
    refused(() => sqliteToCopyField('bytes', 'text'), /not binary/);
    // An escaped backslash before u0000 is text, not NUL: it is stored as it is.
    assert.equal(sqliteToCopyField('json', Buffer.from('{"a":"\\\\u0000"}')), '{"a":"\\\\\\\\u0000"}');
  });

  it('go from PostgreSQL text to SQLite values by kind, timestamps as millisecond UTC text', () => {
    assert.equal(postgresToSqlite('timestamp', '2026-11-23 10:15:00.123456+00'), '2026-11-23T10:15:00.123Z');
    assert.equal(postgresToSqlite('timestamp', '2026-11-23 12:15:00+02'), '2026-11-23T10:15:00.000Z');
    assert.equal(postgresToSqlite('timestamp', '2026-11-23 05:45:00-04:30'), '2026-11-23T10:15:00.000Z');
    assert.equal(postgresToSqlite('timestamp', '0050-01-01 00:53:28+00:53:28'), '0050-01-01T00:00:00.000Z', 'a two-digit year and an offset to the second');
    assert.equal(postgresToSqlite('timestamp', '9999-12-31 23:59:59.999+00'), '9999-12-31T23:59:59.999Z');
    assert.equal(postgresToSqlite('boolean', 't'), 1);
    assert.equal(postgresToSqlite('boolean', 'f'), 0);
    assert.equal(postgresToSqlite('integer', '9007199254740991'), 9007199254740991);
    assert.equal(postgresToSqlite('integer', '9007199254740993'), 9007199254740993n, 'past 2^53 as a bigint, exactly');
    assert.deepEqual(postgresToSqlite('bytes', '\\x005cff'), Buffer.from([0, 0x5c, 0xff]));
    assert.equal(postgresToSqlite('json', '{"a": 1}'), '{"a": 1}');
    assert.equal(postgresToSqlite('text', null), null);
    refused(() => postgresToSqlite('timestamp', '2026-11-23 10:15:00'), /ISO form/);
    refused(() => postgresToSqlite('timestamp', 'infinity'), /ISO form/);
    refused(() => postgresToSqlite('timestamp', '0001-01-01 00:00:00+00 BC'), /ISO form/);
    refused(() => postgresToSqlite('timestamp', '10000-01-01 00:00:00+00'), /ISO form|outside/);
    refused(() => postgresToSqlite('bytes', '\\001'), /hex form/);
    refused(() => postgresToSqlite('boolean', 'true'), /boolean/);
  });
});
