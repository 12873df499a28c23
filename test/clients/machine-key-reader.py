#!/usr/bin/env python3
"""An independent reader of the sealed decryption key of a .lic file, written from
docs/offline-license-format.md (sections 7 and "The machine-key binding") and RFC 9180
alone, with the `cryptography` package (X25519, AES-GCM) and the standard library (HMAC).
It shares no code with license-server.

    machine-key-reader.py FILE [--machine-private-key HEX]

It tries to open `encrypted_key` with everything the file holds: the hardware-ID
construction of section 7 (HKDF of hardware_id and license_id), and, for the HPKE form,
every string of the file (and what Base64 of it decodes to) as the machine's private key,
directly and through HPKE's DeriveKeyPair. Then, when given one, the machine's private key.
It prints one JSON object: what opened the key, if anything, and the key.
"""

import base64
import hashlib
import hmac
import json
import sys

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


# --- RFC 5869 HKDF-SHA256 -------------------------------------------------------------

def extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()


def expand(prk: bytes, info: bytes, length: int) -> bytes:
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


# --- RFC 9180, mode_base, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM ----------

KEM_SUITE = b"KEM" + (0x0020).to_bytes(2, "big")
HPKE_SUITE = b"HPKE" + (0x0020).to_bytes(2, "big") + (0x0001).to_bytes(2, "big") + (0x0002).to_bytes(2, "big")


def labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    return extract(salt, b"HPKE-v1" + suite + label + ikm)


def labeled_expand(suite: bytes, prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    return expand(prk, length.to_bytes(2, "big") + b"HPKE-v1" + suite + label + info, length)


def public_of(private: bytes) -> bytes:
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def derive_key_pair(ikm: bytes) -> bytes:
    """RFC 9180 section 7.1.3 for X25519: the private key."""
    prk = labeled_extract(KEM_SUITE, b"", b"dkp_prk", ikm)
    return labeled_expand(KEM_SUITE, prk, b"sk", b"", 32)


def open_base(enc: bytes, sk_r: bytes, info: bytes, aad: bytes, ct: bytes) -> bytes:
    dh = X25519PrivateKey.from_private_bytes(sk_r).exchange(X25519PublicKey.from_public_bytes(enc))
    kem_context = enc + public_of(sk_r)
    eae_prk = labeled_extract(KEM_SUITE, b"", b"eae_prk", dh)
    shared_secret = labeled_expand(KEM_SUITE, eae_prk, b"shared_secret", kem_context, 32)
    psk_id_hash = labeled_extract(HPKE_SUITE, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(HPKE_SUITE, b"", b"info_hash", info)
    context = b"\x00" + psk_id_hash + info_hash
    secret = labeled_extract(HPKE_SUITE, shared_secret, b"secret", b"")
    key = labeled_expand(HPKE_SUITE, secret, b"key", context, 32)
    base_nonce = labeled_expand(HPKE_SUITE, secret, b"base_nonce", context, 12)
    return AESGCM(key).decrypt(base_nonce, ct, aad or None)


# --- the file -------------------------------------------------------------------------

def read_file(path: str) -> dict:
    text = "".join(open(path, "rb").read().decode("ascii").split())
    return json.loads(base64.b64decode(text, validate=True).decode("utf-8"))


def strings_of(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for member in value.values():
            yield from strings_of(member)
    elif isinstance(value, list):
        for member in value:
            yield from strings_of(member)


def byte_forms(text: str):
    """The bytes a string of the file could stand for: its UTF-8, and what Base64 makes of it."""
    yield text.encode("utf-8")
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            yield decode(text + "=" * (-len(text) % 4))
        except Exception:
            pass
    try:
        yield bytes.fromhex(text)
    except ValueError:
        pass


def v1_open(document: dict, sealed: bytes):
    """Section 7: binding key = HKDF-SHA256(IKM = hardware_id, salt = license_id, info = ...)."""
    key = expand(extract(document["license_id"].encode("utf-8"), document["hardware_id"].encode("utf-8")),
                 b"license-server/v1/offline-decryption-key", 32)
    return AESGCM(key).decrypt(sealed[:12], sealed[12:], None)


def main(argv) -> int:
    path = argv[1]
    given = None
    if "--machine-private-key" in argv:
        given = bytes.fromhex(argv[argv.index("--machine-private-key") + 1])
    document = read_file(path)
    sealed = base64.b64decode(document["encrypted_key"], validate=True)
    result = {"version": document["version"], "sealed_length": len(sealed), "attempts": 0, "opened_by": None}

    def attempt(name, fn):
        result["attempts"] += 1
        try:
            plaintext = fn()
        except (InvalidTag, ValueError):
            return False
        result["opened_by"] = name
        result["decryption_key_hex"] = plaintext.hex()
        return True

    # 1. The hardware-ID construction, from the file alone (it opens a version 1 file).
    if attempt("hardware_id and license_id of the file (section 7)", lambda: v1_open(document, sealed)):
        print(json.dumps(result))
        return 0

    if "machine_key" in document:
        info = ("license-server/v2/machine-key\n" + document["license_id"] + "\n" + document["hardware_id"]).encode("utf-8")
        enc, ct = sealed[:32], sealed[32:]
        # 2. Everything in the file as the machine's private key, as is and through DeriveKeyPair.
        candidates = []
        for text in strings_of(document):
            for form in byte_forms(text):
                candidates.append(form)
                candidates.append(hashlib.sha256(form).digest())
        for form in candidates:
            keys = [derive_key_pair(form)] + ([form] if len(form) == 32 else [])
            for sk in keys:
                for aad in (b"", info):
                    if attempt("a value of the file as the private key", lambda: open_base(enc, sk, info, aad, ct)):
                        print(json.dumps(result))
                        return 0
        # 3. The machine's own private key, which is not in the file.
        if given is not None and attempt("the machine's private key", lambda: open_base(enc, given, info, b"", ct)):
            print(json.dumps(result))
            return 0

    print(json.dumps(result))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
