package hardwareid

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// test/vectors/hardware-id-v2.json, which the Node client's tests check too.
type v2Vectors struct {
	MachineAppID       string `json:"machine_app_id"`
	MachineAppSpecific []struct {
		MachineID     string  `json:"machine_id"`
		AppSpecificID *string `json:"app_specific_id"`
	} `json:"machine_app_specific"`
	Trees []struct {
		Name       string            `json:"name"`
		Dirs       []string          `json:"dirs"`
		Files      map[string]string `json:"files"`
		Symlinks   map[string]string `json:"symlinks"`
		Attributes []string          `json:"attributes"`
		HardwareID *string           `json:"hardware_id"`
	} `json:"trees"`
}

func loadV2Vectors(t *testing.T) v2Vectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "test", "vectors", "hardware-id-v2.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v v2Vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Trees) == 0 || len(v.MachineAppSpecific) == 0 {
		t.Fatal("no vectors")
	}
	return v
}

func TestMachineAppIDIsTheVectorsOne(t *testing.T) {
	v := loadV2Vectors(t)
	if strings.ReplaceAll(v.MachineAppID, "-", "") != MachineAppID {
		t.Fatal(v.MachineAppID)
	}
}

func TestMachineAppSpecificVectors(t *testing.T) {
	for _, c := range loadV2Vectors(t).MachineAppSpecific {
		got, ok := MachineAppSpecificID(c.MachineID)
		if c.AppSpecificID == nil {
			if ok {
				t.Errorf("%s: %s, want none", c.MachineID, got)
			}
			continue
		}
		if !ok || got != *c.AppSpecificID {
			t.Errorf("%s: %s, want %s", c.MachineID, got, *c.AppSpecificID)
		}
	}
}

// buildTree makes a vector's file system under dir: directories, files, then links.
func buildTree(t *testing.T, dir string, dirs []string, files, links map[string]string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range files {
		file := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		link := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTreeVectors(t *testing.T) {
	for _, tree := range loadV2Vectors(t).Trees {
		// A directory whose name holds "usb" must not make every device a USB one.
		root := filepath.Join(t.TempDir(), "usb-root")
		buildTree(t, root, tree.Dirs, tree.Files, tree.Symlinks)
		lines := CollectAttributesV2(root)
		if len(lines) == 0 {
			lines = []string{}
		}
		if !reflect.DeepEqual(lines, tree.Attributes) {
			t.Errorf("%s:\n got %q\nwant %q", tree.Name, lines, tree.Attributes)
		}
		id, ok := DeriveV2(root)
		switch {
		case tree.HardwareID == nil && ok:
			t.Errorf("%s: %s, want none", tree.Name, id)
		case tree.HardwareID != nil && id != *tree.HardwareID:
			t.Errorf("%s: %s, want %s", tree.Name, id, *tree.HardwareID)
		}
	}
}

func TestTheRawMachineIDNeverLeaves(t *testing.T) {
	v := loadV2Vectors(t)
	tree := v.Trees[0]
	root := t.TempDir()
	buildTree(t, root, tree.Dirs, tree.Files, tree.Symlinks)
	raw := strings.TrimSpace(tree.Files["etc/machine-id"])
	id, _ := DeriveV2(root)
	if strings.Contains(strings.Join(CollectAttributesV2(root), "\n")+id, raw) {
		t.Fatal("the raw machine id is in the attributes or the ID")
	}
}

// systemd's own tool, where installed, computes the same application-specific id.
func TestSameAppSpecificIDAsSystemd(t *testing.T) {
	out, err := exec.Command("systemd-id128", "machine-id", "--app-specific="+MachineAppID).Output()
	if err != nil {
		t.Skipf("systemd-id128 cannot say: %v", err)
	}
	machineID, _ := readValue("/etc/machine-id")
	got, ok := MachineAppSpecificID(machineID)
	if !ok || got != strings.TrimSpace(string(out)) {
		t.Fatalf("%s, systemd says %s", got, strings.TrimSpace(string(out)))
	}
}

func TestThisMachineV2(t *testing.T) {
	id, err := Derive()
	if err != nil {
		t.Skipf("no hardware ID on this machine: %v", err)
	}
	if runtime.GOOS == "linux" {
		if _, ok := DeriveV2("/"); ok && !regexp.MustCompile(`^hw2-[0-9a-f]{64}$`).MatchString(id) {
			t.Fatal(id)
		}
	}
	again, _ := Derive()
	if again != id {
		t.Fatal(id, again)
	}
}

// Run by test/clients/go.test.ts with the Node client's deriveHardwareId() on this machine.
func TestSameV2IDAsNodeOnThisMachine(t *testing.T) {
	want := os.Getenv("LICENSE_NODE_HARDWARE_ID_V2")
	if want == "" {
		t.Skip("LICENSE_NODE_HARDWARE_ID_V2 is not set (test/clients/go.test.ts sets it)")
	}
	if id, err := Derive(); err != nil || id != want {
		t.Fatalf("Go derives %s (%v), Node %s", id, err, want)
	}
}
