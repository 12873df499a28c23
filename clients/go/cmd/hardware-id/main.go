// Command hardware-id prints this machine's hardware IDs as JSON, the way the Go client
// derives them: {"hardware_id": the default (hw2- where it can be derived), "hw1": the
// former derivation}. An operator reads the ID off a machine with it; the Node client's
// tests run it to compare both clients, also inside network namespaces.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"licenseserver.example/client/hardwareid"
)

func main() {
	current, err := hardwareid.Derive()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hardware-id:", err)
		os.Exit(1)
	}
	v1, err := hardwareid.DeriveV1()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hardware-id:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]string{"hardware_id": current, "hw1": v1})
	fmt.Println(string(out))
}
