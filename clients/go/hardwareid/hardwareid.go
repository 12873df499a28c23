// Package hardwareid derives this machine's hardware ID the way the Node client does
// (src/client/hardware-id.ts and hardware-id-v2.ts, docs/client.md "Hardware ID").
//
// Derive gives "hw2-" on Linux (v2.go: the application-specific machine id, the DMI
// product UUID, the permanent MAC addresses of the network cards whatever their state,
// fixed disks' serials), and "hw1-" elsewhere or where no hw2 source can be read.
//
// DeriveV1 is the former derivation: "hw1-" and the first 40 hex
// digits of SHA-256 over "license-server/hardware-id/v1", a line feed, and these
// attributes, sorted, one per line, where readable:
//
//   - machine-id=<contents of /etc/machine-id, or /var/lib/dbus/machine-id>
//   - cpu=<the CPU model: /proc/cpuinfo "model name" on Linux>
//   - mac=<MAC address> of each network interface that is up and running with an
//     address, not loopback, not virtual by name (docker, veth, bridges, tun/tap,
//     WireGuard, ...) and not locally administered (random and virtual addresses)
//   - disk=<serial, or WWID> of each block device in /sys/block that is not a loop, RAM,
//     zram, device-mapper, md or optical device
//
// When none can be read, the one attribute is host=<platform>/<hostname>. Only the hash
// is used or sent, never the raw values. On an ordinary machine the ID is the same across
// restarts; in containers, cloned VMs or after a hardware change it is not: set a custom
// ID there (the client's Config.HardwareID).
package hardwareid

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
)

// Interface is a network interface as the derivation sees it.
type Interface struct {
	Name string
	// MAC is the hardware address, aa:bb:cc:dd:ee:ff.
	MAC string
	// Internal is true for a loopback interface.
	Internal bool
}

// Sources are where the attributes come from; SystemSources reads the machine, a test
// provides its own.
type Sources struct {
	// ReadFile returns a file's text, trimmed, or "" when it cannot be read.
	ReadFile func(path string) string
	// ListDir returns the names in a directory, or nothing when it cannot be read.
	ListDir func(path string) []string
	// CPUModel returns the CPU model, or "" when unknown.
	CPUModel func() string
	// Interfaces returns the network interfaces that are up and have an address.
	Interfaces func() ([]Interface, error)
	Hostname   func() string
	// Platform is Node's name for the OS: linux, darwin, win32, ...
	Platform func() string
}

// Derive returns this machine's hardware ID, hw2 where it can be derived (DeriveScheme).
// It fails only when it falls back to hw1 and the network interfaces cannot be listed.
func Derive() (string, error) { return DeriveScheme(HW2) }

// DeriveV1 returns this machine's "hw1-" ID. It fails only when the network interfaces
// cannot be listed.
func DeriveV1() (string, error) { return DeriveFrom(SystemSources()) }

// DeriveFrom returns the "hw1-" hardware ID of the attributes the sources give.
func DeriveFrom(s Sources) (string, error) {
	attributes, err := CollectAttributes(s)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte("license-server/hardware-id/v1\n" + strings.Join(attributes, "\n")))
	return "hw1-" + hex.EncodeToString(sum[:])[:40], nil
}

// Interfaces that come and go with containers, VPNs and hypervisors.
var (
	virtualInterface = regexp.MustCompile(`(?i)^(lo|docker|veth|br-|virbr|vmnet|vboxnet|tun|tap|wg|zt|cni|flannel|cali|kube|podman|lxc|utun|awdl|llw|bridge)`)
	macAddress       = regexp.MustCompile(`(?i)^([0-9a-f]{2}:){5}[0-9a-f]{2}$`)
	skippedDisk      = regexp.MustCompile(`^(loop|ram|zram|dm-|md|sr)`)
)

// CollectAttributes returns the sorted kind=value lines the ID is the hash of.
func CollectAttributes(s Sources) ([]string, error) {
	set := map[string]bool{}
	machineID := s.ReadFile("/etc/machine-id")
	if machineID == "" {
		machineID = s.ReadFile("/var/lib/dbus/machine-id")
	}
	if machineID != "" {
		set["machine-id="+machineID] = true
	}
	if cpu := s.CPUModel(); cpu != "" {
		set["cpu="+cpu] = true
	}
	interfaces, err := s.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, i := range interfaces {
		if i.Internal || virtualInterface.MatchString(i.Name) || !macAddress.MatchString(i.MAC) || i.MAC == "00:00:00:00:00:00" {
			continue
		}
		// The locally administered bit marks randomised and virtual addresses.
		if first, err := strconv.ParseUint(i.MAC[:2], 16, 8); err != nil || first&0x02 != 0 {
			continue
		}
		set["mac="+strings.ToLower(i.MAC)] = true
	}
	for _, disk := range s.ListDir("/sys/block") {
		if skippedDisk.MatchString(disk) {
			continue
		}
		serial := s.ReadFile("/sys/block/" + disk + "/device/serial")
		if serial == "" {
			serial = s.ReadFile("/sys/block/" + disk + "/device/wwid")
		}
		if serial != "" {
			set["disk="+serial] = true
		}
	}
	// Nothing stable could be read (an unusual OS or a locked-down sandbox): the host name.
	if len(set) == 0 {
		set["host="+s.Platform()+"/"+s.Hostname()] = true
	}
	attributes := make([]string, 0, len(set))
	for a := range set {
		attributes = append(attributes, a)
	}
	// JavaScript's sort: by UTF-16 code units.
	sort.Slice(attributes, func(i, j int) bool { return lessUTF16(attributes[i], attributes[j]) })
	return attributes, nil
}

func lessUTF16(a, b string) bool {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return ua[i] < ub[i]
		}
	}
	return len(ua) < len(ub)
}

// trimJS is JavaScript's String.prototype.trim (Unicode white space and the BOM).
func trimJS(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
}

// SystemSources reads this machine.
func SystemSources() Sources {
	return Sources{
		ReadFile: func(path string) string {
			data, err := os.ReadFile(path)
			if err != nil {
				return ""
			}
			return trimJS(strings.ToValidUTF8(string(data), "\uFFFD"))
		},
		ListDir:    listDir,
		CPUModel:   cpuModel,
		Interfaces: systemInterfaces,
		Hostname: func() string {
			name, _ := os.Hostname()
			return name
		},
		Platform: platform,
	}
}

// cpuModel is what Node's os.cpus()[0].model gives on x86 Linux and on macOS: the first
// "model name" of /proc/cpuinfo, or sysctl machdep.cpu.brand_string.
func cpuModel() string {
	switch runtime.GOOS {
	case "linux", "android":
		data, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			return ""
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "model name\t: ") {
				return trimJS(strings.TrimPrefix(line, "model name\t: "))
			}
		}
	case "darwin":
		out, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output()
		if err == nil {
			return trimJS(string(out))
		}
	}
	return ""
}

// systemInterfaces lists the interfaces Node's os.networkInterfaces() lists: up and
// running, with at least one IP address.
func systemInterfaces() ([]Interface, error) {
	list, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []Interface
	for _, i := range list {
		if i.Flags&net.FlagUp == 0 || !running(i.Name) {
			continue
		}
		if addrs, err := i.Addrs(); err != nil || len(addrs) == 0 {
			continue
		}
		out = append(out, Interface{Name: i.Name, MAC: i.HardwareAddr.String(), Internal: i.Flags&net.FlagLoopback != 0})
	}
	return out, nil
}

// running tells IFF_RUNNING on Linux (Go 1.19's net package has no FlagRunning);
// elsewhere, or when it cannot be read, an interface that is up counts.
func running(name string) bool {
	if runtime.GOOS != "linux" {
		return true
	}
	data, err := os.ReadFile(filepath.Join("/sys/class/net", name, "operstate"))
	if err != nil {
		return true
	}
	return runningFromOperstate(string(data))
}

// runningFromOperstate reads /sys/class/net/<if>/operstate. The kernel sets IFF_RUNNING in
// what getifaddrs (and so Node's os.networkInterfaces) sees when the interface is up and
// its operational state is "up" or "unknown" (dev_get_flags, netif_oper_up), and operstate
// says "down" for an interface that is not up. The "flags" file cannot tell: it holds the
// flags as configured, which do not carry IFF_RUNNING (0x1003 for an Ethernet interface
// that is up and running).
func runningFromOperstate(operstate string) bool {
	switch strings.TrimSpace(operstate) {
	case "up", "unknown":
		return true
	}
	return false
}

func platform() string {
	switch runtime.GOOS {
	case "windows":
		return "win32"
	case "solaris", "illumos":
		return "sunos"
	}
	return runtime.GOOS
}
