import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { BINDING_INFO, SEALED_KEY_LENGTH, unsealDecryptionKey } from '../../../src/lib/offline/binding.js';
import { signEd25519 } from '../../../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, decodeLicenseFile, encodeLicenseFile, type LicenseFilePayload } from '../../../src/lib/offline/format.js';
import { verifyLicenseFile } from '../../../src/lib/offline/verify.js';
import { describeUnknownKey, keyIdOf } from '../../../src/lib/crypto/key-set.js';

const doc = readFileSync(new URL('../../../docs/offline-license-format.md', import.meta.url), 'utf8');
const vectors = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v1.json', import.meta.url), 'utf8'));
const readers = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v1-readers.json', import.meta.url), 'utf8'));
/** The text of a numbered section, up to the next one. */
const section = (n: number) => new RegExp(`^## ${n}\\. [^\\n]*\\n([\\s\\S]*?)^## ${n + 1}\\. `, 'm').exec(doc)![1]!;
const oneLine = (text: string) => text.replace(/\s+/g, ' ');
const vectorNamed = (name: string) => vectors.vectors.find((v: { name: string }) => v.name === name);
/** A payload like `from`'s, changed, signed with the vectors' TEST 1 key. */
function signedFile(from: LicenseFilePayload, change: Partial<Record<keyof LicenseFilePayload, unknown>>): string {
  const payload = { ...from, ...change } as LicenseFilePayload;
  for (const [name, value] of Object.entries(change)) if (value === undefined) delete (payload as unknown as Record<string, unknown>)[name];
  return encodeLicenseFile(payload, signEd25519(canonicalPayloadBytes(payload), Buffer.from(vectors.signing_secret_key_hex, 'hex')));
}

describe('docs/offline-license-format.md', () => {
  /** A section from its heading to the next `## ` heading or the end. */
  const tail = (n: number) => new RegExp(`^## ${n}\\. [^\\n]*\\n([\\s\\S]*?)(?=^## |(?![\\s\\S]))`, 'm').exec(doc)![1]!;
  const tableMembers = (text: string) => [...text.matchAll(/^\| `([a-z_]+)` \| (?:number|string|array) \|/gm)].map((m) => m[1]).sort();

  it('section 12 documents every member of the activation request, and section 13 the member of version 2', () => {
    const requests = JSON.parse(readFileSync(new URL('../../vectors/activation-request-v1.json', import.meta.url), 'utf8'));
    const withPrevious = requests.accept.find((v: { name: string }) => v.name === 'with-previous-hardware-id').request;
    assert.deepEqual(tableMembers(tail(12)), Object.keys(withPrevious).sort());
    assert.deepEqual(tableMembers(tail(13)), ['request_nonce']);
    assert.ok(doc.includes(requests.license_key_digest), 'the digest of the worked example');
    assert.ok(doc.includes(requests.canonical_json), 'the request\'s canonical JSON');
    for (const line of requests.text.split('\n')) assert.ok(doc.includes(line), `the request's text: ${line}`);
    const v2 = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v2.json', import.meta.url), 'utf8'));
    for (const vector of v2.refuse) assert.ok(oneLine(doc).includes(vector.message.replace(/^license file is malformed: /, '')), vector.message);
    assert.ok(doc.includes(v2.vectors[0].signature), 'the v2 vector\'s signature');
    assert.ok(doc.includes(Buffer.from(v2.vectors[0].canonical_payload_hex, 'hex').toString('utf8')), 'the v2 vector\'s signed bytes');
  });

  it('writes the message of a key not in the set as the code prints it, here, in grace-token.md and in client.md', () => {
    const keyOf = (hex: string) => ({ keyId: keyIdOf(Buffer.from(hex, 'hex')), publicKey: new Uint8Array(Buffer.from(hex, 'hex')) });
    const first = keyOf(vectors.public_key_hex);
    const second = keyOf(vectors.second_public_key_hex);
    // What the code prints after "(" for a set of one key and of two (in the set's order).
    const printed = (set: Array<typeof first>) => /\(([^)]*)\)$/.exec(describeUnknownKey('0123456789abcdef', set))![1]!;
    const one = printed([first]);
    const two = printed([second, first]);
    assert.deepEqual([one, two], [`key ${first.keyId}`, `keys ${second.keyId}, ${first.keyId}`]);
    const documents = {
      'offline-license-format.md section 6': section(6),
      'offline-license-format.md section 8': section(8),
      'grace-token.md': readFileSync(new URL('../../../docs/grace-token.md', import.meta.url), 'utf8'),
      'client.md': readFileSync(new URL('../../../docs/client.md', import.meta.url), 'utf8'),
    };
    for (const [name, text] of Object.entries(documents)) {
      const lists = [...oneLine(text).matchAll(/which is not in the key set given \(([^)]*)\)/g)].map((match) => match[1]);
      assert.ok(lists.length > 0, `${name} gives the message`);
      for (const list of lists) assert.equal(list, '<key ids>', `${name}: the list is written (<key ids>), then defined`);
      // Where the list is defined (every document but section 8, which points to section 6), by both examples.
      if (name !== 'offline-license-format.md section 8') {
        assert.ok(oneLine(text).includes(`\`${one}\``), `${name} shows the list of one key: ${one}`);
        assert.ok(oneLine(text).includes(`\`${two}\``), `${name} shows the list of two keys: ${two}`);
      } else {
        assert.match(oneLine(text), /\(<key ids>\)` \(section 6\)/);
      }
    }
  });

  it('documents every field of the format, and no other', () => {
    const documented = [...section(3).matchAll(/^\| `([a-z_]+)` \| (?:number|string|array) \|/gm)].map((m) => m[1]).sort();
    const fields = new Set<string>();
    for (const vector of vectors.vectors) for (const key of Object.keys(vector.payload)) fields.add(key);
    // Version 2 adds machine_key in section 3's table (section 14), request_nonce in section 13's.
    const machineKey = JSON.parse(readFileSync(new URL('../../vectors/offline-license-v2-machine-key.json', import.meta.url), 'utf8'));
    for (const key of Object.keys(machineKey.payload)) fields.add(key);
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

  it('section 2 says a reader drops a UTF-8 byte order mark before the JSON, as the readers do (vector utf-8-byte-order-mark)', () => {
    assert.match(oneLine(section(2)), /A UTF-8 byte order mark \(`EF BB BF`\) at their start is dropped/);
    const withMark = readers.accept.find((v: { name: string }) => v.name === 'utf-8-byte-order-mark');
    assert.deepEqual(decodeLicenseFile(withMark.file).payload, vectorNamed('bound-with-key').payload);
  });

  it('section 7 unseals with the file\'s hardware_id as written, as the code does and vector hardware-id-not-nfc needs', () => {
    const unseal = oneLine(/^To unseal([\s\S]*?)\n\n/m.exec(section(7))![1]!);
    assert.match(unseal, /derive the binding key from the file's `hardware_id` field as written/);
    assert.doesNotMatch(unseal, /derive the binding key from the machine's own hardware ID/);
    // The machine's ID in NFC does not open a key sealed under the decomposed text the file carries; the field does.
    const notNfc = readers.accept.find((v: { name: string }) => v.name === 'hardware-id-not-nfc');
    const { payload } = decodeLicenseFile(notNfc.file);
    assert.throws(() => unsealDecryptionKey(payload.encrypted_key!, notNfc.nfc_hardware_id, payload.license_id), { code: 'DECRYPTION_FAILED' });
    assert.equal(Buffer.from(unsealDecryptionKey(payload.encrypted_key!, payload.hardware_id, payload.license_id)).toString('hex'), notNfc.decryption_key_hex);
  });

  it('section 7 says what the binding protects: whoever holds a bound file opens its key from the file alone', () => {
    const text = oneLine(section(7));
    assert.doesNotMatch(text, /only that machine's hardware ID opens it/);
    assert.match(text, /whoever holds a bound file can open its sealed key with this section alone, on any machine/);
    assert.match(text, /not encryption against the holder of the file/);
    // And so it is: both inputs of the binding key are fields of the file.
    const { payload } = decodeLicenseFile(vectorNamed('bound-with-key').file);
    assert.equal(Buffer.from(unsealDecryptionKey(payload.encrypted_key!, payload.hardware_id, payload.license_id)).toString('hex'), vectorNamed('bound-with-key').binding.decryption_key_hex);
  });

  it('section 3 tells what a reader checks from what the server writes, and counts lengths in UTF-16 code units as the messages say', () => {
    const fields = section(3);
    assert.match(fields, /^\| Member \| JSON type \| A reader checks \| This server writes \|$/m);
    const readerCheck = (member: string) => new RegExp(`^\\| \`${member}\` \\| \\w+ \\| ([^|]*) \\|`, 'm').exec(fields)![1]!;
    assert.equal(readerCheck('license_key_prefix'), 'Exactly 8 UTF-16 code units, of any text.');
    assert.equal(readerCheck('customer_name'), 'At most 1000 UTF-16 code units.');
    assert.equal(readerCheck('issuer'), 'At most 1000 UTF-16 code units.');
    assert.match(readerCheck('hardware_id'), /^At most 256 UTF-16 code units/);
    assert.doesNotMatch(readerCheck('customer_name'), /control/, 'control characters are the writer\'s rule');
    const unbound = vectorNamed('unbound').payload as LicenseFilePayload;
    const message = (change: Partial<Record<keyof LicenseFilePayload, unknown>>) => {
      try {
        decodeLicenseFile(signedFile(unbound, change));
      } catch (error) {
        return (error as Error).message.replace('license file is malformed: ', '');
      }
      return 'accepted';
    };
    for (const refused of [message({ license_key_prefix: '7KQ2' }), message({ customer_name: 'x'.repeat(1001) }), message({ issuer: 'x'.repeat(1001) })]) {
      assert.match(refused, /UTF-16 code units$/);
      if (!refused.startsWith('"issuer"')) assert.ok(oneLine(fields).includes(`\`${refused}\``), `section 3 quotes ${refused}`);
    }
    assert.equal(message({ customer_name: 'bell \u0007' }), 'accepted', 'a reader checks no control characters in customer_name');
  });

  it('section 8 says what a bound file without encrypted_key verified without a hardware ID gives, as the code does', () => {
    const step4 = oneLine(/^4\. \*\*Hardware binding\*\*([\s\S]*?)^5\. /m.exec(section(8))![1]!);
    assert.match(step4, /A bound file without `encrypted_key`, given no hardware ID, is not refused: it is valid with its binding unchecked/);
    assert.match(step4, /`hardwareChecked: false`/);
    const file = signedFile(vectorNamed('unbound').payload, { hardware_id: 'HW-1' });
    const verified = verifyLicenseFile(file, { publicKey: vectors.public_key_pem, now: new Date('2026-06-01T00:00:00Z') });
    assert.equal(verified.hardwareChecked, false);
  });

  it('states the binding parameters the code uses', () => {
    assert.ok(doc.includes(`info = UTF-8("${BINDING_INFO}")`));
    assert.ok(doc.includes(`${SEALED_KEY_LENGTH} bytes`));
  });
});
