import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { BINDING_INFO, SEALED_KEY_LENGTH } from '../../../src/lib/offline/binding.js';

const doc = readFileSync(new URL('../../../docs/offline-license-format.md', import.meta.url), 'utf8');
const vectors = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v1.json', import.meta.url), 'utf8'));

describe('docs/offline-license-format.md', () => {
  it('documents every field of the format, and no other', () => {
    const documented = [...doc.matchAll(/^\| `([a-z_]+)` \| (?:number|string|array) \|/gm)].map((m) => m[1]).sort();
    const fields = new Set<string>();
    for (const vector of vectors.vectors) for (const key of Object.keys(vector.payload)) fields.add(key);
    fields.add('signature');
    assert.deepEqual(documented, [...fields].sort());
  });

  it('quotes the worked example exactly as the vectors have it', () => {
    const bound = vectors.vectors.find((v: { name: string }) => v.name === 'bound-with-key');
    assert.ok(doc.includes(vectors.signing_secret_key_hex));
    assert.ok(doc.includes(vectors.public_key_hex));
    assert.ok(doc.includes(vectors.public_key_pem.split('\n')[1]));
    assert.ok(doc.includes(bound.canonical_payload), 'the signed bytes');
    assert.ok(doc.includes(`${Buffer.byteLength(bound.canonical_payload)} bytes`), 'their length');
    assert.ok(doc.includes(bound.signature_base64));
    assert.ok(doc.includes(bound.binding.binding_key_hex));
    assert.ok(doc.includes(bound.payload.encrypted_key));
    assert.ok(doc.includes(bound.binding.nonce_hex));
  });

  it('quotes the rotated-key example and the key ids exactly as the vectors have them', () => {
    const rotated = vectors.vectors.find((v: { name: string }) => v.name === 'rotated-key');
    assert.ok(doc.includes(vectors.second_secret_key_hex));
    assert.ok(doc.includes(vectors.second_public_key_hex));
    assert.ok(doc.includes(`key_id      ${vectors.second_key_id}`));
    assert.ok(doc.includes(`the TEST 1 key's id: ${vectors.key_id}`));
    assert.ok(doc.includes(rotated.canonical_payload));
    assert.ok(doc.includes(`${Buffer.byteLength(rotated.canonical_payload)} bytes`));
    assert.ok(doc.includes(rotated.signature_base64));
  });

  it('names the reader vectors and every number form they hold that this server does not write', () => {
    const readers = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v1-readers.json', import.meta.url), 'utf8'));
    assert.ok(doc.includes('test/vectors/offline-license-v1-readers.json'));
    const forms = new Set<string>();
    for (const vector of [...readers.accept, ...readers.refuse]) {
      const json = Buffer.from(vector.file, 'base64').toString('utf8');
      for (const [, number] of json.matchAll(/"(?:version|usage_limit)":([-0-9.eE+]+)/g)) {
        if (!/^(0|[1-9][0-9]*)$/.test(number!) || !Number.isSafeInteger(Number(number))) forms.add(number!);
      }
    }
    assert.ok(forms.size >= 5, [...forms].join(' '));
    for (const form of forms) assert.ok(doc.includes(`\`${form}\``), `the doc names ${form}`);
  });

  it('states the binding parameters the code uses', () => {
    assert.ok(doc.includes(`info = UTF-8("${BINDING_INFO}")`));
    assert.ok(doc.includes(`${SEALED_KEY_LENGTH} bytes`));
  });
});
