/**
 * license-server/client: what an application embeds to check its license. It imports
 * nothing of the server (no oclif, SQLite, pg); docs/client.md shows a complete example.
 */
export { LicenseClient, LicenseClientError } from './license-client.js';
export type { ClientWarning, Tier, TierFailure, UsageResult, ValidationResult } from './license-client.js';
export type { ActivationRequestOptions, ActivationRequestResult, InstallOptions, InstallResult, PendingActivationRequest } from './activation.js';
export { decodeActivationRequest, encodeActivationRequest, licenseKeyDigest } from '../lib/offline/activation-request.js';
export type { ActivationRequest } from '../lib/offline/activation-request.js';
export { CLOCK_ROLLBACK_TOLERANCE_MS } from './trust.js';
export { LicenseClientConfigError, defaultCacheDir } from './options.js';
export type { Clock, KeyRefreshOptions, LicenseClientOptions, OfflineOptions } from './options.js';
export type { KeyRefreshResult } from './key-refresh.js';
export { acceptOfferedKeys, endorsementStatement, verifyEndorsement } from '../lib/crypto/key-endorsement.js';
export type { AllowedKey, Endorsement, OfferedKey } from '../lib/crypto/key-endorsement.js';
export { deriveHardwareId } from './hardware-id.js';
export type { HardwareIdScheme } from './hardware-id.js';
export { verifyLicenseFile } from '../lib/offline/verify.js';
export { verifyGraceToken } from '../lib/licensing/grace-token.js';
export { publicKeyFromPem } from '../lib/crypto/ed25519-pem.js';
export { keyIdOf, parseKeySet } from '../lib/crypto/key-set.js';
export type { KeySet, KeySetInput, VerificationKey } from '../lib/crypto/key-set.js';
