/**
 * Prints this machine's hardware IDs as the Node client derives them, in the JSON of the Go
 * client's cmd/hardware-id: {"hardware_id": the default, "hw1": the former derivation}.
 * Run in a network namespace by test/client/hardware-id-netns.test.ts.
 */
import { deriveHardwareId, deriveHardwareIdV1 } from '../../src/client/hardware-id.js';

process.stdout.write(`${JSON.stringify({ hardware_id: deriveHardwareId(), hw1: deriveHardwareIdV1() })}\n`);
