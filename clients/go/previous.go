package client

import (
	"encoding/base64"
	"os"
	"regexp"
	"strings"

	"licenseserver.example/client/hardwareid"
	"licenseserver.example/client/offline"
)

// hardwareIDRecord is hardware-id.json: the ID this client used last, and the hw1- ID it
// used before it derived hw2- ones (docs/client.md, "Moving from hw1 to hw2").
type hardwareIDRecord struct {
	HardwareID         string `json:"hardware_id"`
	PreviousHardwareID string `json:"previous_hardware_id,omitempty"`
}

func (s *store) readHardwareIDs() *hardwareIDRecord {
	object, kind, _ := s.readJSON("hardware-id.json")
	if kind != clockTrusted {
		return nil
	}
	id, ok := object.Values["hardware_id"].(string)
	if !ok {
		return nil
	}
	previous, _ := object.Values["previous_hardware_id"].(string)
	return &hardwareIDRecord{HardwareID: id, PreviousHardwareID: previous}
}

func (s *store) writeHardwareIDs(record *hardwareIDRecord) error {
	return s.writeJSON("hardware-id.json", record)
}

var hw1ID = regexp.MustCompile(`^hw1-[0-9a-f]{40}$`)

// hw1Only is id when it is an hw1- ID, else "".
func hw1Only(id string) string {
	if hw1ID.MatchString(id) {
		return id
	}
	return ""
}

// deriveHW1 is the hw1 derivation of this machine; a test replaces it.
var deriveHW1 = hardwareid.DeriveV1

// previousHardwareID is the hw1- ID this machine used before it derived the hw2- ID in
// use, or "" (the ID was configured, or is not hw2), found once per client as the Node
// client finds it (src/client/previous-hardware-id.ts), the first of: hardware-id.json
// (its previous_hardware_id when it names the ID in use, its hardware_id when that is an
// hw1- one), the hardware_id of the cached grace token, that of the .lic file, and the
// hw1 derivation now. With offline mode on the answer is written to hardware-id.json.
func (c *Client) previousHardwareID(save save) string {
	c.previousOnce.Do(func() { c.previousID = c.findPreviousHardwareID(save) })
	return c.previousID
}

func (c *Client) findPreviousHardwareID(save save) string {
	current := c.cfg.hardwareID
	if !c.cfg.hardwareIDDerived || !strings.HasPrefix(current, "hw2-") {
		return ""
	}
	var record *hardwareIDRecord
	if c.cfg.enabled {
		record = c.store.readHardwareIDs()
	}
	if record != nil && record.HardwareID == current {
		return hw1Only(record.PreviousHardwareID)
	}
	previous := ""
	if record != nil {
		previous = hw1Only(record.HardwareID)
		if previous == "" {
			previous = hw1Only(record.PreviousHardwareID)
		}
	}
	if previous == "" && c.cfg.enabled {
		if cached := c.store.readGrace(); cached != nil {
			previous = hw1Only(graceTokenHardwareID(cached.Token))
		}
	}
	if previous == "" && c.cfg.enabled && c.cfg.licenseFile != "" {
		if data, err := os.ReadFile(c.cfg.licenseFile); err == nil {
			if decoded, err := offline.DecodeLicenseFile(data); err == nil {
				previous = hw1Only(decoded.Payload.HardwareID)
			}
		}
	}
	if previous == "" {
		if id, err := deriveHW1(); err == nil {
			previous = hw1Only(id)
		}
	}
	if c.cfg.enabled {
		save(func() error {
			return c.store.writeHardwareIDs(&hardwareIDRecord{HardwareID: current, PreviousHardwareID: previous})
		})
	}
	return previous
}

// graceTokenHardwareID is the hardware_id claim of a grace token, unverified: a hint of
// what the server admitted; nothing is trusted on it.
func graceTokenHardwareID(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	// The claim named exactly "hardware_id", as the token's verifier reads it (encoding/json
	// would take "HARDWARE_ID" too).
	value, _, _, err := offline.ParseJSON(payload)
	claims, isObject := value.(*offline.Object)
	if err != nil || !isObject {
		return ""
	}
	hardwareID, _ := claims.Values["hardware_id"].(string)
	return hardwareID
}

// boundIDs are the IDs a file or token of this machine may be bound to: the one in use,
// then the previous one.
func (c *Client) boundIDs(save save) []string {
	if previous := c.previousHardwareID(save); previous != "" {
		return []string{c.cfg.hardwareID, previous}
	}
	return []string{c.cfg.hardwareID}
}

// quietSave writes and forgets a failure: the next validation's warnings show it.
func quietSave(write func() error) bool { return write() == nil }

// firstBound runs check with each ID in order until one passes; a HARDWARE_MISMATCH tries
// the next, any other failure (and the last ID's) is returned.
func firstBound[T any](ids []string, check func(hardwareID string) (T, error)) (T, error) {
	var result T
	var err error
	for _, id := range ids {
		result, err = check(id)
		if err == nil || offline.CodeOf(err) != offline.CodeHardwareMismatch {
			return result, err
		}
	}
	return result, err
}
