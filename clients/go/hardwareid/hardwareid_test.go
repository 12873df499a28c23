package hardwareid

import (
	"errors"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The fixture of the Node client's test (test/client/hardware-id.test.ts).
func fixture() Sources {
	files := map[string]string{
		"/etc/machine-id":                "4f1c9e2a8b7d4c3e9f0a1b2c3d4e5f60",
		"/sys/block/sda/device/serial":   "WD-WCC4N1234567",
		"/sys/block/loop0/device/serial": "ignored",
	}
	return Sources{
		ReadFile: func(path string) string { return files[path] },
		ListDir: func(path string) []string {
			if path == "/sys/block" {
				return []string{"sda", "loop0"}
			}
			return nil
		},
		CPUModel: func() string { return "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz" },
		Interfaces: func() ([]Interface, error) {
			return []Interface{
				{Name: "lo", MAC: "00:00:00:00:00:00", Internal: true},
				{Name: "eth0", MAC: "3C:7C:3F:1A:2B:3C"},
				{Name: "docker0", MAC: "02:42:ac:11:00:02"},
				{Name: "wlan0", MAC: "5a:11:22:33:44:55"},
				{Name: "veth12ab", MAC: "7e:00:00:00:00:01"},
			}, nil
		},
		Hostname: func() string { return "build-host" },
		Platform: func() string { return "linux" },
	}
}

func TestAttributes(t *testing.T) {
	got, err := CollectAttributes(fixture())
	want := []string{
		"cpu=Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz",
		"disk=WD-WCC4N1234567",
		"mac=3c:7c:3f:1a:2b:3c",
		"machine-id=4f1c9e2a8b7d4c3e9f0a1b2c3d4e5f60",
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%q %v", got, err)
	}
}

// The expected IDs are what the Node client's deriveHardwareId gives for the same
// sources, so both clients name a machine alike.
func TestSameIDAsTheNodeClient(t *testing.T) {
	id, err := DeriveFrom(fixture())
	if err != nil || id != "hw1-e70fc9e584303744f97da4f866eace2418416cba" {
		t.Fatalf("%s %v", id, err)
	}
	bare := fixture()
	bare.ReadFile = func(string) string { return "" }
	bare.ListDir = func(string) []string { return nil }
	bare.CPUModel = func() string { return "" }
	bare.Interfaces = func() ([]Interface, error) { return nil, nil }
	if got, _ := CollectAttributes(bare); !reflect.DeepEqual(got, []string{"host=linux/build-host"}) {
		t.Fatalf("%q", got)
	}
	if id, _ := DeriveFrom(bare); id != "hw1-5d2739907e994b935f8134bf7eb6356554430df5" {
		t.Fatal(id)
	}
}

func TestAHashNotTheValues(t *testing.T) {
	id, _ := DeriveFrom(fixture())
	if !regexp.MustCompile(`^hw1-[0-9a-f]{40}$`).MatchString(id) {
		t.Fatal(id)
	}
	other := fixture()
	other.CPUModel = func() string { return "AMD EPYC 7763" }
	if id2, _ := DeriveFrom(other); id2 == id {
		t.Fatal("another CPU, the same ID")
	}
	for _, raw := range []string{"4f1c9e2a", "WD-WCC4N", "3c:7c:3f"} {
		if strings.Contains(id, raw) {
			t.Fatal(raw)
		}
	}
}

func TestVirtualInterfacesDoNotCount(t *testing.T) {
	base := fixture()
	withVPN := fixture()
	withVPN.Interfaces = func() ([]Interface, error) {
		list, _ := base.Interfaces()
		return append(list, Interface{Name: "tun0", MAC: "00:ff:11:22:33:44"}, Interface{Name: "wg0", MAC: "00:ff:11:22:33:45"}, Interface{Name: "eth1", MAC: ""}), nil
	}
	a, _ := DeriveFrom(base)
	b, _ := DeriveFrom(withVPN)
	if a != b {
		t.Fatal("a VPN interface changed the ID")
	}
	broken := fixture()
	broken.Interfaces = func() ([]Interface, error) { return nil, errors.New("no netlink") }
	if _, err := DeriveFrom(broken); err == nil {
		t.Fatal("an interface listing that fails must fail the derivation")
	}
}

func TestThisMachine(t *testing.T) {
	a, err := DeriveV1()
	if err != nil {
		t.Skipf("no hardware ID on this machine: %v", err)
	}
	b, _ := DeriveV1()
	if a != b || !strings.HasPrefix(a, "hw1-") {
		t.Fatal(a, b)
	}
	attrs, _ := CollectAttributes(SystemSources())
	t.Logf("%s from %d attributes", a, len(attrs))
}

// Node lists an interface when getifaddrs has IFF_UP and IFF_RUNNING for it; on Linux the
// kernel sets IFF_RUNNING for an up interface whose operstate is "up" or "unknown"
// (loopback, tun), and sysfs says "down" for one that is not up.
func TestRunningFromOperstate(t *testing.T) {
	for state, want := range map[string]bool{
		"up\n": true, "unknown\n": true, "down\n": false, "dormant\n": false,
		"lowerlayerdown\n": false, "notpresent\n": false, "testing\n": false,
	} {
		if got := runningFromOperstate(state); got != want {
			t.Errorf("%q: %v", state, got)
		}
	}
}

// Run by test/clients/go.test.ts with what Node sees on this machine: the names
// os.networkInterfaces() lists and, where both clients read the same attributes (x86-64
// Linux), deriveHardwareId(). Skipped when run alone.
func TestSameInterfacesAndIDAsNodeOnThisMachine(t *testing.T) {
	names := os.Getenv("LICENSE_NODE_INTERFACES")
	if names == "" {
		t.Skip("LICENSE_NODE_INTERFACES is not set (test/clients/go.test.ts sets it)")
	}
	listed, err := systemInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range listed {
		got = append(got, i.Name)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != names {
		t.Fatalf("Go lists %q, Node lists %q", strings.Join(got, ","), names)
	}
	if want := os.Getenv("LICENSE_NODE_HARDWARE_ID"); want != "" {
		if id, err := DeriveV1(); err != nil || id != want {
			t.Fatalf("Go derives %s (%v), Node %s", id, err, want)
		}
	}
}
