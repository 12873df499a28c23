package hardwareid

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"
)

// MachineAppID is the application id of sd_id128_get_machine_app_specific for this
// product: the 16 bytes of the UUID 6b2df99a-b35d-4cda-abef-ec080a35b4c9 (docs/client.md,
// "hw2"). Fixed for ever: a new value would give every machine a new ID.
const MachineAppID = "6b2df99ab35d4cdaabefec080a35b4c9"

const domainV2 = "license-server/hardware-id/v2\n"

// Scheme names a derivation: HW2 (the default) or the former HW1.
type Scheme string

const (
	HW1 Scheme = "hw1"
	HW2 Scheme = "hw2"
)

// DeriveScheme returns this machine's hardware ID (docs/client.md, "Hardware ID"): with HW2,
// "hw2-" on Linux, and "hw1-" elsewhere and on a Linux system where no hw2 source can be
// read; with HW1, the former derivation, as a client of an older version derived it.
func DeriveScheme(scheme Scheme) (string, error) {
	if scheme != HW1 && runtime.GOOS == "linux" {
		if id, ok := DeriveV2("/"); ok {
			return id, nil
		}
	}
	return DeriveV1()
}

// DeriveV2 returns the "hw2-" hardware ID of the Linux machine whose file system is at
// root: "hw2-" and the 64 hex digits of SHA-256 over "license-server/hardware-id/v2", a
// line feed and the lines of CollectAttributesV2 joined by line feeds. It is false when
// no source can be read. Only the hash leaves it.
func DeriveV2(root string) (string, bool) {
	lines := CollectAttributesV2(root)
	if len(lines) == 0 {
		return "", false
	}
	sum := sha256.Sum256([]byte(domainV2 + strings.Join(lines, "\n")))
	return "hw2-" + hex.EncodeToString(sum[:]), true
}

// CollectAttributesV2 returns the attribute lines, deduplicated and sorted by their bytes.
// The raw machine id is not among them: only its application-specific form.
func CollectAttributesV2(root string) []string {
	at := func(parts ...string) string { return filepath.Join(append([]string{root}, parts...)...) }
	set := map[string]bool{}
	machineID, ok := readValue(at("etc", "machine-id"))
	if !ok {
		machineID, _ = readValue(at("var", "lib", "dbus", "machine-id"))
	}
	if id, ok := MachineAppSpecificID(machineID); ok {
		set["machine-app-id="+id] = true
	}
	// The DMI product UUID is not read: the kernel lets only root read it, so a service run as
	// root and the same application run by a user would derive two IDs (docs/client.md).
	for _, name := range listDir(at("sys", "class", "net")) {
		if mac, ok := permanentMAC(root, name); ok {
			set["mac="+mac] = true
		}
	}
	for _, name := range listDir(at("sys", "block")) {
		if serial, ok := diskSerial(root, name); ok {
			set["disk="+serial] = true
		}
	}
	lines := make([]string, 0, len(set))
	for line := range set {
		lines = append(lines, line)
	}
	sort.Strings(lines)
	return lines
}

var (
	dashedUUID   = regexp.MustCompile(`(?i)^([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})$`)
	hex32        = regexp.MustCompile(`(?i)^[0-9a-f]{32}$`)
	allZero      = regexp.MustCompile(`^0+$`)
	macV2        = regexp.MustCompile(`^[0-9a-f]{2}(:[0-9a-f]{2}){5,19}$`)
	zeroMAC      = regexp.MustCompile(`^(00:?)+$`)
	skippedDisk2 = regexp.MustCompile(`^(loop|ram|zram|dm-|md|sr|nbd)`)
	controls     = regexp.MustCompile("[\x00-\x1f\x7f]")
)

// MachineAppSpecificID is systemd's sd_id128_get_machine_app_specific: HMAC-SHA256 keyed
// with the 16 bytes of the machine id over the 16 bytes of MachineAppID, its first 16
// bytes with the UUID version set to 4 (byte 6) and the variant to DCE (byte 8), as 32
// lowercase hex digits. The machine id is 32 hex digits (or a dashed UUID); anything else,
// or the all-zero id, is no id.
func MachineAppSpecificID(machineID string) (string, bool) {
	id := dashedUUID.ReplaceAllString(machineID, "$1$2$3$4$5")
	if !hex32.MatchString(id) || allZero.MatchString(id) {
		return "", false
	}
	key, _ := hex.DecodeString(id)
	app, _ := hex.DecodeString(MachineAppID)
	mac := hmac.New(sha256.New, key)
	mac.Write(app)
	for i := range key {
		key[i] = 0
	}
	sum := mac.Sum(nil)[:16]
	sum[6] = (sum[6] & 0x0f) | 0x40
	sum[8] = (sum[8] & 0x3f) | 0x80
	return hex.EncodeToString(sum), true
}

// permanentMAC is the card's own address, whatever its state: one with a device link
// (virtual interfaces have none), not on USB, not wireless (its address is randomised at
// will), from permaddr when the file is there, else address when addr_assign_type is 0
// (NET_ADDR_PERM).
func permanentMAC(root, name string) (string, bool) {
	dir := filepath.Join(root, "sys", "class", "net", name)
	device, ok := resolvedUnder(root, filepath.Join(dir, "device"))
	if !ok || strings.Contains(device, "/usb") {
		return "", false
	}
	for _, marker := range []string{"wireless", "phy80211"} {
		if _, err := os.Lstat(filepath.Join(dir, marker)); err == nil {
			return "", false
		}
	}
	if perm, ok := readValue(filepath.Join(dir, "permaddr")); ok {
		if mac, ok := normalMAC(perm); ok {
			return mac, true
		}
	}
	if kind, _ := readValue(filepath.Join(dir, "addr_assign_type")); kind != "0" {
		return "", false
	}
	address, _ := readValue(filepath.Join(dir, "address"))
	return normalMAC(address)
}

// diskSerial is the serial of a fixed disk: not removable, not a loop, RAM, mapper, RAID,
// optical or network device, not virtual, not on USB; the first of device/serial, serial,
// device/wwid and wwid that is set.
func diskSerial(root, name string) (string, bool) {
	if skippedDisk2.MatchString(name) {
		return "", false
	}
	dir := filepath.Join(root, "sys", "block", name)
	if removable, _ := readValue(filepath.Join(dir, "removable")); removable != "0" {
		return "", false
	}
	resolved, ok := resolvedUnder(root, dir)
	if !ok || strings.Contains(resolved, "/devices/virtual/") || strings.Contains(resolved, "/usb") {
		return "", false
	}
	for _, file := range []string{"device/serial", "serial", "device/wwid", "wwid"} {
		if value, ok := readValue(filepath.Join(dir, filepath.FromSlash(file))); ok {
			return value, true
		}
	}
	return "", false
}

// normalMAC is a MAC address in lowercase, or false for anything else and for an all-zero one.
func normalMAC(value string) (string, bool) {
	mac := strings.ToLower(value)
	if !macV2.MatchString(mac) || zeroMAC.MatchString(mac) {
		return "", false
	}
	return mac, true
}

// resolvedUnder is where a path leads once every link is followed, as a path from root
// beginning with "/" (a test tree in /tmp/usb-x is not a USB device); false when link is
// not there or leads nowhere.
func resolvedUnder(root, link string) (string, bool) {
	if _, err := os.Lstat(link); err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(link)
	if err != nil {
		return "", false
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", false
	}
	base, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", false
	}
	if base, err = filepath.Abs(base); err != nil {
		return "", false
	}
	relative, err := filepath.Rel(base, real)
	if err != nil {
		return "", false
	}
	return "/" + filepath.ToSlash(relative), true
}

// readValue is a sysfs or /etc value: the file's bytes, valid UTF-8, with ASCII white space
// (space, tab, CR, LF) cut from both ends; false when unreadable, empty, not UTF-8 or
// holding a control character.
func readValue(file string) (string, bool) {
	data, err := os.ReadFile(file)
	if err != nil || !utf8.Valid(data) {
		return "", false
	}
	value := string(bytes.Trim(data, " \t\r\n"))
	if value == "" || controls.MatchString(value) {
		return "", false
	}
	return value, true
}

func listDir(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}
