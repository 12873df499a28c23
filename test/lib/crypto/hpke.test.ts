import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, diffieHellman } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { gcm } from '@noble/ciphers/aes.js';
import { expand, extract } from '@noble/hashes/hkdf.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { x25519 } from '@noble/curves/ed25519.js';
import { decap, encap, generateKeyPair, keyScheduleBase, openBase, publicKeyOf, sealBase } from '../../../src/lib/crypto/hpke.js';

const vector = JSON.parse(readFileSync(new URL('../../vectors/hpke-rfc9180.json', import.meta.url), 'utf8'));
const bytes = (name: string): Uint8Array => new Uint8Array(Buffer.from(vector[name] as string, 'hex'));
const hex = (value: Uint8Array): string => Buffer.from(value).toString('hex');
const x25519Of = (k: Uint8Array, u: Uint8Array): Uint8Array => x25519.scalarMult(k, u);

/** node:crypto's X25519, to cross-check the noble one the module uses. */
function nodeX25519(privateKey: Uint8Array, publicKey: Uint8Array): Uint8Array {
  const sk = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b656e04220420', 'hex'), privateKey]), format: 'der', type: 'pkcs8' });
  const pk = createPublicKey({ key: Buffer.concat([Buffer.from('302a300506032b656e032100', 'hex'), publicKey]), format: 'der', type: 'spki' });
  return new Uint8Array(diffieHellman({ privateKey: sk, publicKey: pk }));
}

describe('HPKE base mode, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / AES-256-GCM (RFC 9180, test/vectors/hpke-rfc9180.json)', () => {
  it('its X25519 (noble) passes RFC 7748\'s vectors (test/vectors/x25519-rfc7748.json, which the Go client checks too)', () => {
    const x = JSON.parse(readFileSync(new URL('../../vectors/x25519-rfc7748.json', import.meta.url), 'utf8'));
    const h = (text: string) => new Uint8Array(Buffer.from(text, 'hex'));
    for (const single of x.single) assert.equal(hex(nodeX25519(h(single.scalar), h(single.u))), single.output);
    assert.equal(hex(publicKeyOf(h(x.diffie_hellman.alice_private))), x.diffie_hellman.alice_public);
    assert.equal(hex(publicKeyOf(h(x.diffie_hellman.bob_private))), x.diffie_hellman.bob_public);
    let k: Uint8Array = new Uint8Array(32);
    k[0] = 9;
    let u: Uint8Array = Uint8Array.from(k);
    for (let i = 1; i <= 1000; i += 1) {
      [k, u] = [x25519Of(k, u), k];
      if (i === 1) assert.equal(hex(k), x.iterated['1']);
    }
    assert.equal(hex(k), x.iterated['1000']);
  });

  it('is the vector of the suite this module implements', () => {
    assert.deepEqual([vector.mode, vector.kem_id, vector.kdf_id, vector.aead_id], [0, 0x20, 0x01, 0x02]);
  });

  it('derives the vector\'s key pairs from ikmE and ikmR (DeriveKeyPair, section 7.1.3), and their public keys', () => {
    // Written here from the RFC, apart from the module: LabeledExtract/LabeledExpand with suite_id "KEM" || 0x0020.
    const prefix = (label: string) => Buffer.concat([Buffer.from('HPKE-v1'), Buffer.from('KEM'), Buffer.of(0x00, 0x20), Buffer.from(label)]);
    const derive = (ikm: Uint8Array) => {
      const prk = extract(sha256, Buffer.concat([prefix('dkp_prk'), ikm]), new Uint8Array(0));
      return expand(sha256, prk, Buffer.concat([Buffer.of(0, 32), prefix('sk')]), 32);
    };
    assert.equal(hex(derive(bytes('ikmE'))), vector.skEm);
    assert.equal(hex(derive(bytes('ikmR'))), vector.skRm);
    assert.equal(hex(publicKeyOf(bytes('skEm'))), vector.pkEm);
    assert.equal(hex(publicKeyOf(bytes('skRm'))), vector.pkRm);
    assert.equal(vector.enc, vector.pkEm, 'SerializePublicKey(pkE) is enc');
  });

  it('reproduces every intermediate value: enc, shared_secret, key_schedule_context, secret, key, base_nonce, exporter_secret', () => {
    const { sharedSecret, enc } = encap(bytes('pkRm'), bytes('skEm'));
    assert.equal(hex(enc), vector.enc);
    assert.equal(hex(sharedSecret), vector.shared_secret);
    assert.equal(hex(decap(bytes('enc'), bytes('skRm'))), vector.shared_secret);
    // The DH inside: noble and node:crypto agree, both ways.
    assert.deepEqual(nodeX25519(bytes('skEm'), bytes('pkRm')), nodeX25519(bytes('skRm'), bytes('pkEm')));
    const schedule = keyScheduleBase(sharedSecret, bytes('info'));
    assert.equal(hex(schedule.keyScheduleContext), vector.key_schedule_context);
    assert.equal(hex(schedule.secret), vector.secret);
    assert.equal(hex(schedule.key), vector.key);
    assert.equal(hex(schedule.baseNonce), vector.base_nonce);
    assert.equal(hex(schedule.exporterSecret), vector.exporter_secret);
  });

  it('SealBase with the vector\'s ephemeral key gives encryptions[0]; OpenBase with skRm opens it', () => {
    const first = vector.encryptions[0];
    const aad = Buffer.from(first.aad, 'hex');
    const plaintext = Buffer.from(first.plaintext, 'hex');
    const sealed = sealBase(bytes('pkRm'), bytes('info'), aad, plaintext, bytes('skEm'));
    assert.equal(hex(sealed.enc), vector.enc);
    assert.equal(hex(sealed.ciphertext), first.ciphertext);
    assert.equal(hex(openBase(bytes('enc'), bytes('skRm'), bytes('info'), aad, Buffer.from(first.ciphertext, 'hex'))), first.plaintext);
  });

  it('the next encryptions of the vector follow from key and base_nonce XOR the sequence number (section 5.2), so the schedule is the RFC\'s', () => {
    const { key, baseNonce } = keyScheduleBase(bytes('shared_secret'), bytes('info'));
    vector.encryptions.forEach((entry: { aad: string; ciphertext: string; plaintext: string }, seq: number) => {
      const nonce = Uint8Array.from(baseNonce);
      nonce[11] = nonce[11]! ^ seq;
      assert.equal(hex(gcm(key, nonce, Buffer.from(entry.aad, 'hex')).encrypt(Buffer.from(entry.plaintext, 'hex'))), entry.ciphertext, `encryptions[${seq}]`);
    });
  });

  it('OpenBase refuses a wrong private key, another info, another aad, a changed enc or ciphertext', () => {
    const first = vector.encryptions[0];
    const aad = Buffer.from(first.aad, 'hex');
    const ciphertext = Buffer.from(first.ciphertext, 'hex');
    const open = (enc: Uint8Array, skR: Uint8Array, info: Uint8Array, withAad: Uint8Array, ct: Uint8Array) => () => openBase(enc, skR, info, withAad, ct);
    assert.throws(open(bytes('enc'), bytes('skEm'), bytes('info'), aad, ciphertext), /open failed/);
    assert.throws(open(bytes('enc'), bytes('skRm'), Buffer.from('another info'), aad, ciphertext), /open failed/);
    assert.throws(open(bytes('enc'), bytes('skRm'), bytes('info'), Buffer.from('Count-1'), ciphertext), /open failed/);
    const enc = Uint8Array.from(bytes('enc'));
    enc[0] = enc[0]! ^ 1;
    assert.throws(open(enc, bytes('skRm'), bytes('info'), aad, ciphertext), /open failed/);
    for (const at of [0, ciphertext.length - 1]) {
      const changed = Uint8Array.from(ciphertext);
      changed[at] = changed[at]! ^ 0x80;
      assert.throws(open(bytes('enc'), bytes('skRm'), bytes('info'), aad, changed), /open failed/);
    }
  });

  it('refuses a recipient public key of small order (all-zero shared secret, section 7.1.4) and keys of the wrong length', () => {
    assert.throws(() => encap(new Uint8Array(32)), /all zeros/);
    assert.throws(() => encap(Uint8Array.of(1, ...new Uint8Array(31))), /all zeros/);
    assert.throws(() => encap(new Uint8Array(31)), /32 bytes/);
    assert.throws(() => decap(new Uint8Array(32), bytes('skRm')), /all zeros/);
  });

  it('seals to a fresh key pair with a fresh ephemeral key each time', () => {
    const { privateKey, publicKey } = generateKeyPair();
    const info = Buffer.from('license-server/v2/machine-key\nid\nhw');
    const plaintext = new Uint8Array(32).fill(7);
    const one = sealBase(publicKey, info, new Uint8Array(0), plaintext);
    const two = sealBase(publicKey, info, new Uint8Array(0), plaintext);
    assert.notEqual(hex(one.enc), hex(two.enc));
    assert.equal(one.ciphertext.length, 48);
    assert.deepEqual(openBase(one.enc, privateKey, info, new Uint8Array(0), one.ciphertext), plaintext);
    assert.deepEqual(openBase(two.enc, privateKey, info, new Uint8Array(0), two.ciphertext), plaintext);
  });
});
