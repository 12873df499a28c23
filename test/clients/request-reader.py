#!/usr/bin/env python3
"""An independent reader of three formats of license-server, written from the documents alone.

Sources, and nothing else: docs/client.md ("Hardware ID", "hw2 (Linux)", "Activation by request
file") and docs/offline-license-format.md (sections 1-14). It exists to show those documents are
complete: if a reader made from them passes the committed vectors, so can anyone's.

    request-reader.py hw2 test/vectors/hardware-id-v2.json
    request-reader.py requests test/vectors/activation-request-v1.json
    request-reader.py licenses test/vectors/offline-license-v2.json

Each prints one JSON object {"checked": N, "failures": [{"name", "why"}]} and exits 0 when
nothing failed, 1 otherwise. Only the standard library and `cryptography` are used.
"""

import base64
import datetime
import hashlib
import hmac
import json
import os
import re
import shutil
import sys
import tempfile
import unicodedata

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# ---------------------------------------------------------------------------------------------
# Shared pieces: Base64 forms, JSON, JCS, timestamps, UTF-16 lengths
# ---------------------------------------------------------------------------------------------

ASCII_WHITESPACE = "\t\n\f\r "


def decode_standard_base64(text):
    """RFC 4648 section 4 with padding, canonical only (None otherwise).

    Re-encoding and comparing catches non-zero unused bits and wrong padding in one test,
    which is what "the canonical encoding of its bytes" asks for."""
    if len(text) % 4 != 0 or not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def decode_unpadded_base64url(text, size):
    """RFC 4648 section 5 without `=`, exactly `size` bytes, canonical (None otherwise)."""
    length = (size * 8 + 5) // 6
    if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]{%d}" % length, text):
        return None
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return raw if encode_unpadded_base64url(raw) == text else None


def encode_unpadded_base64url(raw):
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


class DuplicateMember(ValueError):
    pass


def _refuse_duplicates(pairs):
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise DuplicateMember("a member appears twice")
    return dict(pairs)


def _refuse_constant(name):
    # Python accepts NaN and Infinity, which RFC 8259 does not.
    raise ValueError("not JSON: " + name)


def parse_json(text, refuse_duplicates):
    """RFC 8259 JSON with every number read as the IEEE 754 double it denotes (section 3)."""
    return json.loads(
        text,
        object_pairs_hook=_refuse_duplicates if refuse_duplicates else None,
        parse_int=float,
        parse_float=float,
        parse_constant=_refuse_constant,
    )


def has_lone_surrogate(value):
    """True if any string (or member name) holds a surrogate Python kept from a `\\udXXX` escape."""
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    return False


def is_integer(value):
    return isinstance(value, float) and value == value and abs(value) != float("inf") and value == int(value)


def utf16_length(text):
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def _utf16_key(name):
    return name.encode("utf-16-be")


_JCS_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _jcs_string(text):
    out = []
    for c in text:
        if c in _JCS_ESCAPES:
            out.append(_JCS_ESCAPES[c])
        elif ord(c) < 0x20:
            out.append("\\u%04x" % ord(c))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def jcs(value):
    """RFC 8785 for the values these formats hold (section 4): integers, strings, null, arrays, objects."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        # Readers refuse non-integers before anything is canonicalised, so only integers get here.
        if not is_integer(float(value)):
            raise ValueError("JCS of a non-integer is not needed by these formats")
        return str(int(value))
    if isinstance(value, str):
        return _jcs_string(value)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    members = sorted(value.items(), key=lambda item: _utf16_key(item[0]))
    return "{" + ",".join(_jcs_string(k) + ":" + jcs(v) for k, v in members) + "}"


def is_timestamp(value):
    """Section 3: exactly YYYY-MM-DDTHH:MM:SSZ and a real calendar date."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", value):
        return False
    try:
        datetime.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# hw2 hardware IDs (docs/client.md, "hw2 (Linux)")
# ---------------------------------------------------------------------------------------------

MACHINE_APP_ID = bytes.fromhex("6b2df99ab35d4cdaabefec080a35b4c9")
HW2_CONTEXT = "license-server/hardware-id/v2"
ATTRIBUTE_TRIM = " \t\r\n"  # the doc names these four, not FF or VT


def read_attribute_file(path):
    """A value as the doc reads every source; None is its "gives nothing"."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    text = text.strip(ATTRIBUTE_TRIM)
    if not text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return None
    return text


def machine_app_specific(machine_id):
    """systemd's sd_id128_get_machine_app_specific() for the application id above, or None."""
    compact = machine_id
    if re.fullmatch(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}", machine_id):
        compact = machine_id.replace("-", "")
    if not re.fullmatch(r"[0-9A-Fa-f]{32}", compact):
        return None
    m = bytes.fromhex(compact)
    if m == bytes(16):
        return None
    h = bytearray(hmac.new(m, MACHINE_APP_ID, hashlib.sha256).digest()[:16])
    # The UUID version 4 and variant bits, as systemd sets them.
    h[6] = (h[6] & 0x0F) | 0x40
    h[8] = (h[8] & 0x3F) | 0x80
    return h.hex()


def path_from_root(root, path):
    """The path with every link followed, written from the (stand-in) root as "/...".

    Taken from the root so that a temporary directory named e.g. /tmp/usb... cannot match "/usb"."""
    return "/" + os.path.relpath(os.path.realpath(path), root).replace(os.sep, "/")


def machine_app_id_line(root):
    # /var/lib/dbus is read only when /etc/machine-id gives nothing as a file (vector "a VM":
    # "uninitialized" there is a value, so dbus is not read and the attribute is missing).
    value = read_attribute_file(os.path.join(root, "etc/machine-id"))
    if value is None:
        value = read_attribute_file(os.path.join(root, "var/lib/dbus/machine-id"))
    app_id = machine_app_specific(value) if value is not None else None
    return ["machine-app-id=" + app_id] if app_id else []


def normalise_mac(value):
    if value is None:
        return None
    mac = value.lower()
    if not re.fullmatch(r"[0-9a-f]{2}(:[0-9a-f]{2}){1,19}", mac) or set(mac) <= {"0", ":"}:
        return None
    return mac


def card_address(card):
    permanent = normalise_mac(read_attribute_file(os.path.join(card, "permaddr")))
    if permanent:
        return permanent
    # Types 1-3 (random, stolen, set) are addresses software chose, and may change.
    if read_attribute_file(os.path.join(card, "addr_assign_type")) != "0":
        return None
    return normalise_mac(read_attribute_file(os.path.join(card, "address")))


def is_network_card(root, card):
    device = os.path.join(card, "device")
    if not os.path.islink(device):
        return False
    if "/usb" in path_from_root(root, device):
        return False
    return not (os.path.lexists(os.path.join(card, "wireless")) or os.path.lexists(os.path.join(card, "phy80211")))


def mac_lines(root):
    net = os.path.join(root, "sys/class/net")
    names = sorted(os.listdir(net)) if os.path.isdir(net) else []
    lines = []
    for name in names:
        card = os.path.join(net, name)
        if is_network_card(root, card):
            mac = card_address(card)
            if mac:
                lines.append("mac=" + mac)
    return lines


DISK_NAME_PREFIXES = ("loop", "ram", "zram", "dm-", "md", "sr", "nbd")
DISK_VALUE_FILES = ("device/serial", "serial", "device/wwid", "wwid")


def is_fixed_disk(root, name, disk):
    if name.startswith(DISK_NAME_PREFIXES):
        return False
    if read_attribute_file(os.path.join(disk, "removable")) != "0":
        return False
    where = path_from_root(root, disk)
    return "/devices/virtual/" not in where and "/usb" not in where


def disk_lines(root):
    block = os.path.join(root, "sys/block")
    names = sorted(os.listdir(block)) if os.path.isdir(block) else []
    lines = []
    for name in names:
        disk = os.path.join(block, name)
        if not is_fixed_disk(root, name, disk):
            continue
        for relative in DISK_VALUE_FILES:
            value = read_attribute_file(os.path.join(disk, relative))
            if value is not None:
                lines.append("disk=" + value)
                break
    return lines


def derive_hw2(root):
    """(attribute lines, hw2 ID or None) of a file system root."""
    root = os.path.realpath(root)
    lines = set(machine_app_id_line(root) + mac_lines(root) + disk_lines(root))
    ordered = sorted(lines, key=lambda line: line.encode("utf-8"))
    if not ordered:
        return ordered, None
    text = HW2_CONTEXT + "\n" + "\n".join(ordered)
    return ordered, "hw2-" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_tree(root, tree):
    """The tree as the vector's description says: dirs, then files, then symlinks."""
    for directory in tree.get("dirs", []):
        os.makedirs(os.path.join(root, directory), exist_ok=True)
    for relative, contents in tree.get("files", {}).items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(contents.encode("utf-8"))
    for relative, target in tree.get("symlinks", {}).items():
        path = os.path.join(root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)


def check_hw2(vectors, _path):
    failures = []
    checked = 0
    for pair in vectors["machine_app_specific"]:
        checked += 1
        name = "machine-app-specific " + pair["machine_id"]
        failures += guarded(name, check_app_specific_pair, name, pair)
    for tree in vectors["trees"]:
        checked += 1
        failures += guarded(tree["name"], check_tree, tree)
    return checked, failures


def check_app_specific_pair(name, pair):
    got = machine_app_specific(pair["machine_id"])
    if got != pair["app_specific_id"]:
        return [failure(name, "got %r, expected %r" % (got, pair["app_specific_id"]))]
    return []


def check_tree(tree):
    root = tempfile.mkdtemp(prefix="hw2-tree-")
    try:
        build_tree(root, tree)
        lines, hardware_id = derive_hw2(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    problems = []
    if lines != tree["attributes"]:
        problems.append(failure(tree["name"], "attributes %r, expected %r" % (lines, tree["attributes"])))
    if hardware_id != tree["hardware_id"]:
        problems.append(failure(tree["name"], "hardware ID %r, expected %r" % (hardware_id, tree["hardware_id"])))
    return problems


# ---------------------------------------------------------------------------------------------
# Activation requests (offline-license-format.md section 12)
# ---------------------------------------------------------------------------------------------

REQUEST_BEGIN = "-----BEGIN LICENSE ACTIVATION REQUEST-----"
REQUEST_END = "-----END LICENSE ACTIVATION REQUEST-----"
REQUEST_FORMAT = "license-server-activation-request"
# The order of the table in section 12; members are checked in it.
REQUEST_MEMBERS = (
    "format", "version", "license_key_prefix", "created_at", "license_key_digest", "hardware_id",
    "previous_hardware_id", "machine_name", "app_version", "machine_key", "nonce",
)
REQUEST_OPTIONAL = {"previous_hardware_id"}
DIGEST_CONTEXT = "license-server/v1/activation-request"


class RequestMalformed(Exception):
    def __init__(self, reason):
        super().__init__("activation request is malformed: " + reason)


def is_request_control(c):
    # Section 12 defines control characters for the hardware ID as U+0000-U+001F and
    # U+007F-U+009F; the same set is assumed for machine_name and app_version.
    return ord(c) <= 0x1F or 0x7F <= ord(c) <= 0x9F


def check_hardware_id_member(name, value):
    if not isinstance(value, str):
        raise RequestMalformed('"%s": must be a string' % name)
    if value == "":
        raise RequestMalformed('"%s": must not be empty' % name)
    if any(is_request_control(c) for c in value):
        raise RequestMalformed('"%s": must not contain control characters' % name)
    if has_lone_surrogate(value):
        raise RequestMalformed('"%s": must be well-formed Unicode' % name)
    if unicodedata.normalize("NFC", value) != value:
        raise RequestMalformed('"%s" must be in Unicode NFC' % name)
    if len(value.encode("utf-8")) > 256:
        raise RequestMalformed('"%s": must be at most 256 bytes of UTF-8' % name)


def check_free_text_member(name, value, limit):
    if (
        not isinstance(value, str)
        or utf16_length(value) > limit
        or any(is_request_control(c) for c in value)
        or has_lone_surrogate(value)
    ):
        raise RequestMalformed('"%s" must be a string of at most %d UTF-16 code units without control characters' % (name, limit))


def check_base64url_member(name, value, size):
    if decode_unpadded_base64url(value, size) is None:
        chars = (size * 8 + 5) // 6
        raise RequestMalformed('"%s" must be the unpadded base64url of %d bytes (%d characters)' % (name, size, chars))


# Section 12: the X25519 points of small order, compared with the top bit of the last byte cleared.
SMALL_ORDER_POINTS = {
    bytes.fromhex(point)
    for point in (
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    )
}


def check_machine_key_member(value):
    check_base64url_member("machine_key", value, 32)
    key = bytearray(decode_unpadded_base64url(value, 32))
    key[31] &= 0x7F
    if bytes(key) in SMALL_ORDER_POINTS:
        raise RequestMalformed('"machine_key" is an X25519 point of small order (section 12 lists them), not the public key of a key pair')


def check_version_member(value):
    if not is_integer(value) or isinstance(value, bool):
        raise RequestMalformed('"version" must be the integer 1')
    if value != 1:
        raise RequestMalformed("it has version %d; this license-server reads version 1" % int(value))


def check_request_members(request):
    for name in request:
        if name not in REQUEST_MEMBERS:
            raise RequestMalformed('the member "%s" is not part of an activation request' % name)
    for name in REQUEST_MEMBERS:
        if name not in request and name not in REQUEST_OPTIONAL:
            raise RequestMalformed('the member "%s" is missing' % name)
    if request["format"] != REQUEST_FORMAT:
        raise RequestMalformed('"format" must be "%s"' % REQUEST_FORMAT)
    check_version_member(request["version"])
    prefix = request["license_key_prefix"]
    if not isinstance(prefix, str) or utf16_length(prefix) != 8:
        raise RequestMalformed('"license_key_prefix" must be 8 UTF-16 code units')
    if not is_timestamp(request["created_at"]):
        raise RequestMalformed('"created_at" must be an RFC 3339 UTC timestamp with second precision, such as 2026-11-22T10:00:00Z')
    check_base64url_member("license_key_digest", request["license_key_digest"], 32)
    check_hardware_id_member("hardware_id", request["hardware_id"])
    if "previous_hardware_id" in request:
        check_hardware_id_member("previous_hardware_id", request["previous_hardware_id"])
        if request["previous_hardware_id"] == request["hardware_id"]:
            raise RequestMalformed('"previous_hardware_id" must not equal "hardware_id"')
    check_free_text_member("machine_name", request["machine_name"], 255)
    check_free_text_member("app_version", request["app_version"], 100)
    check_machine_key_member(request["machine_key"])
    check_base64url_member("nonce", request["nonce"], 16)


def request_body(text):
    """Steps 1-3: the Base64 between the BEGIN and END lines, whitespace removed."""
    if all(c in ASCII_WHITESPACE for c in text):
        raise RequestMalformed("it is empty")
    if any(c not in ASCII_WHITESPACE and not (0x20 <= ord(c) <= 0x7E) for c in text):
        raise RequestMalformed("it holds a character that is not printable ASCII")
    text = text.strip(ASCII_WHITESPACE)
    if not text.startswith(REQUEST_BEGIN):
        raise RequestMalformed("it does not start with the line " + REQUEST_BEGIN)
    if not text.endswith(REQUEST_END) or len(text) < len(REQUEST_BEGIN) + len(REQUEST_END):
        raise RequestMalformed("it does not end with the line %s (it may be truncated)" % REQUEST_END)
    return "".join(c for c in text[len(REQUEST_BEGIN):-len(REQUEST_END)] if c not in ASCII_WHITESPACE)


def request_bytes(body):
    if not body or len(body) % 4 != 0 or not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", body):
        raise RequestMalformed("the text between its BEGIN and END lines is not standard Base64")
    try:
        raw = base64.b64decode(body, validate=True)
    except ValueError:
        raise RequestMalformed("the text between its BEGIN and END lines is not standard Base64")
    if base64.b64encode(raw).decode("ascii") != body:
        raise RequestMalformed("the Base64 is not the canonical encoding of its bytes")
    return raw


def request_object(raw):
    if raw.startswith(b"\xef\xbb\xbf"):
        raise RequestMalformed("the decoded content starts with a byte order mark")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestMalformed("the decoded content is not UTF-8")
    try:
        # Repeated members are left to the canonical-form check of step 6, as the doc says
        # re-canonicalising refuses them; the vector "member-twice" expects that message.
        value = parse_json(text, refuse_duplicates=False)
    except ValueError:
        raise RequestMalformed("the decoded content is not JSON")
    if not isinstance(value, dict):
        raise RequestMalformed("the decoded content is not a JSON object")
    return value


def read_activation_request(text):
    """The decoded members of a request text, or RequestMalformed (section 12, steps 1-6)."""
    raw = request_bytes(request_body(text))
    request = request_object(raw)
    check_request_members(request)
    if jcs(request).encode("utf-8") != raw:
        raise RequestMalformed("its JSON is not in RFC 8785 canonical form (members sorted, no spaces, each member once)")
    return request


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def canonical_license_key(key):
    # "spaces" is read as all ASCII white space: the vector's typed form ends with a line feed.
    compact = "".join(c for c in key.upper() if c not in ASCII_WHITESPACE + "-")
    compact = compact.replace("O", "0").replace("I", "1").replace("L", "1")
    if len(compact) != 28 or any(c not in CROCKFORD for c in compact):
        return key.strip(ASCII_WHITESPACE)
    return "-".join(compact[i:i + 4] for i in range(0, 28, 4))


def license_key_digest_input(key):
    return DIGEST_CONTEXT + "\n" + canonical_license_key(key)


def license_key_digest(key):
    return encode_unpadded_base64url(hashlib.sha256(license_key_digest_input(key).encode("utf-8")).digest())


def compare_request(name, text, expected):
    try:
        got = read_activation_request(text)
    except RequestMalformed as error:
        return [failure(name, "refused: " + str(error))]
    if got != expected:
        return [failure(name, "decoded %r, expected %r" % (got, expected))]
    return []


def check_worked_request(vectors, directory):
    """The vector "request": its text, the .txt file, the digest and the keys behind it."""
    name = "request"
    problems = compare_request(name, vectors["text"], vectors["request"])
    request = vectors["request"]

    def expect(what, got, wanted):
        if got != wanted:
            problems.append(failure(name, "%s: got %r, expected %r" % (what, got, wanted)))

    with open(os.path.join(directory, "activation-request.txt"), encoding="ascii") as f:
        expect("activation-request.txt", f.read(), vectors["text"])
    expect("canonical JSON", jcs(request), vectors["canonical_json"])
    expect("digest input", license_key_digest_input(vectors["license_key"]), vectors["license_key_digest_input"])
    expect("digest of license_key", license_key_digest(vectors["license_key"]), vectors["license_key_digest"])
    expect("digest of license_key_as_typed", license_key_digest(vectors["license_key_as_typed"]), vectors["license_key_digest"])
    expect("license_key_digest member", request["license_key_digest"], vectors["license_key_digest"])
    expect("license_key_prefix", request["license_key_prefix"], canonical_license_key(vectors["license_key"])[:8])
    private = X25519PrivateKey.from_private_bytes(bytes.fromhex(vectors["machine_private_key_hex"]))
    expect("machine public key", private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex(), vectors["machine_public_key_hex"])
    expect("machine_key", request["machine_key"], encode_unpadded_base64url(bytes.fromhex(vectors["machine_public_key_hex"])))
    expect("nonce", request["nonce"], encode_unpadded_base64url(bytes.fromhex(vectors["nonce_hex"])))
    return problems


def check_refused_request(vector):
    try:
        read_activation_request(vector["text"])
    except RequestMalformed as error:
        if str(error) != vector["message"]:
            return [failure(vector["name"], "message %r, expected %r" % (str(error), vector["message"]))]
        return []
    return [failure(vector["name"], "accepted; every reader must refuse it")]


def check_requests(vectors, path):
    directory = os.path.dirname(os.path.abspath(path))
    failures = guarded("request", check_worked_request, vectors, directory)
    checked = 1
    for vector in vectors["accept"]:
        checked += 1
        failures += guarded(vector["name"], compare_request, vector["name"], vector["text"], vector["request"])
    for vector in vectors["refuse"]:
        checked += 1
        failures += guarded(vector["name"], check_refused_request, vector)
    return checked, failures


# ---------------------------------------------------------------------------------------------
# The .lic file, versions 1 and 2 (offline-license-format.md sections 2-8, 13, 14)
# ---------------------------------------------------------------------------------------------


class LicenseError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def malformed(reason):
    # The prefix is not in the document; it is taken from the refusal vectors' messages.
    return LicenseError("LICENSE_FILE_MALFORMED", "license file is malformed: " + reason)


DECRYPTION_FAILED = "failed to decrypt license key"
MACHINE_KEY_MISSING_MESSAGE = (
    "failed to decrypt license key: it is sealed to the machine key of the file, and no machine private key was given"
)
ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
REQUIRED_MEMBERS = (
    "version", "license_id", "license_key_prefix", "customer_name", "license_type", "valid_from",
    "valid_until", "hardware_id", "entitlements", "issued_at", "issuer", "signature",
)
OPTIONAL_MEMBERS = {1: ("encrypted_key", "key_id"), 2: ("encrypted_key", "key_id", "request_nonce", "machine_key")}
LICENSE_TYPES = ("time_based", "usage_based", "hybrid")
MAX_SAFE_INTEGER = 2**53 - 1


def raw_public_key(pem):
    """Section 6: the 32 key bytes of an RFC 8410 PUBLIC KEY block."""
    body = re.search(r"-----BEGIN PUBLIC KEY-----(.*?)-----END PUBLIC KEY-----", pem, re.S).group(1)
    der = base64.b64decode("".join(body.split()))
    if len(der) != 44 or not der.startswith(ED25519_SPKI_PREFIX):
        raise ValueError("not an Ed25519 PUBLIC KEY")
    return der[12:]


def key_id_of(raw_key):
    return hashlib.sha256(raw_key).hexdigest()[:16]


def decode_file_text(data):
    """Section 2 rules 1-4: the JSON text inside the file's bytes."""
    kept = bytes(b for b in data if b not in b"\t\n\f\r ")
    if not kept:
        raise malformed("the file is empty")
    if any(b > 0x7E for b in kept) or not re.fullmatch(rb"[A-Za-z0-9+/=]*", kept):
        raise malformed("the file is not valid Base64")
    raw = decode_standard_base64(kept.decode("ascii"))
    if raw is None:
        raise malformed("the file is not valid Base64 or not its canonical encoding")
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # the WHATWG decoder drops a byte order mark (rule 4)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise malformed("the decoded content is not UTF-8")


def parse_document(text):
    """Section 2 rules 5-6: a JSON object, no member twice, no lone surrogate."""
    try:
        document = parse_json(text, refuse_duplicates=True)
    except DuplicateMember:
        raise malformed("a member appears twice")
    except ValueError:
        raise malformed("the decoded content is not JSON")
    if not isinstance(document, dict):
        raise malformed("the decoded content is not a JSON object")
    if has_lone_surrogate(document):
        raise malformed("a string holds a lone surrogate")
    return document


def check_version(document):
    """Section 3: version is checked first, and an unknown integer is its own error."""
    if "version" not in document:
        raise malformed('the field "version" is missing')
    version = document["version"]
    if isinstance(version, bool) or not is_integer(version):
        raise malformed('"version" must be an integer')
    if version not in (1, 2):
        raise LicenseError(
            "LICENSE_FILE_UNSUPPORTED_VERSION",
            "license file has format version %d; this license-server reads versions 1 and 2" % int(version),
        )
    return int(version)


def check_member_names(document, version):
    allowed = set(REQUIRED_MEMBERS) | set(OPTIONAL_MEMBERS[version])
    for name in sorted(document):
        if name not in allowed:
            # The doc pins this message for request_nonce in version 1; other unknown members are
            # "refused as any unknown member", with no message given, so the same form is used.
            raise malformed('the field "%s" is not part of format version %d' % (name, version))
    for name in REQUIRED_MEMBERS:
        if name not in document:
            raise malformed('the field "%s" is missing' % name)


def require(condition, reason):
    if not condition:
        raise malformed(reason)


def check_entitlements(entitlements):
    require(isinstance(entitlements, list), '"entitlements" must be an array')
    codes = []
    for entitlement in entitlements:
        require(
            isinstance(entitlement, dict) and set(entitlement) == {"code", "name", "usage_limit"},
            'each entitlement must have exactly "code", "name" and "usage_limit"',
        )
        require(isinstance(entitlement["code"], str), 'an entitlement\'s "code" must be a string')
        require(isinstance(entitlement["name"], str), 'an entitlement\'s "name" must be a string')
        limit = entitlement["usage_limit"]
        require(
            limit is None or (not isinstance(limit, bool) and is_integer(limit) and 0 <= limit <= MAX_SAFE_INTEGER),
            '"usage_limit" must be null or an integer from 0 to 9007199254740991',
        )
        codes.append(_utf16_key(entitlement["code"]))
    require(all(a < b for a, b in zip(codes, codes[1:])), "entitlements must be sorted by code, each code once")


def is_string_of_at_most(value, limit):
    return isinstance(value, str) and utf16_length(value) <= limit


def check_v1_members(d):
    """The column "A reader checks" of section 3 for the members of version 1."""
    require(isinstance(d["license_id"], str) and re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", d["license_id"]),
            '"license_id" must be a lowercase UUID')
    require(isinstance(d["license_key_prefix"], str) and utf16_length(d["license_key_prefix"]) == 8,
            '"license_key_prefix" must be 8 UTF-16 code units')
    require(is_string_of_at_most(d["customer_name"], 1000), '"customer_name" must be a string of at most 1000 UTF-16 code units')
    require(d["license_type"] in LICENSE_TYPES, '"license_type" must be time_based, usage_based or hybrid')
    for name in ("valid_from", "valid_until", "issued_at"):
        require(is_timestamp(d[name]), '"%s" must be a timestamp such as 2026-11-22T10:00:00Z' % name)
    require(d["valid_until"] > d["valid_from"], '"valid_until" must be later than "valid_from"')
    require(is_string_of_at_most(d["hardware_id"], 256), '"hardware_id" must be a string of at most 256 UTF-16 code units')
    check_entitlements(d["entitlements"])
    require(is_string_of_at_most(d["issuer"], 1000), '"issuer" must be a string of at most 1000 UTF-16 code units')
    if "key_id" in d:
        require(isinstance(d["key_id"], str) and re.fullmatch(r"[0-9a-f]{16}", d["key_id"]), '"key_id" must be 16 lowercase hex digits')
    require(isinstance(d["signature"], str) and decode_standard_base64(d["signature"]) is not None
            and len(decode_standard_base64(d["signature"])) == 64, '"signature" must be the Base64 of 64 bytes')


def check_sealed_key_member(d):
    """encrypted_key: 60 bytes (section 7), 80 with machine_key (section 14); only in a bound file."""
    if "encrypted_key" not in d:
        return
    size = 80 if "machine_key" in d else 60
    value = d["encrypted_key"]
    raw = decode_standard_base64(value) if isinstance(value, str) else None
    require(raw is not None and len(raw) == size, '"encrypted_key" must be the Base64 of %d bytes' % size)
    require(d["hardware_id"] != "", '"encrypted_key" requires a "hardware_id"')


def check_v2_members(d, version):
    """Sections 13 and 14."""
    if version != 2:
        return
    require("request_nonce" in d or "machine_key" in d,
            'a version 2 file must carry "request_nonce" or "machine_key"; without, it is written as version 1')
    if "request_nonce" in d:
        require(decode_unpadded_base64url(d["request_nonce"], 16) is not None,
                '"request_nonce" must be the unpadded base64url of 16 bytes (22 characters)')
    if "machine_key" in d:
        require(decode_unpadded_base64url(d["machine_key"], 32) is not None,
                '"machine_key" must be the unpadded base64url of 32 bytes (43 characters)')
        require(d["hardware_id"] != "", '"machine_key" requires a "hardware_id"')


def decode_license(data):
    """Step 1 of section 8: the checked document, or LicenseError."""
    document = parse_document(decode_file_text(data))
    version = check_version(document)
    check_member_names(document, version)
    check_v1_members(document)
    check_v2_members(document, version)
    check_sealed_key_member(document)
    return document


def signed_bytes(document):
    payload = {k: v for k, v in document.items() if k != "signature"}
    return jcs(payload).encode("utf-8")


def check_signature(document, public_key):
    """Step 2: over the JCS the reader makes itself, never the file's own text."""
    if "key_id" in document and document["key_id"] != key_id_of(public_key):
        raise LicenseError(
            "SIGNATURE_INVALID",
            "signature verification failed: it is signed by key %s, which is not in the key set given (key %s)"
            % (document["key_id"], key_id_of(public_key)),
        )
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(base64.b64decode(document["signature"]), signed_bytes(document))
    except InvalidSignature:
        raise LicenseError("SIGNATURE_INVALID", "signature verification failed")


def check_window(document, now):
    if now < document["valid_from"]:
        raise LicenseError("LICENSE_NOT_YET_VALID", "license not yet valid")
    if now >= document["valid_until"]:
        raise LicenseError("LICENSE_EXPIRED", "license expired")


def check_binding(document, hardware_id):
    bound = document["hardware_id"]
    if bound == "":
        return
    if hardware_id is None:
        if "encrypted_key" in document:
            raise LicenseError("HARDWARE_ID_REQUIRED", "a hardware ID is required to check this file")
        return
    if unicodedata.normalize("NFC", hardware_id) != unicodedata.normalize("NFC", bound):
        suffix = ": " + DECRYPTION_FAILED if "encrypted_key" in document else ""
        raise LicenseError("HARDWARE_MISMATCH", "hardware ID mismatch" + suffix)


def open_v1_sealed_key(document):
    """Section 7: HKDF of the file's own hardware_id and license_id, then AES-256-GCM."""
    sealed = base64.b64decode(document["encrypted_key"])
    binding_key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=document["license_id"].encode("utf-8"),
        info=b"license-server/v1/offline-decryption-key",
    ).derive(document["hardware_id"].encode("utf-8"))
    try:
        return AESGCM(binding_key).decrypt(sealed[:12], sealed[12:], None)
    except InvalidTag:
        raise LicenseError("DECRYPTION_FAILED", DECRYPTION_FAILED)


# HPKE (RFC 9180) for DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM, written out as
# section 14 does rather than taken from a library, so the section's text is what is tested.
KEM_SUITE = b"KEM\x00\x20"
HPKE_SUITE = b"HPKE\x00\x20\x00\x01\x00\x02"


# public_bytes(Encoding.Raw, PublicFormat.Raw), not public_bytes_raw(): Debian's
# python3-cryptography (38) predates the latter, and CI may run that python.
def hkdf_extract(salt, ikm):
    return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()


def hkdf_expand(prk, info, length):
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def labeled_extract(suite, salt, label, ikm):
    return hkdf_extract(salt, b"HPKE-v1" + suite + label + ikm)


def labeled_expand(suite, prk, label, info, length):
    return hkdf_expand(prk, length.to_bytes(2, "big") + b"HPKE-v1" + suite + label + info, length)


def x25519(private_bytes, public_bytes):
    try:
        dh = X25519PrivateKey.from_private_bytes(private_bytes).exchange(X25519PublicKey.from_public_bytes(public_bytes))
    except ValueError:
        dh = bytes(32)  # OpenSSL refuses an all-zero result itself
    if dh == bytes(32):
        raise LicenseError("DECRYPTION_FAILED", DECRYPTION_FAILED)
    return dh


def hpke_key_and_nonce(dh, enc, pk_r, info):
    eae_prk = labeled_extract(KEM_SUITE, b"", b"eae_prk", dh)
    shared_secret = labeled_expand(KEM_SUITE, eae_prk, b"shared_secret", enc + pk_r, 32)
    psk_id_hash = labeled_extract(HPKE_SUITE, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(HPKE_SUITE, b"", b"info_hash", info)
    context = b"\x00" + psk_id_hash + info_hash
    secret = labeled_extract(HPKE_SUITE, shared_secret, b"secret", b"")
    key = labeled_expand(HPKE_SUITE, secret, b"key", context, 32)
    base_nonce = labeled_expand(HPKE_SUITE, secret, b"base_nonce", context, 12)
    return key, base_nonce


def machine_key_info(document):
    return ("license-server/v2/machine-key\n" + document["license_id"] + "\n" + document["hardware_id"]).encode("utf-8")


def hpke_seal(ephemeral_private, pk_r, info, plaintext):
    """SealBase with a given ephemeral key: only to check the vector's encrypted_key is what section 14 makes."""
    enc = X25519PrivateKey.from_private_bytes(ephemeral_private).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key, base_nonce = hpke_key_and_nonce(x25519(ephemeral_private, pk_r), enc, pk_r, info)
    return enc + AESGCM(key).encrypt(base_nonce, plaintext, b"")


def open_machine_sealed_key(document, machine_private_key):
    """Section 14: OpenBase with the machine's private key; without it nothing is tried."""
    if machine_private_key is None:
        raise LicenseError("MACHINE_KEY_MISSING", MACHINE_KEY_MISSING_MESSAGE)
    pk_r = decode_unpadded_base64url(document["machine_key"], 32)
    own_public = X25519PrivateKey.from_private_bytes(machine_private_key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    if own_public != pk_r:
        raise LicenseError("DECRYPTION_FAILED", DECRYPTION_FAILED + ": the machine private key given is not the one of the file's machine_key")
    sealed = base64.b64decode(document["encrypted_key"])
    enc, ct = sealed[:32], sealed[32:]
    key, base_nonce = hpke_key_and_nonce(x25519(machine_private_key, enc), enc, pk_r, machine_key_info(document))
    try:
        return AESGCM(key).decrypt(base_nonce, ct, b"")
    except InvalidTag:
        raise LicenseError("DECRYPTION_FAILED", DECRYPTION_FAILED)


def verify_license(data, public_key, hardware_id, now, machine_private_key=None):
    """Section 8 steps 1-5, in order: (document, decryption key or None), or LicenseError."""
    document = decode_license(data)
    check_signature(document, public_key)
    check_window(document, now)
    check_binding(document, hardware_id)
    if "encrypted_key" not in document:
        return document, None
    if "machine_key" in document:
        return document, open_machine_sealed_key(document, machine_private_key)
    return document, open_v1_sealed_key(document)


def check_machine_key_refusals(vector, public_key, now):
    """Without the private key (or with another one) the reader must not return a key."""
    problems = []
    wrong_key = bytes(range(1, 33))
    for label, private, code, message in (
        ("without the machine private key", None, "MACHINE_KEY_MISSING", MACHINE_KEY_MISSING_MESSAGE),
        ("with another private key", wrong_key, "DECRYPTION_FAILED", None),
    ):
        try:
            _, key = verify_license(vector["file"].encode("utf-8"), public_key, vector["hardware_id"], now, private)
            problems.append(failure(vector["name"], "%s: opened the key %s" % (label, key.hex() if key else None)))
        except LicenseError as error:
            if error.code != code or (message and error.message != message):
                problems.append(failure(vector["name"], "%s: %s %r, expected %s" % (label, error.code, error.message, code)))
    return problems


def check_license_vector(vector, public_key, now, directory, request):
    name = vector["name"]
    problems = []

    def expect(what, got, wanted):
        if got != wanted:
            problems.append(failure(name, "%s: got %r, expected %r" % (what, got, wanted)))

    private_hex = vector.get("machine_private_key_hex")
    private = bytes.fromhex(private_hex) if private_hex else None
    try:
        document, key = verify_license(vector["file"].encode("utf-8"), public_key, vector["hardware_id"], now, private)
    except LicenseError as error:
        return [failure(name, "refused: %s %s" % (error.code, error.message))]
    payload = {k: v for k, v in document.items() if k != "signature"}
    expect("payload", payload, vector["payload"])
    expect("canonical payload", signed_bytes(document).hex(), vector["canonical_payload_hex"])
    expect("signature", document["signature"], vector["signature"])
    expect("hardware_id", document["hardware_id"], vector["hardware_id"])
    expect("request_nonce", document.get("request_nonce"), vector["request_nonce"])
    expect("decryption key", key.hex() if key else None, vector["decryption_key_hex"])
    # The file answers the request of activation-request-v1.json (the vector file says so).
    expect("request_nonce against the request", document.get("request_nonce"), request["nonce"])
    expect("hardware_id against the request", document["hardware_id"], request["hardware_id"])
    if "machine_key" in document:
        expect("machine_key against the request", document["machine_key"], request["machine_key"])
        problems += check_machine_key_refusals(vector, public_key, now)
        if vector.get("ephemeral_private_key_hex"):
            resealed = hpke_seal(bytes.fromhex(vector["ephemeral_private_key_hex"]), decode_unpadded_base64url(document["machine_key"], 32),
                                 machine_key_info(document), bytes.fromhex(vector["decryption_key_hex"]))
            expect("encrypted_key sealed again with the ephemeral key", base64.b64encode(resealed).decode("ascii"), document["encrypted_key"])
    with open(os.path.join(directory, vector["lic_file"]), encoding="utf-8") as f:
        expect(vector["lic_file"], f.read(), vector["file"])
    return problems


def check_refused_license(vector, public_key, now):
    try:
        verify_license(vector["file"].encode("utf-8"), public_key, None, now)
    except LicenseError as error:
        if error.code != vector["code"] or error.message != vector["message"]:
            return [failure(vector["name"], "%s %r, expected %s %r" % (error.code, error.message, vector["code"], vector["message"]))]
        return []
    return [failure(vector["name"], "accepted; every reader of version 2 must refuse it")]


def check_licenses(vectors, path):
    directory = os.path.dirname(os.path.abspath(path))
    with open(os.path.join(directory, "activation-request-v1.json"), encoding="utf-8") as f:
        request = json.load(f)["request"]
    public_key = raw_public_key(vectors["public_key_pem"])
    failures = []
    # The description says the vectors verify with signing-key.pem; the key used must be that one.
    with open(os.path.join(directory, "signing-key.pem"), encoding="ascii") as f:
        if raw_public_key(f.read()) != public_key:
            failures.append(failure("public_key_pem", "is not the key of signing-key.pem"))
    checked = 0
    for vector in vectors["vectors"]:
        checked += 1
        failures += guarded(vector["name"], check_license_vector, vector, public_key, vectors["now"], directory, request)
    for vector in vectors["refuse"]:
        checked += 1
        failures += guarded(vector["name"], check_refused_license, vector, public_key, vectors["now"])
    return checked, failures


# ---------------------------------------------------------------------------------------------


def failure(name, why):
    return {"name": name, "why": why}


def guarded(name, check, *args):
    """A vector whose check raised (a missing file, a vector of an unexpected shape) is a failure
    of that vector, not a crash that would hide the other vectors' results."""
    try:
        return check(*args)
    except Exception as error:  # noqa: BLE001 - any error is reported, with its vector's name
        return [failure(name, "%s: %s" % (type(error).__name__, error))]


COMMANDS = {"hw2": check_hw2, "requests": check_requests, "licenses": check_licenses}


def main(argv):
    if len(argv) != 3 or argv[1] not in COMMANDS:
        sys.stderr.write("usage: request-reader.py {hw2|requests|licenses} VECTOR_FILE\n")
        return 2
    try:
        with open(argv[2], encoding="utf-8") as f:
            vectors = json.load(f)
        checked, failures = COMMANDS[argv[1]](vectors, argv[2])
    except Exception as error:  # noqa: BLE001 - still one JSON object on stdout, as callers parse it
        checked, failures = 0, [failure(argv[1], "%s: %s" % (type(error).__name__, error))]
    print(json.dumps({"checked": checked, "failures": failures}, ensure_ascii=False))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
